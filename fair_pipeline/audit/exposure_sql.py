"""Exposure parity of the logged ranking, from warehouse aggregates (glue; the math is `audit.stats.exposure`).

Two passes over the window's observational impressions, both GROUP BYs that DuckDB or Spark run where the rows
are; only aggregates reach Python:

1. impressions and clicks per (group, position)                      -> the influence coefficients (a, b)
2. per cluster and group, the influence total Σ (a - click · b), joined with the coefficients (a small registered
   table), and the K x K cross products of those totals per clustering dimension (item, request, item x request).

Rows with a missing group form the group `<unknown>`, as in the rest of the audit.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit import exposure_offpolicy as offpolicy
from fair_pipeline.audit.sql import OBSERVATIONAL_VIEW, UNKNOWN_GROUP, AuditDataError
from fair_pipeline.audit.stats.exposure import (
    MAX_LEVERAGE,
    ClusterSums,
    ExposureParity,
    exposure_parity_from_aggregates,
    displacement_coefficients,
    fourth_from_differences,
    influence_coefficients,
)
from fair_pipeline.audit.stats.exposure_examination import as_examination
from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.platform.warehouse import quote_identifier
from fair_pipeline.platform.windows import PartitionWindow

CLUSTER_COLUMNS = ("item_id", "request_id")
COEFFICIENTS = "_exposure_coefficients"
ITEM_GROUPS = "_exposure_item_groups"  # item_id -> grp, when the groups come from the items table's attributes


def _rows_sql(item_groups: bool = False) -> str:
    view = ".".join(map(quote_identifier, OBSERVATIONAL_VIEW))
    if item_groups:
        return (f"SELECT r.item_id, r.request_id, coalesce(g.grp, $unknown_group) AS grp, r.position, r.click "
                f"FROM {view} r LEFT JOIN {ITEM_GROUPS} g ON g.item_id = CAST(r.item_id AS VARCHAR) "
                "WHERE r.partition_date BETWEEN $start AND $end")
    return (f"SELECT item_id, request_id, coalesce(group_id, $unknown_group) AS grp, position, click FROM {view} "
            "WHERE partition_date BETWEEN $start AND $end")


def _params(window: PartitionWindow, unknown_group: str = UNKNOWN_GROUP) -> dict:
    return {"start": window.first, "end": window.last, "unknown_group": unknown_group}


def exposure_cells(engine, window: PartitionWindow, item_groups: bool = False,
                   unknown_group: str = UNKNOWN_GROUP) -> pd.DataFrame:
    """group, position, impressions, clicks of the logged ranking in `window`."""
    frame = engine.query_df(
        "SELECT grp AS \"group\", position, count(*) AS impressions, CAST(sum(click) AS BIGINT) AS clicks "
        f"FROM ({_rows_sql(item_groups)}) GROUP BY grp, position ORDER BY grp, position",
        _params(window, unknown_group))
    if frame.empty:
        raise AuditDataError(f"no observational impressions in {window.first}..{window.last} for the exposure audit")
    return frame


def _cluster_sums(engine, window: PartitionWindow, keys: tuple[str, ...], labels: list, name: str,
                  item_groups: bool, unknown_group: str, mean_w: float, displacement: np.ndarray,
                  fourth: bool = True) -> ClusterSums:
    params = {**_params(window, unknown_group), "max_leverage": MAX_LEVERAGE, "mean_w": mean_w}
    cols = ", ".join(quote_identifier(k) for k in keys)
    r_cols = ", ".join("r." + quote_identifier(k) for k in keys)

    def on(x: str, y: str) -> str:
        return " AND ".join(f"{x}.{quote_identifier(k)} = {y}.{quote_identifier(k)}" for k in keys)

    # per cluster and group: the own total, CR2-scaled by 1 / sqrt(1 - h), h = the cluster's share of its group's
    # merit sum (`exposure.leverage_factor`), and the cluster's excess exposure Σ (w - mean_w), which it took from
    # every group pro rata (`exposure.displacement_coefficients`: group c's total falls by d_c · excess)
    own = (f"SELECT {r_cols}, r.grp, sum(c.a - r.click * c.b) / sqrt(1 - least(sum(r.click * c.b), $max_leverage)) "
           "AS total, sum(c.w) - count(*) * $mean_w AS excess "
           f"FROM ({_rows_sql(item_groups)}) r JOIN {COEFFICIENTS} c ON c.grp = r.grp AND c.position = r.position "
           f"GROUP BY {r_cols}, r.grp")
    excess = f"SELECT {cols}, sum(excess) AS excess FROM own GROUP BY {cols}"
    index = {label: i for i, label in enumerate(labels)}
    k = len(labels)
    matrix, d4 = np.zeros((k, k)), np.zeros((k, k))
    if fourth:
        # every cluster's total for every group (its own part, if any, less the exposure it took), then the cross
        # products and the fourth powers for the effective number of clusters (`exposure.fourth_from_differences`):
        # (x - y)^4 - x^4 - y^4 = -4x^3y + 6x^2y^2 - 4xy^3
        full = (f"SELECT {', '.join('x.' + quote_identifier(c) for c in keys)}, g.grp, "
                "coalesce(o.total, 0) - g.d * x.excess AS total "
                f"FROM x CROSS JOIN (SELECT DISTINCT grp, d FROM {COEFFICIENTS}) g "
                f"LEFT JOIN own o ON {on('o', 'x')} AND o.grp = g.grp")
        cross = engine.query_df(
            f"WITH own AS ({own}), x AS ({excess}), t AS ({full}) "
            "SELECT a.grp AS group_a, b.grp AS group_b, sum(a.total * b.total) AS cross_product, "
            "sum(a.total * b.total * (6 * a.total * b.total - 4 * a.total * a.total - 4 * b.total * b.total)) AS d4 "
            f"FROM t a JOIN t b ON {on('a', 'b')} GROUP BY a.grp, b.grp", params)
        for row in cross.itertuples(index=False):
            matrix[index[row.group_a], index[row.group_b]] = row.cross_product
            d4[index[row.group_a], index[row.group_b]] = row.d4
    else:
        # cross products only (the intersection of two dimensions: about one cluster per impression), expanded so
        # that no cluster is repeated per group: Σ (o_a - d_a X)(o_b - d_b X)
        own_cross = engine.query_df(
            f"WITH own AS ({own}) SELECT a.grp AS group_a, b.grp AS group_b, sum(a.total * b.total) AS cross_product "
            f"FROM own a JOIN own b ON {on('a', 'b')} GROUP BY a.grp, b.grp", params)
        with_excess = engine.query_df(
            f"WITH own AS ({own}), x AS ({excess}) SELECT o.grp, sum(o.total * x.excess) AS ox "
            f"FROM own o JOIN x ON {on('o', 'x')} GROUP BY o.grp", params)
        [(xx,)] = engine.query_df(f"WITH own AS ({own}), x AS ({excess}) SELECT sum(excess * excess) AS xx FROM x",
                                  params).itertuples(index=False)
        for row in own_cross.itertuples(index=False):
            matrix[index[row.group_a], index[row.group_b]] = row.cross_product
        ox = with_excess.set_index("grp")["ox"].reindex(labels).fillna(0.0).to_numpy()
        matrix = matrix - np.outer(ox, displacement) - np.outer(displacement, ox) + \
            float(xx or 0.0) * np.outer(displacement, displacement)
    counts = engine.query_df(f"WITH own AS ({own}) SELECT grp, count(*) AS n FROM own GROUP BY grp", params)
    [(n_clusters,)] = engine.query_df(
        f"SELECT count(*) AS n FROM (SELECT DISTINCT {cols} FROM ({_rows_sql(item_groups)}))",
        _params(window, unknown_group)).itertuples(index=False)
    per_group = counts.set_index("grp")["n"].reindex(labels).fillna(0).to_numpy()
    return ClusterSums(name, matrix, int(n_clusters), per_group, fourth_from_differences(d4) if fourth else None,
                       leverage_adjusted=True)


def logged_exposure_parity(con, window: PartitionWindow, examination, *, clusters: tuple[str, ...] = CLUSTER_COLUMNS,
                           item_groups: pd.DataFrame | None = None, unknown_group: str = UNKNOWN_GROUP,
                           **options) -> ExposureParity:
    """`exposure_parity` of the logged (production) ranking over `window`'s observational impressions.

    ``examination``: weights or the position-bias stage's curve; ``clusters``: () (impressions independent),
    ("item_id",), ("request_id",) or both (two-way); ``item_groups``: (item_id, grp) to group impressions by their
    item's attributes instead of the logged group_id (an item without a row: ``unknown_group``); ``options``:
    reference, pairs, confidence, margin, min_clicks.
    """
    unknown = [c for c in clusters if c not in CLUSTER_COLUMNS]
    if unknown or len(clusters) > 2:
        raise AuditDataError(f"exposure clusters {list(clusters)} must be among {list(CLUSTER_COLUMNS)}")
    engine = as_warehouse(con)
    if item_groups is None:
        return _logged_parity(engine, window, examination, clusters, False, unknown_group, options)
    engine.register_frame(ITEM_GROUPS, item_groups[["item_id", "grp"]].astype(str))
    try:
        return _logged_parity(engine, window, examination, clusters, True, unknown_group, options)
    finally:
        engine.unregister_frame(ITEM_GROUPS)


def _logged_parity(engine, window, examination, clusters, item_groups: bool, unknown_group: str,
                   options: dict) -> ExposureParity:
    cells = exposure_cells(engine, window, item_groups, unknown_group)
    exam = as_examination(examination)
    labels = sorted(cells["group"].unique(), key=str)
    sums = None
    if clusters:
        n = cells.pivot_table(index="group", columns="position", values="impressions", aggfunc="sum", fill_value=0)
        k = cells.pivot_table(index="group", columns="position", values="clicks", aggfunc="sum", fill_value=0)
        positions = range(1, exam.weights.size + 1)
        n, k = (m.reindex(index=labels, columns=positions, fill_value=0).to_numpy(dtype=float) for m in (n, k))
        if cells["position"].max() > exam.weights.size or cells["position"].min() < 1:
            exposure_parity_from_aggregates(cells, None, exam, group_order=labels, **options)  # raises, naming them
        a, b = influence_coefficients(n, k, exam.weights)
        d, mean_w = displacement_coefficients(n, k, exam.weights)
        w = np.where(np.isnan(exam.weights), 1.0, exam.weights)
        coefficients = pd.DataFrame([(g, j + 1, a[i, j], b[i, j], w[j], d[i]) for i, g in enumerate(labels)
                                     for j in range(exam.weights.size)], columns=["grp", "position", "a", "b", "w", "d"])
        engine.register_frame(COEFFICIENTS, coefficients)
        common = (item_groups, unknown_group, mean_w, d)
        try:
            sums = [_cluster_sums(engine, window, (key,), labels, key, *common) for key in clusters]
            if len(clusters) == 2:
                sums.append(_cluster_sums(engine, window, tuple(clusters), labels, " × ".join(clusters), *common,
                                          fourth=False))
        finally:
            engine.unregister_frame(COEFFICIENTS)
    return exposure_parity_from_aggregates(cells, sums, exam, group_order=labels, **options)


LOGGED = "production (logged ranking)"


def _examination_label(curve) -> str:
    return (f"{curve.attrs.get('method', '?')} curve of {curve.attrs.get('window_start', '?')}.."
            f"{curve.attrs.get('window_end', '?')}")


def exposure_tables(store, engine, window: PartitionWindow, partition, outputs=(),
                           max_requests: int = offpolicy.DEFAULT_MAX_REQUESTS) -> tuple[dict[str, pd.DataFrame], str]:
    """The audit store's exposure tables of `window`: the logged ranking over every observational impression, and,
    off-policy, each of `outputs` (`audit.outputs.ScoredOutput`s other than production) re-ranking a bounded sample
    of the logged requests; two-way clustered (items and requests), with partition `partition`'s chosen
    position-bias curve (its SEs enter by the delta-method bound). ({}, why) when the logged ranking's parity
    cannot be computed (no curve, no observational rows), so the audit still stands; an output whose re-ranking
    fails is named in the returned note and left out of the tables."""
    from fair_pipeline.position_bias.aggregates import PositionBiasInputError
    from fair_pipeline.position_bias.store import load_chosen_position_bias

    from fair_pipeline.audit.exposure_attributes import TABLE, attribute_exposure
    from fair_pipeline.platform.settings import group_columns

    try:
        curve = load_chosen_position_bias(store, partition)
        result = logged_exposure_parity(engine, window, curve)
    except (PositionBiasInputError, AuditDataError) as error:
        return {}, f"exposure parity not computed: {error}"
    results, labels = {"production": result}, {"production": LOGGED}
    notes, cells = [], {}
    if group_columns():  # a configured column the catalogue lacks is an error, not a note
        cells = {TABLE: attribute_exposure(engine, window, curve, group_columns()).assign(
            scored_output="production", ranking=LOGGED, examination=_examination_label(curve))}
    candidates = [o for o in outputs if o.name != "production"]
    if candidates:
        try:
            rows, total = offpolicy.sampled_requests(engine, window, sorted({f for o in candidates for f in o.features}),
                                                     max_requests)
        except AuditDataError as error:
            rows, total = None, 0
            notes.append(f"off-policy exposure not computed: {error}")
        if rows is not None and not rows.empty:
            found = offpolicy.offpolicy_exposure(rows, {o.name: o.score for o in candidates}, curve)
            n_sampled = rows["request_id"].nunique()
            for name, value in found.items():
                if isinstance(value, str):
                    notes.append(value)
                else:
                    results[name], labels[name] = value, offpolicy.ranking_label(name, n_sampled, total)
    tables = offpolicy.as_tables(results, labels, {"examination": _examination_label(curve)})
    return {**tables, **cells}, "; ".join(notes)
