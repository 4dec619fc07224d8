"""Retrain the ranker on observational click logs (what the `ranker_candidates` asset runs; DuckDB glue).

Window: the newest partitions before the `holdout_days` newest ones, which the fairness audit evaluates
(`fair_pipeline.platform.windows.holdout_window`).

Training: production impressions of the window, aggregated in SQL per (item, position) and joined with
the chosen position-bias curve into one row per item (impressions N, clicks, R = sum clicks / ŵ_position),
then two weighted binomial rows per item (``training.click_training.relevance_rows``): the rows never
leave DuckDB one impression at a time. Features: the item table's numeric columns (f0.. for the
simulator); group: the item's group label (fit time only; the model scores from features alone).

Held-out audit: the `shuffle` requests of the same window. They are never used for training (other
requests, another policy) and their positions are random, so a click is unconfounded by the
production ranking; aggregated per item (score is constant per item) into the audit's
(score, n_pos, n_neg) grid. The impressions of one item share its relevance, so the Lemma 3 SEs,
which treat impressions as independent, are optimistic for this label. When the simulator's truth
exists (`landing/_truth/date=D/items.parquet`), every catalogue item is also audited against its true
relevance Y(1): evaluation only, never read for training.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from fair_pipeline.audit import AuditInputError, audit_aggregates, compare_groups
from fair_pipeline.ingestion.landing import truth_dir
from fair_pipeline.ingestion.catalogue_dates import delivered_columns, items_as_of
import pyarrow as pa

from fair_pipeline.platform.engines import as_warehouse, fetch_rows
from fair_pipeline.platform.warehouse import quote_identifier
from fair_pipeline.platform.windows import (
    DEFAULT_HOLDOUT_DAYS,
    DEFAULT_MIN_DAYS,
    PartitionWindow,
    calendar_window,
    holdout_window,
)
from fair_pipeline.training import PathPoint, lambda_path
from fair_pipeline.training.click_training import RelevanceRows, audit_rows, relevance_rows
from fair_pipeline.training.penalized.gaps import CUTOFFS, gap_table, group_table

OBSERVATIONAL = "staging.stg_observational_impressions"
RANDOMIZED = "staging.stg_randomized_impressions"
ITEMS = "staging.stg_items"
NON_FEATURES = {"item_id", "group_id", "group_label"}
HELDOUT_CLICKS = "click_shuffle"
HELDOUT_TRUTH = "truth_relevance"


class RankerTrainingError(ValueError):
    """Missing tables, an empty window, unknown feature columns, positions without a weight."""


def _require(con, qualified: str, what: str) -> None:
    if not as_warehouse(con).table_exists(tuple(qualified.split("."))):
        raise RankerTrainingError(f"{qualified} does not exist; materialize {what} first")


def training_window(con, window_days: int, end: str | dt.date | None = None,
                    holdout_days: int = DEFAULT_HOLDOUT_DAYS) -> PartitionWindow:
    """The newest `window_days` partitions of observational impressions before the `holdout_days` newest ones
    on or before `end` (those are the fairness audit's)."""
    return holdout_window(con, OBSERVATIONAL, window_days, end, holdout_days, error=RankerTrainingError,
                          hint="materialize the observational impressions first")


def partition_window(con, first: dt.date, last: dt.date, day: dt.date, min_days: int = DEFAULT_MIN_DAYS) -> PartitionWindow:
    """Asset partition `day`'s training window: the calendar days first..last of observational impressions (its
    partition mapping's span, before `day`, which the audit of partition D evaluates)."""
    return calendar_window(con, OBSERVATIONAL, first, last, min_days=min_days, held_out=(day,),
                           error=RankerTrainingError,
                           hint="ingest (or backfill) earlier days first")


def feature_columns(con, requested: list[str] | None = None, day: dt.date | str | None = None) -> list[str]:
    """The item features of partition `day` (None: the newest catalogue): `requested` (validated against the items
    and the catalogue that holds on `day`) or every numeric column that catalogue delivered (`delivered_columns`:
    a column added or dropped by another day's delivery never changes this day's features)."""
    _require(con, ITEMS, "the items")
    types = {field.name: field.type for field in as_warehouse(con).query_arrow(f"SELECT * FROM {ITEMS} LIMIT 0").schema}
    numeric = [c for c, t in types.items() if c not in NON_FEATURES and _is_numeric(t)]
    delivered = delivered_columns(con, day, numeric)
    catalogue = f"the catalogue that holds on {day}" if day else "the newest catalogue"
    if not requested:
        if not delivered:
            raise RankerTrainingError(f"{ITEMS} has no numeric feature column with values in {catalogue} "
                                      f"(columns: {list(types)})")
        return delivered
    unknown = [c for c in requested if c not in types]
    not_numeric = [c for c in requested if c in types and c not in numeric]
    absent = [c for c in requested if c in numeric and c not in delivered]
    if unknown or not_numeric or absent:
        raise RankerTrainingError(
            f"feature columns {unknown or ''}{' not in ' + ITEMS if unknown else ''}"
            f"{'; not numeric: ' + str(not_numeric) if not_numeric else ''}"
            f"{'; not delivered in ' + catalogue + ': ' + str(absent) if absent else ''} "
            f"(numeric columns delivered there: {delivered})"
        )
    return list(requested)


def _is_numeric(kind: pa.DataType) -> bool:
    """Numbers a model can use as a feature (signed integers, floats, decimals: the warehouse's numeric types)."""
    return pa.types.is_signed_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def _select_features(features: list[str]) -> str:
    return ", ".join(f"i.{quote_identifier(c)}" for c in features)


def _window_params(window: PartitionWindow) -> dict:
    return {"first": window.first, "last": window.last}


def _catalogue(engine, window: PartitionWindow, day: dt.date | None) -> tuple[str, dict]:
    """The item catalogue as of `day` (default: the day the window trains for, its held-out partition) and the
    window's parameters with it."""
    items, params = items_as_of(engine, day or (window.held_out[-1] if window.held_out else None))
    return items, _window_params(window) | params


@dataclass
class TrainingData:
    items: pd.DataFrame  # one row per shown item: item_id, group, features, impressions, clicks, relevant_weight
    rows: RelevanceRows
    impressions: int
    clicks: int
    unknown_item_impressions: int  # impressions of items missing from the item table (not trainable)


def training_data(con, window: PartitionWindow, curve: pd.DataFrame, features: list[str],
                  day: dt.date | None = None) -> TrainingData:
    """Per-item IPW aggregates of the window's production impressions (SQL on the engine), and the training rows.
    The weighted clicks are summed as DECIMAL: a double sum's last bits depend on the order threads add the
    cells, which moves with whatever else the log table holds, and the fit would carry that into the model."""
    engine = as_warehouse(con)
    positions = fetch_rows(engine,
        f"SELECT DISTINCT position FROM {OBSERVATIONAL} WHERE partition_date BETWEEN $first AND $last "
        "AND policy = 'production'", _window_params(window))
    missing = sorted({p for (p,) in positions} - set(curve["position"].astype(int)))
    if missing:
        raise RankerTrainingError(
            f"positions {missing[:10]} of the training window have no position-bias weight "
            f"(the chosen curve covers 1..{len(curve)}); re-materialize marts/position_bias_curves over this window"
        )
    items, params = _catalogue(engine, window, day)
    engine.register_frame("_ipw_curve", curve[["position", "weight"]].astype({"position": "int32", "weight": "float64"}))
    try:
        frame = engine.query_df(
            f"""
            WITH cells AS (
                SELECT item_id, position, count(*) AS impressions, sum(click) AS clicks
                FROM {OBSERVATIONAL}
                WHERE partition_date BETWEEN $first AND $last AND policy = 'production'
                GROUP BY item_id, position
            ), per_item AS (
                SELECT c.item_id, sum(c.impressions) AS impressions, sum(c.clicks) AS clicks,
                       CAST(sum(CAST(c.clicks / w.weight AS DECIMAL(38, 18))) AS DOUBLE) AS relevant_weight
                FROM cells c JOIN _ipw_curve w ON c.position = w.position
                GROUP BY c.item_id
            )
            SELECT p.item_id, i.group_label AS "group", {_select_features(features)},
                   p.impressions, p.clicks, p.relevant_weight
            FROM per_item p JOIN {items} i ON p.item_id = i.item_id
            ORDER BY p.item_id
            """,
            params,
        )
    finally:
        engine.unregister_frame("_ipw_curve")
    [(impressions, clicks)] = fetch_rows(engine,
        f"SELECT count(*), coalesce(sum(click), 0) FROM {OBSERVATIONAL} "
        "WHERE partition_date BETWEEN $first AND $last AND policy = 'production'", _window_params(window))
    if frame.empty:
        raise RankerTrainingError(f"no production impressions of catalogued items in {window.label}")
    rows = relevance_rows(frame[features].to_numpy(float), frame["group"].to_numpy(object),
                          frame["impressions"].to_numpy(float), frame["relevant_weight"].to_numpy(float))
    return TrainingData(frame, rows, int(impressions), int(clicks), int(impressions - frame["impressions"].sum()))


def heldout_click_aggregates(con, window: PartitionWindow, features: list[str],
                             day: dt.date | None = None) -> pd.DataFrame:
    """Per item of the window's shuffle traffic: group, features (catalogue as of `day`), n_pos = clicks, n_neg =
    non-clicks."""
    engine = as_warehouse(con)
    if not engine.table_exists(tuple(RANDOMIZED.split("."))):
        return pd.DataFrame(columns=["item_id", "group", *features, "n_pos", "n_neg"])
    items, params = _catalogue(engine, window, day)
    return engine.query_df(
        f"""
        SELECT r.item_id, i.group_label AS "group", {_select_features(features)},
               sum(r.click) AS n_pos, count(*) - sum(r.click) AS n_neg
        FROM {RANDOMIZED} r JOIN {items} i ON r.item_id = i.item_id
        WHERE r.partition_date BETWEEN $first AND $last AND r.policy = 'shuffle'
        GROUP BY r.item_id, i.group_label, {_select_features(features)}
        ORDER BY r.item_id
        """,
        params,
    )


def truth_items(con, landing: Path, features: list[str], day: dt.date | str | None = None) -> pd.DataFrame | None:
    """Catalogue items with the simulator's true relevance of partition `day`, or None without simulator truth
    (evaluation only)."""
    path = truth_dir(landing, day) / "items.parquet"
    if not path.exists():
        return None
    truth = pd.read_parquet(path, columns=["item_id", "relevance"])
    catalogue, params = items_as_of(con, day)
    items = as_warehouse(con).query_df(f'SELECT i.item_id, i.group_label AS "group", {_select_features(features)} '
                                       f'FROM {catalogue} i ORDER BY i.item_id', params)
    return items.merge(truth, on="item_id", how="inner")


def _long_audit(report) -> pd.DataFrame:
    per_group = group_table(report)
    names = list(dict.fromkeys(per_group["group"]))
    gaps = [gap_table(report, a, b) for a, b in combinations(names, 2)]
    empty = pd.DataFrame(columns=["cutoff", "group_a", "group_b", "gap", "se", "ci_low", "ci_high", "z", "p_value",
                                  "estimable", "n_a", "n_b"])
    return audit_rows(per_group, pd.concat(gaps, ignore_index=True) if gaps else empty)


def _overall(report) -> dict:
    pooled = report.overall.set_index("cutoff").loc[1.0]
    return {"auc": float(pooled["auc"]), "auc_se": float(pooled["se"]),
            "n_pos": int(pooled["n_pos"]), "n_neg": int(pooled["n_neg"])}


def _label_counts(source: str, data: pd.DataFrame) -> dict:
    if source == HELDOUT_CLICKS:
        return {"n_pos": int(data["n_pos"].sum()), "n_neg": int(data["n_neg"].sum())}
    return {"n_pos": int(data["relevance"].sum()), "n_neg": int(len(data) - data["relevance"].sum())}


def audit_model(model, features: list[str], clicks: pd.DataFrame, truth: pd.DataFrame | None,
                cutoffs=CUTOFFS) -> tuple[pd.DataFrame, dict]:
    """Long audit rows (column `label_source`) and held-out summaries per label source.

    A label source without both classes is reported as not audited (summary with a `note`), not as 0."""
    cutoffs = sorted(set(float(c) for c in cutoffs) | {1.0})
    frames, summaries = [], {}
    sources = [(HELDOUT_CLICKS, clicks)] + ([(HELDOUT_TRUTH, truth)] if truth is not None else [])
    for source, data in sources:
        if data.empty:
            what = "no shuffle traffic in the window" if source == HELDOUT_CLICKS else "no catalogue item has a truth label"
            summaries[source] = {"auc": np.nan, "auc_se": np.nan, "n_pos": 0, "n_neg": 0, "note": f"not audited: {what}"}
            continue
        try:
            if source == HELDOUT_CLICKS:
                aggregates = data.assign(score=model.decision_function(data[features].to_numpy(float)))
                # one row per item with its clicks and skips: the item is the cluster (population estimand)
                report = audit_aggregates(aggregates[["item_id", "group", "score", "n_pos", "n_neg"]], cutoffs,
                                          cluster_cols=["item_id"], estimand="item_clustered")
            else:
                report = compare_groups(model.decision_function(data[features].to_numpy(float)),
                                        data["relevance"].to_numpy(), data["group"].to_numpy(object), cutoffs)
        except AuditInputError as error:
            summaries[source] = {"auc": np.nan, "auc_se": np.nan, **_label_counts(source, data),
                                 "note": f"not audited: {error}"}
            continue
        frames.append(_long_audit(report).assign(label_source=source))
        summaries[source] = {**_overall(report), "note": ""}
    audit = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return audit, summaries


@dataclass
class Candidate:
    """One retrained ranker at one lambda with its held-out audit."""

    point: PathPoint
    audit: pd.DataFrame  # long rows, `label_source` column
    heldout: dict  # label source -> {auc, auc_se, n_pos, n_neg, note}


def fit_candidates(data: TrainingData, features: list[str], lambdas, penalty_score: str,
                   clicks: pd.DataFrame, truth: pd.DataFrame | None) -> list[Candidate]:
    """A warm-started lambda path (L-BFGS) on the IPW rows, each point audited on held-out labels."""
    rows = data.rows
    candidates = []
    with threadpool_limits(limits=1, user_api="blas"):  # threads only add contention at these sizes
        points = lambda_path(rows.X, rows.y, rows.groups, sorted(lambdas), sample_weight=rows.sample_weight,
                             penalty_score=penalty_score)
        for point in points:
            audit, heldout = audit_model(point.model, features, clicks, truth)
            candidates.append(Candidate(point, audit, heldout))
    return candidates


def _pauc_by_group(audit: pd.DataFrame, source: str) -> str:
    if audit.empty:
        return "{}"
    rows = audit[(audit["label_source"] == source) & (audit["row_type"] == "group")]
    nested = {
        str(group): {f"{r.cutoff:g}": {"pauc": _plain(r.auc), "se": _plain(r.se), "n_pos": _plain(r.n_pos),
                                       "n_neg": _plain(r.n_neg), "estimable": bool(r.estimable)}
                     for r in part.itertuples()}
        for group, part in rows.groupby("group", sort=True)
    }
    return json.dumps(nested)


def _plain(value):
    return None if value is None or not np.isfinite(value) else float(value)


def candidates_frame(candidates: list[Candidate], window: PartitionWindow, features: list[str], penalty_score: str,
                     data: TrainingData, curve_method: str, run_ids: list[str]) -> pd.DataFrame:
    """One row per candidate: what `marts.ranker_candidates` stores, ready for model selection."""
    rows = []
    for candidate, run_id in zip(candidates, run_ids):
        point, clicks = candidate.point, candidate.heldout[HELDOUT_CLICKS]
        truth = candidate.heldout.get(HELDOUT_TRUTH, {})
        rows.append({
            "candidate_id": f"{window.last}/{penalty_score}/lam={point.lam:g}",
            "window_start": window.first, "window_end": window.last, "partitions": len(window.dates),
            "penalty_score": penalty_score, "lam": point.lam,
            "features": json.dumps(features),
            "coefficients": json.dumps(dict(zip(features, map(float, point.model.coef_.ravel())))),
            "intercept": float(point.model.intercept_[0]),
            "mi_proxy_train": point.mi_proxy, "n_iter": point.n_iter, "converged": point.converged,
            "fit_seconds": point.fit_seconds,
            "n_items_train": data.rows.n_items, "impressions_train": data.impressions, "clicks_train": data.clicks,
            "clipped_items": data.rows.clipped_items, "position_bias_method": curve_method,
            "heldout_label": HELDOUT_CLICKS, "heldout_auc": clicks["auc"], "heldout_auc_se": clicks["auc_se"],
            "heldout_n_pos": clicks["n_pos"], "heldout_n_neg": clicks["n_neg"], "heldout_note": clicks["note"],
            "heldout_pauc_by_group": _pauc_by_group(candidate.audit, HELDOUT_CLICKS),
            "truth_auc": truth.get("auc", np.nan), "truth_auc_se": truth.get("auc_se", np.nan),
            "truth_pauc_by_group": _pauc_by_group(candidate.audit, HELDOUT_TRUTH) if truth else None,
            "mlflow_run_id": run_id, "model_uri": f"runs:/{run_id}/model",
        })
    return pd.DataFrame(rows)


__all__ = [
    "Candidate", "candidates_frame", "fit_candidates",
    "HELDOUT_CLICKS", "HELDOUT_TRUTH", "RankerTrainingError", "TrainingData", "audit_model", "feature_columns",
    "heldout_click_aggregates", "training_data", "training_window", "truth_items",
]
