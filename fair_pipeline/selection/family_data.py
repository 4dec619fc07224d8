"""Fit rows of the new model-selection families (DuckDB glue for `families`; no Dagster).

Everything is fitted on the base ranker's training window (the days before the evaluated partition D), never
on day D:
  post-processors   the labelled randomized requests of the window with the evaluation's label source (SIMULATION
                    truth on `shuffle` requests when landing/_truth exists, else their clicks): the same kind of
                    rows the candidates are judged on, from other days. Aggregated per item in SQL (n_pos, n_neg).
  pairwise_fair     the observational (production) requests of the window, a request being a query and a click the
                    better item, clicked rows weighted by 1 / w_position of the chosen position-bias curve (clicks
                    at low positions are under-observed). Only requests with a click and an unclicked item can form
                    pairs; at most `max_requests` of them, a deterministic sample ordered by md5(request_id), so the
                    daily fit's input is bounded whatever the log size (the ranker's own pair budget bounds the rest).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit import sql as aw
from fair_pipeline.ingestion.catalogue_dates import items_as_of
from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.platform.warehouse import quote_identifier
from fair_pipeline.platform.windows import PartitionWindow
from fair_pipeline.selection import families as fam

MAX_REQUESTS = 3000


def fit_item_counts(con, base, label: str, landing, policies: list[str], day=None) -> pd.DataFrame:
    """group, item_id, n_pos, n_neg and the base ranker's features (the catalogue as of partition `day`) on the
    labelled rows of its training window."""
    window = PartitionWindow(base.window_start, base.window_end, ())
    source = aw.label_source(label, landing, window, policies)
    return aw.item_counts(con, source, list(base.features), catalogue_day=day)


def click_pairs(con, base, position_curve: pd.DataFrame, max_requests: int = MAX_REQUESTS,
                day=None) -> fam.ClickPairs:
    """The pairwise-fair ranker's training rows (see the module doc; item features from the catalogue as of
    partition `day`, default the newest); empty arrays when the window has no pairs."""
    engine = as_warehouse(con)
    available = engine.table_columns(aw.ITEMS_VIEW)
    unknown = [f for f in base.features if f not in available]
    if unknown:
        raise aw.AuditDataError(f"ranker {base.candidate_id!r}: features {unknown} are not columns of "
                                f"{'.'.join(aw.ITEMS_VIEW)}")
    cols = ", ".join(f"i.{quote_identifier(f)}" for f in base.features)
    obs = ".".join(map(quote_identifier, aw.OBSERVATIONAL_VIEW))
    items, as_of = items_as_of(engine, day)
    frame = engine.query_df(
        f"""
        WITH rows AS (
            SELECT request_id, item_id, coalesce(group_id, $unknown_group) AS grp, position, click FROM {obs}
            WHERE partition_date BETWEEN $first AND $last AND policy = 'production'),
        usable AS (
            SELECT request_id FROM rows GROUP BY request_id HAVING sum(click) > 0 AND sum(click) < count(*)
            ORDER BY md5(request_id), request_id LIMIT $max_requests)
        SELECT r.request_id, r.grp, r.position, r.click, {cols}
        FROM rows r JOIN usable u ON u.request_id = r.request_id LEFT JOIN {items} i ON i.item_id = r.item_id
        ORDER BY r.request_id, r.position
        """,
        {"first": base.window_start, "last": base.window_end, "unknown_group": aw.UNKNOWN_GROUP,
         "max_requests": int(max_requests), **as_of},
    )
    missing = frame[list(base.features)].isna().any(axis=1)
    if missing.any():
        raise aw.AuditDataError(f"{int(missing.sum())} observational rows of {base.window_start}..{base.window_end} "
                                f"have items without (complete) features in {'.'.join(aw.ITEMS_VIEW)}, e.g. "
                                f"{frame.loc[missing, 'request_id'].head(3).tolist()} (request_id)")
    weights = position_curve.set_index("position")["weight"]
    w = frame["position"].map(weights).to_numpy(dtype=float)
    unweighted = frame["click"].astype(bool).to_numpy() & ~np.isfinite(w)
    if unweighted.any():
        raise aw.AuditDataError(f"clicks at positions {sorted(frame.loc[unweighted, 'position'].unique().tolist())} "
                                "have no weight in the chosen position-bias curve")
    clicked = frame["click"].to_numpy(dtype=int)
    return fam.ClickPairs(frame[list(base.features)].to_numpy(dtype=np.float64), clicked,
                          frame["grp"].astype(str).to_numpy(dtype=object), frame["request_id"].to_numpy(dtype=object),
                          np.where(clicked == 1, 1.0 / np.where(np.isfinite(w), w, 1.0), 1.0),
                          f"{base.window_start}..{base.window_end}")


def build_family_candidates(con, rankers: list, *, label: str, landing, policies: list[str],
                            position_curve: pd.DataFrame, selection_rate: float,
                            families=fam.NEW_FAMILIES, day=None) -> list[fam.FamilyCandidate]:
    """The new families' candidates of one partition, fitted on the least penalized ranker's window."""
    unknown = sorted(set(families) - set(fam.NEW_FAMILIES))
    if unknown:
        raise ValueError(f"families {unknown} are not among {list(fam.NEW_FAMILIES)}")
    if not rankers or not families:
        return []
    base = min(rankers, key=lambda r: (r.lam, r.candidate_id))
    out = []
    post = [f for f in families if f in fam.DECIDING_FAMILIES]
    if post:
        counts = fit_item_counts(con, base, label, landing, policies, day)
        if counts.empty:
            reason = f"no {label} rows in the training window {base.window_start}..{base.window_end} to fit on"
            out += [c for f in post for c in fam.unfitted(f, base, reason)]
        else:
            out += fam.fit_postprocessors(base, counts, selection_rate, post)
    if "pairwise_fair" in families:
        pairs = click_pairs(con, base, position_curve, day=day)
        if pairs.clicked.size == 0:
            reason = f"no production request with a click and an unclicked item in {pairs.window}"
            out += fam.unfitted("pairwise_fair", base, reason)
        else:
            out += fam.fit_pairwise(base, pairs)
    return out
