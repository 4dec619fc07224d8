"""One scored output audited on Spark where the rows are: nothing proportional to the day reaches the driver.

The held-out rows (a lazy DataFrame: ``group``, ``n_pos``, ``n_neg`` and the columns the output scores) are
scored on the executors (`mapInArrow`; the scorer and its models travel in the function's closure), then:

1. a ``GROUP BY group`` gives the class totals per group (and counts bad scores / NULL groups): G rows;
2. the scored rows are range-partitioned by descending score (every distinct score lies in one partition) and
   kept (`persist`); each partition returns its positives and negatives per group and its top score;
3. the driver chains them into offsets (`stats.partition_sweep.partition_offsets`: 2 G numbers a partition),
   sent back with the sweep function; each partition sweeps its own blocks from its offsets (`PartitionSweep`) and returns its
   state, a few (columns x cutoffs) arrays whatever its rows;
4. the driver merges the states in score order (`merge_partition_states`): the same `StreamingAudit` report
   as the DuckDB path of the same rows, to rounding (tests/platform/spark/test_spark_audit.py).

So the driver receives O(groups + partitions x columns x cutoffs) numbers: flat in the day's rows (the event
log's task result sizes show it, tests/platform/spark/test_spark_audit_driver.py). Cluster-robust variances
are not computed here (the callers keep the DuckDB path for them).
"""
from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel, TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fair_pipeline.audit.stats import AuditInputError, AuditReport, StreamingAudit
from fair_pipeline.audit.stats.partition_sweep import (
    PartitionSweep,
    merge_partition_states,
    partition_blocks,
    partition_offsets,
)
from fair_pipeline.audit.stats.validation import as_cutoffs
from fair_pipeline.audit.streamed import output_scores

DEFAULT_PARTITIONS = 16  # score ranges swept in parallel; the driver receives one state per range
SCORED_SCHEMA = "grp string, s double, n_pos double, n_neg double"


def score_on_executors(rows: DataFrame, score: Callable[[pd.DataFrame], np.ndarray], name: str,
                       prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> DataFrame:
    """(grp, s, n_pos, n_neg): the output's score of every row, computed batch by batch on the executors.
    A score that is not finite stays NaN here and is counted and named by the audit."""
    # The scorer travels in the UDF's closure, which Spark serializes with the function itself (classic and
    # Connect alike); scorers are small (coefficients, breakpoints), so no broadcast variable is needed.
    def scored(batches):
        for batch in batches:
            frame, values = output_scores(batch, score, name, prepare)
            values = np.where(np.isfinite(values), values + 0.0, np.nan)  # -0.0 and +0.0 are one block
            yield pa.RecordBatch.from_pydict({
                "grp": pa.array(frame["group"].to_numpy(dtype=object), pa.string(), from_pandas=True), "s": values,
                "n_pos": frame["n_pos"].to_numpy(dtype=np.float64), "n_neg": frame["n_neg"].to_numpy(dtype=np.float64)})

    return rows.mapInArrow(scored, SCORED_SCHEMA)


def _group_totals(scored: DataFrame, name: str):
    totals = (scored.groupBy("grp").agg(F.sum("n_pos").alias("n_pos"), F.sum("n_neg").alias("n_neg"),
                                        F.count(F.when(F.isnan("s"), 1)).alias("bad"), F.count("*").alias("rows"))
              .toPandas())
    if totals["grp"].isna().any():
        raise AuditInputError(f"aggregates.group has {int(totals.loc[totals['grp'].isna(), 'rows'].sum())} missing values")
    if totals["bad"].sum():
        raise AuditInputError(f"{name}: {int(totals['bad'].sum())} scores are NaN or infinite")
    if totals.empty:
        raise AuditInputError("no rows to audit (the input holds a header at most)")
    groups = np.unique(totals["grp"].to_numpy(dtype=object))  # the DuckDB path's group order
    totals = totals.set_index("grp").loc[groups]
    return groups, totals["n_pos"].to_numpy(np.float64), totals["n_neg"].to_numpy(np.float64), int(totals["rows"].sum())


def _codes(column, groups: pa.Array) -> np.ndarray:
    """Group codes (positions in ``groups``) of a string column."""
    return pc.index_in(column, value_set=groups).to_numpy(zero_copy_only=False).astype(np.intp)


def _partition_counts(ranged: DataFrame, groups) -> pd.DataFrame:
    """Per non-empty partition: its id, top score and the positives and negatives of each group."""
    G = len(groups)
    group_list = list(groups)

    def counts(batches):
        values, pos, neg, top = pa.array(group_list, pa.string()), np.zeros(G), np.zeros(G), -np.inf
        for batch in batches:
            codes = _codes(batch.column("grp"), values)
            pos += np.bincount(codes, batch.column("n_pos").to_numpy(), minlength=G)
            neg += np.bincount(codes, batch.column("n_neg").to_numpy(), minlength=G)
            if batch.num_rows:
                top = max(top, float(np.max(batch.column("s").to_numpy())))
        if np.isfinite(top):
            yield pa.RecordBatch.from_pydict({"pid": pa.array([TaskContext.get().partitionId()], pa.int32()),
                                              "top": [top], "pos": [pos.tolist()], "neg": [neg.tolist()]})

    schema = "pid int, top double, pos array<double>, neg array<double>"
    return ranged.mapInArrow(counts, schema).toPandas()


def _state_bytes(state: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    return buffer.getvalue()


def _state(data: bytes) -> dict:
    with np.load(io.BytesIO(data)) as arrays:
        return {k: arrays[k] for k in arrays.files}


def _partition_states(ranged: DataFrame, groups, n_pos, n_neg, cutoffs, offsets: dict) -> dict[int, dict]:
    """Each partition's sweep from its offsets, swept on its executor; {partition id: state}."""
    values, offsets_of, G = list(groups), offsets, len(groups)

    def sweep(batches):
        table = pa.Table.from_batches(list(batches), schema=pa.schema(
            [("grp", pa.string()), ("s", pa.float64()), ("n_pos", pa.float64()), ("n_neg", pa.float64())]))
        pid = TaskContext.get().partitionId()
        if table.num_rows == 0:
            return
        codes = _codes(table.column("grp"), pa.array(values, pa.string()))
        part = PartitionSweep(groups, n_pos, n_neg, cutoffs, *offsets_of[pid])
        part.update_columns(*partition_blocks(table.column("s").to_numpy(), codes, table.column("n_pos").to_numpy(),
                                              table.column("n_neg").to_numpy(), G))
        yield pa.RecordBatch.from_pydict({"pid": pa.array([pid], pa.int32()),
                                          "state": pa.array([_state_bytes(part.state())], pa.binary())})

    collected = ranged.mapInArrow(sweep, "pid int, state binary").toPandas()
    return {int(pid): _state(data) for pid, data in zip(collected["pid"], collected["state"])}


def audit_spark_rows(rows: DataFrame, score: Callable[[pd.DataFrame], np.ndarray], name: str, cutoffs, *,
                     prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None, min_count: int,
                     confidence: float, estimand: str | None = None, margins=None,
                     partitions: int = DEFAULT_PARTITIONS) -> tuple[AuditReport, int]:
    """`audit_aggregates` of the output's rescored rows (group, score, n_pos, n_neg; rows may repeat a
    (group, score)), computed on the executors: ``score(frame)`` scores a batch of ``rows`` (after ``prepare``).
    Variances are the conditional (iid) ones. Returns the report and the number of rows audited."""
    cutoffs = as_cutoffs(cutoffs)
    scored = score_on_executors(rows, score, name, prepare)
    ranged = scored.repartitionByRange(int(partitions), F.col("s").desc()).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        groups, n_pos, n_neg, n_rows = _group_totals(ranged, name)
        stream = StreamingAudit(groups, n_pos, n_neg, cutoffs, min_count=min_count, confidence=confidence,
                                margins=margins)
        counts = _partition_counts(ranged, groups).sort_values("top", ascending=False)  # score order
        pos_above, neg_above = partition_offsets(np.vstack(counts["pos"]), np.vstack(counts["neg"]))
        offsets = {int(pid): (pos_above[k], neg_above[k]) for k, pid in enumerate(counts["pid"])}
        states = _partition_states(ranged, groups, n_pos, n_neg, cutoffs, offsets)
    finally:
        ranged.unpersist()
    merge_partition_states(stream, [states[int(pid)] for pid in counts["pid"]])
    return stream.report(estimand=estimand), n_rows
