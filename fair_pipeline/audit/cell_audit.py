"""Partial AUCs, xAUC and pairwise accuracies of every scored output by protected attribute and by their crossing
(glue; the statistics are the audit's own, `audit.evaluation.audit_output`).

With `$FAIR_PIPELINE_GROUP_COLUMNS` set, each table of `audit.attribute_cells` (every attribute on its own, then
all of them crossed) audits every output again on the same held-out rows, grouped by the item's cell instead of
the logged group_id: the catalogue's item -> cell map (catalogue-sized) is registered on the warehouse engine and
joined in SQL, the rows keep their logged group_id (an output scores by it: an EO transform maps each logged
group's scores) and the audit groups by the cell. The same engines carry it (DuckDB in batches, Spark on the
executors), one more audit pass per table.

Every cell stays in the tables. A cell held by fewer than `min_clusters` items in the evaluated rows is not
estimable (`stats.cell_size`, the rule of the audit's `--min-clusters`), and the estimability of the audit itself
applies within the others (positives / negatives, clusters per class); for the pairwise accuracies, computed on
a sample of queries, a cell also needs `min_clusters` items with positives and with negatives in that sample
(counted where the sampled rows are: on Spark by the executors, one row per cell to the driver). Comparisons follow
`comparisons` (`stats.comparisons`: "auto" = all pairs of up to ALL_PAIRS_UP_TO cells, else each cell against the
largest), with Holm over each table's family of comparisons.
"""
from __future__ import annotations

import contextlib
import dataclasses

import pandas as pd

from fair_pipeline.audit.attribute_cells import (
    attribute_tables,
    catalogue_attributes,
    group_label,
    item_cells,
    table_name,
)
from fair_pipeline.audit.evaluation import OutputAudit, audit_output, evaluation_data
from fair_pipeline.audit.outputs import ScoredOutput
from fair_pipeline.audit.report import OVERALL, warehouse_tables
from fair_pipeline.audit.sql import AuditDataError, LabelSource
from fair_pipeline.audit.stats import AuditInputError
from fair_pipeline.audit.stats.cell_size import flag_small_cells, sampled_small_cells, small_cells
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_CLUSTERS
from fair_pipeline.platform.engines import as_warehouse

ITEM_CELLS = "_audit_item_cells"  # item_id -> grp of one attribute table, registered while that table is audited
GROUP_ID = "group_id"  # the logged group each row keeps for the outputs' scorers
# the audit's tables and their cell versions (the curves stay per logged group)
CELL_TABLES = {"fairness_audit_groups": ("fairness_audit_cell_groups", "groups"),
               "fairness_audit_pairs": ("fairness_audit_cell_pairs", "pairs"),
               "fairness_audit_xauc": ("fairness_audit_cell_xauc", "xauc"),
               "fairness_audit_xauc_deltas": ("fairness_audit_cell_xauc_deltas", "xauc_deltas"),
               "fairness_audit_pairwise": ("fairness_audit_cell_pairwise", "pairwise")}


def cell_source(source: LabelSource, unknown_cell: str) -> LabelSource:
    """The label source's rows with grp = the item's cell (``unknown_cell`` for an item the map lacks) and the
    logged group kept as `group_id`."""
    sql = (f"SELECT r.query_id, r.item_id, coalesce(c.grp, $unknown_cell) AS grp, r.grp AS {GROUP_ID}, r.score, "
           f"r.label FROM ({source.rows_sql}) r LEFT JOIN {ITEM_CELLS} c ON c.item_id = CAST(r.item_id AS VARCHAR)")
    return dataclasses.replace(source, rows_sql=sql, params={**source.params, "unknown_cell": unknown_cell},
                               carried=(GROUP_ID,))


def scored_by_logged_group(output: ScoredOutput) -> ScoredOutput:
    """The output scoring rows grouped by cell: its scorer sees each row's logged group as `group`."""
    score = output.score

    def by_logged_group(frame: pd.DataFrame):
        return score(frame.assign(group=frame[GROUP_ID]))
    return dataclasses.replace(output, score=by_logged_group)


def items_per_cell(engine, source: LabelSource) -> pd.Series:
    """Distinct items of each cell among the labelled rows (cell-sized)."""
    frame = engine.query_df(f"SELECT grp, count(DISTINCT item_id) AS items FROM ({source.rows_sql}) "
                            "WHERE label IS NOT NULL GROUP BY grp", source.params)
    return frame.set_index("grp")["items"]


@contextlib.contextmanager
def _registered(engine, item_groups: pd.DataFrame):
    engine.register_frame(ITEM_CELLS, item_groups[["item_id", "grp"]].astype(str))
    try:
        yield
    finally:
        engine.unregister_frame(ITEM_CELLS)


def _labelled(frame: pd.DataFrame, columns: list[str], items: pd.Series) -> pd.DataFrame:
    """A stored table's rows with the attribute table's name and each cell's readable label (and item count)."""
    def label(value):
        return value if value is None or value == OVERALL or pd.isna(value) else group_label(columns, value)
    out = frame.assign(attributes=table_name(columns))
    for key, name in (("group", "label"), ("group_a", "label_a"), ("group_b", "label_b")):
        if key in out.columns:
            out[name] = [label(v) for v in out[key]]
    if "group" in out.columns:
        out["items"] = out["group"].map(items).astype("Int64")
    return out


def _sampled_counts(data) -> pd.DataFrame | None:
    """On Spark, each cell's items with positives and with negatives in the sampled queries, counted where the
    rows are; None elsewhere (counted from ``data.query_rows``)."""
    if data.spark_query_rows is None:
        return None
    from fair_pipeline.audit.spark_pairwise import sampled_cell_items  # pyspark is the optional `spark` extra

    return sampled_cell_items(data.spark_query_rows)


def audit_cells(marts, scratch, source: LabelSource, window, outputs: list[ScoredOutput], columns: list[str], *,
                variance: str, max_queries: int, cutoffs, min_count: int, confidence: float, margins=None,
                min_clusters: int = DEFAULT_MIN_CLUSTERS, comparisons: str = "auto",
                con=None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """({stored cell table: rows}, notes) of every output in ``outputs`` by each table of ``columns``; an output
    that cannot be audited by one table is named in the notes (e.g. an EO transform that never saw a logged group).
    ``marts``: the engine holding the rows (a DuckDB connection is wrapped); ``con``: the DuckDB connection the
    spilled rows are audited through."""
    marts = as_warehouse(marts)
    items = catalogue_attributes(marts, window.last, columns)
    features = sorted({f for o in outputs for f in o.features})
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name, _ in CELL_TABLES.values()}
    notes: list[str] = []
    for k, cols in enumerate(attribute_tables(columns)):
        item_groups, unknown = item_cells(items, cols)
        cells = cell_source(source, unknown)
        audits: list[OutputAudit] = []
        with _registered(marts, item_groups):
            counts = items_per_cell(marts, cells)
            if counts.empty:
                raise AuditDataError(f"no labelled rows to audit by {table_name(cols)} in {window.label}")
            data = evaluation_data(marts, cells, features, variance, max_queries, scratch, name=f"cells_{k}")
            for output in outputs:
                try:
                    audits.append(audit_output(scored_by_logged_group(output), data, window.first, cutoffs,
                                               min_count=min_count, confidence=confidence, margins=margins, con=con,
                                               min_clusters=min_clusters, comparisons=comparisons))
                except AuditInputError as error:
                    notes.append(f"{output.name} by {table_name(cols)}: not audited: {error}")
            if data.spilled is not None:
                data.spilled.path.unlink(missing_ok=True)
            sampled_counts = _sampled_counts(data)  # while the rows' cells are registered
        small = small_cells(counts, min_clusters)
        sampled = {**sampled_small_cells(data.query_rows, min_clusters, counts=sampled_counts), **small}
        for name, frame in warehouse_tables(audits).items():
            if name in CELL_TABLES and not frame.empty:
                target, kind = CELL_TABLES[name]
                flagged = flag_small_cells(kind, frame, sampled if kind == "pairwise" else small)
                parts[target].append(_labelled(flagged, cols, counts))
    return {name: pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
            for name, frames in parts.items()}, notes
