"""The model-selection candidates: every retrained ranker (lambda) x EO relaxation alpha (DuckDB glue).

How the EO transform meets a retrained ranker. The stored transform (`marts.eo_transforms`) maps the
*production* score: its per-group CDFs are CDFs of production scores, meaningless on another ranker's scale.
Theorem 1 of Nandy et al. applies to any score, so for each ranker the weighted-CDF transform is re-fitted on
that ranker's own scores, with the same recipe and settings as the stored weighted transform (clicked
production impressions of the ranker's training window, each click weighted by 1 / w_position of the chosen
position-bias curve, the pooled score CDF as back-mapping), then relaxed by alpha (appendix A.1:
s~ = (1 - alpha) s + alpha T_c(s); alpha = 0 is the ranker itself). The ranker's score is computed in SQL
(a linear model: sum of bound coefficients x whitelisted feature columns), so only the sufficient statistic
(per group x score bin: impressions, clicks, and the clicks weighted by 1 / w_position, i.e.
`marts.eo_score_click_counts` with the weights applied) leaves DuckDB.

Restriction: the serving model is "ranker + transform", so a ranker whose re-fit is not estimable (a group
without clicks in its window) contributes no candidate at any alpha; the reason is kept.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator

import numpy as np
import pandas as pd

from fair_pipeline.audit.sql import ITEMS_VIEW, OBSERVATIONAL_VIEW, UNKNOWN_GROUP
from fair_pipeline.eo.aggregate import EOInputError, check_click_positions
from fair_pipeline.eo.fair_ranker import LinearRanker
from fair_pipeline.eo.transform import WeightedCDFTransformer, fit_from_weighted_sums, with_alpha
from fair_pipeline.ingestion.catalogue_dates import items_as_of
from fair_pipeline.platform.partition_store import load_partition
from fair_pipeline.platform.engines import as_warehouse, fetch_rows
from fair_pipeline.platform.warehouse import quote_identifier, table_columns, table_exists
from fair_pipeline.selection.elicitation.operating_point import group_rates, selection_threshold

RANKER_CANDIDATES = ("marts", "ranker_candidates")


class SelectionInputError(ValueError):
    """A missing table or column, or a candidate that cannot be built: the message names it."""


@dataclasses.dataclass(frozen=True)
class Ranker:
    """One row of marts.ranker_candidates: a linear ranker on item features."""

    candidate_id: str
    lam: float
    features: tuple[str, ...]
    coef: np.ndarray
    intercept: float
    window_start: dt.date
    window_end: dt.date
    mlflow_run_id: str | None

    @property
    def model(self) -> LinearRanker:
        return LinearRanker(self.coef, self.intercept)

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        return self.model.decision_function(frame[list(self.features)].to_numpy(dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A ranker at one EO relaxation; `transform` is None when alpha's re-fit was not estimable (`reason`)."""

    ranker: Ranker
    alpha: float
    transform: WeightedCDFTransformer | None
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.ranker.candidate_id}/alpha={self.alpha:g}"

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        """Fair score of item rows (features + `group`), as the registered pyfunc computes it."""
        return self.transform.transform(self.ranker.score(frame), frame["group"].to_numpy(dtype=object))


def load_rankers(con, partition=None) -> list[Ranker]:
    """The retrained rankers of asset partition `partition` (default: the newest stored)."""
    if not table_exists(con, *RANKER_CANDIDATES):
        raise SelectionInputError("marts.ranker_candidates does not exist; materialize the ranker_candidates asset first")
    need = ["candidate_id", "lam", "features", "coefficients", "intercept", "window_start", "window_end", "mlflow_run_id"]
    columns = table_columns(con, *RANKER_CANDIDATES)
    missing = [c for c in need if c not in columns]
    if missing:
        raise SelectionInputError(f"marts.ranker_candidates lacks columns {missing} (has {columns})")
    frame = load_partition(con, ".".join(RANKER_CANDIDATES), partition, error=SelectionInputError,
                           hint="materialize the ranker_candidates asset for that partition first")
    frame = frame[need].sort_values(["lam", "candidate_id"])
    if frame.empty:
        raise SelectionInputError("marts.ranker_candidates is empty: no retrained ranker to select from")
    rankers = []
    for row in frame.itertuples():
        features = tuple(json.loads(row.features))
        weights = json.loads(row.coefficients)
        rankers.append(Ranker(row.candidate_id, float(row.lam), features,
                              np.array([weights[f] for f in features], dtype=np.float64), float(row.intercept),
                              pd.Timestamp(row.window_start).date(), pd.Timestamp(row.window_end).date(),
                              row.mlflow_run_id if isinstance(row.mlflow_run_id, str) else None))
    return rankers


def catalogue_group_labels(con, day: dt.date | None = None) -> list[str] | None:
    """The group labels of the item catalogue as of `day` (None: the newest), sorted, from a `Warehouse` (or a
    DuckDB connection); None without staging.stg_items."""
    engine = as_warehouse(con)
    if not engine.table_exists(ITEMS_VIEW):
        return None
    items, params = items_as_of(engine, day)
    rows = fetch_rows(engine, f"SELECT DISTINCT group_label FROM {items} ORDER BY 1", params)
    return [str(label) for (label,) in rows]


def _check_features(available: list[str], ranker: Ranker) -> None:
    unknown = [f for f in ranker.features if f not in available]
    if unknown:
        raise SelectionInputError(f"ranker {ranker.candidate_id!r}: features {unknown} are not columns of "
                                  f"{'.'.join(ITEMS_VIEW)} ({available})")


def _binned_score_sql(ranker: Ranker, index: int) -> tuple[str, dict]:
    """The ranker's binned linear score of an item row `i` as SQL (coefficients bound as parameters)."""
    terms = " + ".join(f"i.{quote_identifier(f)} * $r{index}_c{k}" for k, f in enumerate(ranker.features))
    params = {f"r{index}_c{k}": float(c) for k, c in enumerate(ranker.coef)}
    params[f"r{index}_intercept"] = ranker.intercept
    return f"(floor(({terms} + $r{index}_intercept) / $width) + 0.5) * $width", params


# The item cells (one row per catalogue item) and the position weights, registered on the local DuckDB connection
# and on the engine respectively.
_ITEM_CELLS, _WEIGHTS = "_ranker_item_cells", "_ranker_position_weights"


def _position_cells_sql(observational: str, items: str) -> str:
    return f"""
        SELECT item_id, coalesce(group_id, $unknown_group) AS group_id, position,
               count(*) AS impressions, sum(click) AS clicks
        FROM {observational}
        WHERE partition_date BETWEEN $first AND $last AND policy = 'production'
          AND item_id IN (SELECT item_id FROM {items})
        GROUP BY item_id, coalesce(group_id, $unknown_group), position
        """


def _clicked_positions_sql(observational: str, items: str) -> str:
    """Clicks per (group, position) of the same rows as the cells: the positions the weights must cover."""
    return f"""
        SELECT coalesce(group_id, $unknown_group) AS group_id, position, sum(click) AS clicks
        FROM {observational}
        WHERE partition_date BETWEEN $first AND $last AND policy = 'production'
          AND item_id IN (SELECT item_id FROM {items})
        GROUP BY coalesce(group_id, $unknown_group), position
        HAVING sum(click) > 0
        """


def _window_weighted_sums(con, engine, rankers: list[Ranker], bin_width: float, position_weights: pd.DataFrame,
                          day: dt.date | None) -> Iterator[tuple[pd.DataFrame, str]]:
    """The rankers sharing one window, from one pass of cells over its production impressions; yields each
    ranker's (weighted-sum table, problem) in turn, problem "" or why the window's clicks cannot be weighted.

    A linear score depends on the item only, and the transform needs the clicks only through their weights
    1 / w_position. So the impressions are counted per (item, group, position) cell on the warehouse engine
    (`engine`: DuckDB or Spark; two scans of the window's log: a small GROUP BY for the clicked positions the
    weights must cover, then the cells; no temp table, which Spark would turn into a lazy view), the weights
    applied there, the cells summed over positions into one row per (item, group) with every ranker's binned
    score as a column: those item cells, bounded by the catalogue, not by the traffic or the positions, come to
    the local DuckDB connection `con`,
    where each ranker's table is a GROUP BY of them. Weighted clicks are summed as DECIMAL(38, 18): exact
    integer arithmetic, so the sums do not depend on the order threads or executors add them (a double sum
    would, in its last bits), and a value past 1e20 fails loudly instead of rounding."""
    first, last = rankers[0].window_start, rankers[0].window_end
    observational = ".".join(map(quote_identifier, OBSERVATIONAL_VIEW))
    items, as_of = items_as_of(engine, day)
    cells = _position_cells_sql(observational, items)
    params: dict = {"first": first, "last": last, "unknown_group": UNKNOWN_GROUP, **as_of}
    clicked = engine.query_df(_clicked_positions_sql(observational, items), params)
    try:
        check_click_positions(clicked, position_weights)
        problem = ""
    except EOInputError as error:
        problem = f"EO re-fit failed: {error}"
    weights = position_weights[["position", "weight"]].astype({"position": np.int64, "weight": float})
    # Only valid weights are joined: a clicked position without one is the `problem` (no fit is made).
    valid = weights[np.isfinite(weights["weight"]) & (weights["weight"] > 0)].reset_index(drop=True)
    engine.register_frame(_WEIGHTS, valid)
    try:
        params["width"] = float(bin_width)
        scores = []
        for index, ranker in enumerate(rankers):
            sql, bound = _binned_score_sql(ranker, index)
            params.update(bound)
            scores.append(f"{sql} AS s{index}")
        item_cells = engine.query_arrow(
            f"""
            WITH cells AS ({cells}), per_item AS (
                SELECT c.item_id, c.group_id, sum(c.impressions) AS impressions, sum(c.clicks) AS clicks,
                       sum(CAST(CASE WHEN c.clicks > 0 THEN c.clicks / w.weight END AS DECIMAL(38, 18)))
                           AS weighted_clicks,
                       sum(CAST(CASE WHEN c.clicks > 0 THEN c.clicks / (w.weight * w.weight) END AS DECIMAL(38, 18)))
                           AS weighted_click_squares
                FROM cells c LEFT JOIN {_WEIGHTS} w ON w.position = c.position
                GROUP BY c.item_id, c.group_id
            )
            SELECT p.group_id, p.impressions, p.clicks, p.weighted_clicks, p.weighted_click_squares, {', '.join(scores)}
            FROM per_item p JOIN {items} i ON i.item_id = p.item_id
            """,
            params,
        )
    finally:
        engine.unregister_frame(_WEIGHTS)
    con.register(_ITEM_CELLS, item_cells)
    try:
        for index in range(len(rankers)):
            yield con.execute(
                f"SELECT group_id, s{index} AS score_value, CAST(sum(impressions) AS BIGINT) AS impressions, "
                "CAST(sum(clicks) AS BIGINT) AS clicks, "
                "CAST(coalesce(sum(weighted_clicks), 0) AS DOUBLE) AS weighted_clicks, "
                "CAST(coalesce(sum(weighted_click_squares), 0) AS DOUBLE) AS weighted_click_squares "
                f"FROM {_ITEM_CELLS} GROUP BY ALL ORDER BY group_id, score_value"
            ).df(), problem
    finally:
        con.unregister(_ITEM_CELLS)


def ranker_weighted_sums(con, rankers: list[Ranker], bin_width: float, position_weights: pd.DataFrame,
                         engine=None, day: dt.date | None = None) -> Iterator[tuple[int, pd.DataFrame, str]]:
    """(index into `rankers`, table, problem) per ranker: the EO fit's sufficient statistic of the ranker's
    scores on the production impressions of its training window (WEIGHTED_SUM_COLUMNS: per group and score
    bin, impressions, clicks and the clicks weighted by 1 / w_position of `position_weights`, a (position,
    weight) frame), computed in SQL with one scan of the log per distinct training window, not one per ranker.
    `problem` says why the window's clicks cannot be weighted ("" if they can). Rankers come window by window
    (in order within a window), one table in memory at a time. `engine` (a `Warehouse`; default: DuckDB over
    `con`) holds the log; `con` is a local DuckDB connection for the per-ranker sums. Items come from the catalogue
    as of `day`, the partition the rankers were trained for (None: the newest catalogue)."""
    engine = as_warehouse(engine if engine is not None else con)
    available = engine.table_columns(ITEMS_VIEW)
    for ranker in rankers:
        _check_features(available, ranker)
    by_window: dict[tuple, list[int]] = {}
    for index, ranker in enumerate(rankers):
        by_window.setdefault((ranker.window_start, ranker.window_end), []).append(index)
    for members in by_window.values():
        tables = _window_weighted_sums(con, engine, [rankers[m] for m in members], bin_width, position_weights, day)
        for member, (table, problem) in zip(members, tables):
            yield member, table, problem


def _unfit_reason(ranker: Ranker, sums: pd.DataFrame, min_positives: int) -> str:
    if sums.empty:
        return f"no production impressions in the training window {ranker.window_start}..{ranker.window_end}"
    clicks = sums.groupby("group_id")["clicks"].sum()
    few = clicks[clicks < max(min_positives, 1)]
    if few.empty:
        return ""
    return "EO re-fit not estimable: " + ", ".join(f"group {g!r} has {int(n)} clicks < {min_positives}"
                                                   for g, n in few.items())


def build_candidates(con, rankers: list[Ranker], alphas: list[float], position_curve: pd.DataFrame,
                     template: WeightedCDFTransformer, bin_width: float, min_positives: int,
                     engine=None, day: dt.date | None = None) -> list[Candidate]:
    """Every ranker x alpha, the transform re-fitted per ranker with `template`'s settings (see module doc);
    `engine` and `day` as in `ranker_weighted_sums`."""
    if not alphas or any(not 0.0 <= a <= 1.0 for a in alphas) or len(set(alphas)) != len(alphas):
        raise SelectionInputError(f"alphas={alphas} must be distinct values in [0, 1]")
    params = {k: v for k, v in template.get_params().items() if k != "alpha"}
    weights = position_curve[["position", "weight"]]
    per_ranker: dict[int, list[Candidate]] = {}
    for index, sums, problem in ranker_weighted_sums(con, rankers, bin_width, weights, engine, day):
        ranker = rankers[index]
        reason = _unfit_reason(ranker, sums, min_positives) or problem
        fitted = None
        if not reason:
            try:
                fitted = fit_from_weighted_sums(sums, **params)
            except EOInputError as error:
                reason = f"EO re-fit failed: {error}"
        per_ranker[index] = [Candidate(ranker, float(alpha), None if fitted is None else with_alpha(fitted, float(alpha)),
                                       reason) for alpha in sorted(alphas)]
    return [c for index in range(len(rankers)) for c in per_ranker[index]]


def candidate_rates(candidates: list[Candidate], items: pd.DataFrame, selection_rate: float) -> pd.DataFrame:
    """Long table candidate x group: tpr, tnr, n_pos, n_neg at each candidate's own selection-rate threshold,
    on held-out item rows (`group`, features, n_pos, n_neg). A candidate without a transform, or whose
    transform cannot score a group, gets NaN rates and its reason (ranked as not estimable)."""
    groups = sorted(items["group"].astype(str).unique())
    rows = []
    for cand in candidates:
        base = {"candidate": cand.name, "ranker": cand.ranker.candidate_id, "lam": cand.ranker.lam,
                "alpha": cand.alpha, "trained_through": str(cand.ranker.window_end)}
        reason = cand.reason
        if not reason:
            try:
                scored = items[["group", "n_pos", "n_neg"]].assign(score=cand.score(items))
                threshold = selection_threshold(scored, selection_rate)
                rates = group_rates(scored, threshold)
            except (EOInputError, ValueError) as error:
                reason = f"cannot score the held-out rows: {error}"
        if reason:
            rows.extend({**base, "group": g, "tpr": np.nan, "tnr": np.nan, "n_pos": np.nan, "n_neg": np.nan,
                         "selected_share": np.nan, "threshold": np.nan, "candidate_reason": reason} for g in groups)
            continue
        rows.extend({**base, **r, "threshold": threshold, "candidate_reason": ""} for r in rates.to_dict("records"))
    return pd.DataFrame(rows)


def candidate_scores(candidates: list[Candidate], items: pd.DataFrame, names) -> dict[str, np.ndarray]:
    """Fair score of every held-out item row for the named candidates (those with rates; the paired
    comparison of the ranking needs each one's scores on the same rows)."""
    wanted = set(names)
    return {c.name: np.asarray(c.score(items), dtype=float) for c in candidates if c.name in wanted and c.transform is not None}
