"""Off-policy exposure parity: how much attention each candidate ranking would give each group, read from the logs.

For every logged production request the candidate scores the items that were shown and re-orders them; each item
takes the slot of its new rank among the request's logged slots (the page keeps its layout). Exposure reads the
examination weight of the new slot, merit the clicks at the logged slot divided by that slot's weight (relevance does
not depend on who ranks), so a group's ratio is the exposure the candidate would give it per unit of the merit the
logs show (`exposure_parity(..., ranked_positions=)`). Assumptions, stated in the report: the examination curve does
not depend on the ranking (examination hypothesis) and only the shown items are re-ordered (no item outside the
logged page can enter it).

Rows: a deterministic sample of at most `max_requests` production requests of the window (ordered by
md5(request_id)), so the driver holds a bounded number of rows whatever a day's size; CIs are two-way clustered on
the sample's items and requests. Candidates score rows holding `group`, the logged `score` and the items-table
feature columns they need.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from fair_pipeline.ingestion.catalogue_dates import items_as_of
from fair_pipeline.audit.sql import ITEMS_VIEW, OBSERVATIONAL_VIEW, UNKNOWN_GROUP, AuditDataError
from fair_pipeline.audit.stats.exposure import ExposureParity, exposure_parity
from fair_pipeline.audit.stats.exposure_clusters import cluster_dimensions
from fair_pipeline.audit.stats.validation import AuditInputError
from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.platform.warehouse import quote_identifier
from fair_pipeline.platform.windows import PartitionWindow

DEFAULT_MAX_REQUESTS = 5_000
OFF_POLICY = "off-policy"


def sampled_requests(con, window: PartitionWindow, features=(), max_requests: int = DEFAULT_MAX_REQUESTS
                     ) -> tuple[pd.DataFrame, int]:
    """(rows, requests in the window): request_id, item_id, group, position, click, score and `features` of the
    shown items of at most `max_requests` production requests of `window` (deterministic md5 sample)."""
    if max_requests < 1:
        raise AuditDataError(f"max_requests must be at least 1, got {max_requests}")
    engine = as_warehouse(con)
    features = list(dict.fromkeys(features))
    if features:
        unknown = [f for f in features if f not in engine.table_columns(ITEMS_VIEW)]
        if unknown:
            raise AuditDataError(f"features {unknown} are not columns of {'.'.join(ITEMS_VIEW)}")
    obs = ".".join(map(quote_identifier, OBSERVATIONAL_VIEW))
    items, as_of = items_as_of(engine, window.last) if features else ("", {})  # the catalogue of the evaluated day
    cols = "".join(f", i.{quote_identifier(f)}" for f in features)
    join = f" LEFT JOIN {items} i ON i.item_id = r.item_id" if features else ""
    params = {"first": window.first, "last": window.last, "unknown_group": UNKNOWN_GROUP, "max": int(max_requests),
              **as_of}
    where = "partition_date BETWEEN $first AND $last AND policy = 'production'"
    rows = engine.query_df(
        f"""WITH rows AS (SELECT request_id, item_id, coalesce(group_id, $unknown_group) AS "group", position, click,
                                 score FROM {obs} WHERE {where}),
             chosen AS (SELECT request_id FROM rows GROUP BY request_id ORDER BY md5(request_id), request_id LIMIT $max)
        SELECT r.request_id, r.item_id, r."group", r.position, r.click, r.score{cols}
        FROM rows r JOIN chosen c ON c.request_id = r.request_id{join} ORDER BY r.request_id, r.position""", params)
    [(total,)] = engine.query_df(f"SELECT count(DISTINCT request_id) AS n FROM {obs} WHERE {where}",
                                 {"first": window.first, "last": window.last}).itertuples(index=False)
    if features:
        missing = rows[features].isna().any(axis=1)
        if missing.any():
            raise AuditDataError(f"{int(missing.sum())} shown items of {window.first}..{window.last} lack features "
                                 f"{features} in {'.'.join(ITEMS_VIEW)}, e.g. item_id "
                                 f"{rows.loc[missing, 'item_id'].head(3).tolist()}")
    return rows, int(total)


def reranked_positions(request_ids, positions, scores) -> np.ndarray:
    """The slot each shown item gets when its request's items are re-ordered by `scores` (highest first; ties keep
    the logged order): the request's logged slots, handed out in the new order. `scores` may be a tuple of arrays
    compared in turn (e.g. a decision, then the score that breaks its ties)."""
    req = pd.factorize(pd.Series(request_ids))[0]
    pos = np.asarray(positions, dtype=np.int64)
    keys = [np.asarray(k, dtype=np.float64) for k in (scores if isinstance(scores, tuple) else (scores,))]
    for s in keys:
        if s.shape != pos.shape:
            raise AuditDataError(f"{s.size} scores for {pos.size} shown items")
        if not np.all(np.isfinite(s)):
            raise AuditDataError(f"{int((~np.isfinite(s)).sum())} scores are missing or infinite")
    by_slot = np.lexsort((pos, req))
    by_score = np.lexsort((pos, *[-s for s in reversed(keys)], req))
    new = np.empty_like(pos)
    new[by_score] = pos[by_slot]
    return new


def offpolicy_exposure(rows: pd.DataFrame, scorers: Mapping[str, Callable[[pd.DataFrame], np.ndarray]],
                       examination, **options) -> dict[str, ExposureParity | str]:
    """{name: ExposureParity of the ranking by scorer(rows)} (or the reason it cannot be computed), two-way clustered
    on item_id and request_id; `options` go to `exposure_parity` (reference, pairs, confidence, margin, ...)."""
    out: dict[str, ExposureParity | str] = {}
    clusters = {"item_id": rows["item_id"].to_numpy(), "request_id": rows["request_id"].to_numpy()}
    try:  # the same logged rows for every scorer: factorized once, and their kept totals share one index
        clusters = cluster_dimensions(clusters, len(rows), labelled=bool(options.get("keep_totals")))
    except AuditInputError as error:
        return {name: f"{name}: off-policy exposure not computed: {error}" for name in scorers}
    for name, score in scorers.items():
        try:
            ranked = reranked_positions(rows["request_id"], rows["position"], score(rows))
            out[name] = exposure_parity(rows["position"], rows["click"], rows["group"].to_numpy(dtype=object),
                                        examination, clusters=clusters, ranked_positions=ranked, **options)
        except (AuditDataError, ValueError) as error:  # one candidate's failure is named, the others stand
            out[name] = f"{name}: off-policy exposure not computed: {error}"
    return out


def ranking_label(name: str, n_sampled: int, n_total: int) -> str:
    share = "every" if n_sampled >= n_total else f"a deterministic sample of {n_sampled:,} of the {n_total:,}"
    return f"{OFF_POLICY}: {share} logged production requests re-ranked by {name}"


def as_tables(results: Mapping[str, ExposureParity], labels: Mapping[str, str], common: dict
              ) -> dict[str, pd.DataFrame]:
    """The audit store's exposure tables (groups, pairs) of several rankings: `scored_output` = the result's key,
    `ranking` = its label."""
    groups, pairs = [], []
    for name, result in results.items():
        extra = {**common, "scored_output": name, "ranking": labels[name], "variance_estimand": result.variance_estimand}
        groups.append(result.per_group.rename(columns={"n_clusters": "items", "n_clusters_2": "requests"}).assign(**extra))
        pairs.append(result.pairs.assign(**extra))
    if not groups:
        return {}
    return {"fairness_audit_exposure_groups": pd.concat(groups, ignore_index=True),
            "fairness_audit_exposure_pairs": pd.concat(pairs, ignore_index=True)}
