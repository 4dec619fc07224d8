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

With clusters (items, queries or both), each partition's sweep also sums its rows' influence parts per cluster,
which a shuffle on the cluster key adds up after the merge (`audit.spark_clusters`): the driver receives the
clusters' moments, a few (cutoffs x columns x columns) arrays per shuffle partition.

So the driver receives O(groups + partitions x columns^2 x cutoffs) numbers: flat in the day's rows and in the
number of clusters (the event log's task result sizes show it, tests/platform/spark/test_spark_audit_driver.py).
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

from fair_pipeline.audit.prefix_stream import cluster_key_sets, column_pairs
from fair_pipeline.audit.spark_clusters import SUMS_SCHEMA, ShuffledClusterSums, sweep_range_with_clusters
from fair_pipeline.audit.spark_errors import executor_input_errors
from fair_pipeline.audit.stats import AuditInputError, AuditReport, StreamingAudit
from fair_pipeline.audit.stats.grid_audit import variance_alphas
from fair_pipeline.audit.stats.partition_sweep import (
    PartitionSweep,
    merge_partition_states,
    partition_blocks,
    partition_offsets,
)
from fair_pipeline.audit.stats.validation import as_cutoffs
from fair_pipeline.audit.streamed import output_scores

DEFAULT_PARTITIONS = 16  # score ranges swept in parallel; the driver receives one state per range
# The session's setting of the ranges (and of the pairwise pass's query partitions), e.g. `--spark-conf
# spark.fair_pipeline.audit.partitions=4`: each range is a task of every stage of an audit, so a small cluster
# spends its time scheduling tasks of a few rows.
PARTITIONS_CONF = "spark.fair_pipeline.audit.partitions"


def session_partitions(rows: DataFrame) -> int:
    """The session's PARTITIONS_CONF (a positive integer), else DEFAULT_PARTITIONS."""
    text = rows.sparkSession.conf.get(PARTITIONS_CONF, None)
    if text is None:
        return DEFAULT_PARTITIONS
    if not str(text).strip().isdigit() or int(text) < 1:
        raise ValueError(f"{PARTITIONS_CONF}={text!r} must be a positive integer")
    return int(text)


def _scored_fields(n_cluster_cols: int) -> list[tuple[str, pa.DataType]]:
    keys = [(f"c{k}", pa.string()) for k in range(n_cluster_cols)]
    return [("grp", pa.string()), *keys, ("s", pa.float64()), ("n_pos", pa.float64()), ("n_neg", pa.float64())]


def _keys_as_text(values) -> pa.Array:
    """Cluster keys (any type) as text: only their equality matters, and the shuffle needs one type."""
    array = pa.array(values, from_pandas=True)
    return array if pa.types.is_string(array.type) else pc.cast(array, pa.string())


def score_on_executors(rows: DataFrame, score: Callable[[pd.DataFrame], np.ndarray], name: str,
                       prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
                       cluster_cols: tuple[str, ...] = ()) -> DataFrame:
    """(grp, c0[, c1], s, n_pos, n_neg): the output's score of every row, computed batch by batch on the
    executors, with the row's cluster keys as text. A score that is not finite stays NaN here and is counted
    and named by the audit."""
    fields = _scored_fields(len(cluster_cols))
    # The scorer travels in the UDF's closure, which Spark serializes with the function itself (classic and
    # Connect alike); scorers are small (coefficients, breakpoints), so no broadcast variable is needed.
    def scored(batches):
        for batch in batches:
            frame, values = output_scores(batch, score, name, prepare)
            values = np.where(np.isfinite(values), values + 0.0, np.nan)  # -0.0 and +0.0 are one block
            yield pa.RecordBatch.from_pydict({
                "grp": pa.array(frame["group"].to_numpy(dtype=object), pa.string(), from_pandas=True),
                **{f"c{k}": _keys_as_text(frame[col].to_numpy(dtype=object)) for k, col in enumerate(cluster_cols)},
                "s": values,
                "n_pos": frame["n_pos"].to_numpy(dtype=np.float64), "n_neg": frame["n_neg"].to_numpy(dtype=np.float64)})

    return rows.mapInArrow(scored, ", ".join(f"{n} {'string' if t == pa.string() else 'double'}" for n, t in fields))


def _group_totals(scored: DataFrame, name: str, cluster_cols: tuple[str, ...] = ()):
    missing = [F.count(F.when(F.col(f"c{k}").isNull(), 1)).alias(f"null_c{k}") for k in range(len(cluster_cols))]
    totals = (scored.groupBy("grp").agg(F.sum("n_pos").alias("n_pos"), F.sum("n_neg").alias("n_neg"),
                                        F.count(F.when(F.isnan("s"), 1)).alias("bad"), F.count("*").alias("rows"),
                                        *missing)
              .toPandas())
    for k, col in enumerate(cluster_cols):
        if totals[f"null_c{k}"].sum():
            raise AuditInputError(f"aggregates.{col} has {int(totals[f'null_c{k}'].sum())} missing values")
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


def _partition_sweeps(ranged: DataFrame, groups, n_pos, n_neg, cutoffs, offsets: dict, n_cluster_cols: int) -> DataFrame:
    """Each partition swept on its executor from its offsets: a row (pid, state) per partition and, with
    clusters, a row (stream, keys, sums) per cluster of each clustering stream in it (`spark_clusters`)."""
    values, offsets_of, G = list(groups), offsets, len(groups)
    fields = _scored_fields(n_cluster_cols)

    def sweep(batches):
        table = pa.Table.from_batches(list(batches), schema=pa.schema(fields))
        pid = TaskContext.get().partitionId()
        if table.num_rows == 0:
            return
        codes = _codes(table.column("grp"), pa.array(values, pa.string()))
        part = PartitionSweep(groups, n_pos, n_neg, cutoffs, *offsets_of[pid])
        if n_cluster_cols:
            yield from sweep_range_with_clusters(table, codes, part, n_cluster_cols)
        else:
            part.update_columns(*partition_blocks(table.column("s").to_numpy(), codes,
                                                  table.column("n_pos").to_numpy(), table.column("n_neg").to_numpy(), G))
        yield pa.RecordBatch.from_pydict({
            "pid": pa.array([pid], pa.int32()), "state": pa.array([_state_bytes(part.state())], pa.binary()),
            **({"stream": pa.nulls(1, pa.int32()), "k0": pa.nulls(1, pa.string()), "k1": pa.nulls(1, pa.string()),
                "sums": pa.nulls(1, pa.list_(pa.float64()))} if n_cluster_cols else {})})

    return ranged.mapInArrow(sweep, SUMS_SCHEMA if n_cluster_cols else "pid int, state binary")


def _states(swept: DataFrame) -> dict[int, dict]:
    """{partition id: sweep state}."""
    collected = swept.where(F.col("state").isNotNull()).select("pid", "state").toPandas()
    return {int(pid): _state(data) for pid, data in zip(collected["pid"], collected["state"])}


@executor_input_errors()
def audit_spark_rows(rows: DataFrame, score: Callable[[pd.DataFrame], np.ndarray], name: str, cutoffs, *,
                     prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None, min_count: int,
                     confidence: float, estimand: str | None = None, margins=None, cluster_cols=(),
                     partitions: int | None = None, **stream_options) -> tuple[AuditReport, int]:
    """`audit_aggregates` of the output's rescored rows (group[, cluster columns], score, n_pos, n_neg; rows may
    repeat a (group, score)), computed on the executors: ``score(frame)`` scores a batch of ``rows`` (after
    ``prepare``). Variances are cluster-robust by ``cluster_cols`` (one column, or item and query: two-way),
    else the conditional (iid) ones; ``stream_options``: min_clusters, comparisons, reference of `StreamingAudit`.
    ``partitions``: the score ranges (default: `session_partitions`). Returns the report and the number of rows
    audited."""
    cutoffs, cluster_cols = as_cutoffs(cutoffs), tuple(cluster_cols)
    partitions = partitions or session_partitions(rows)
    scored = score_on_executors(rows, score, name, prepare, cluster_cols)
    ranged = scored.repartitionByRange(int(partitions), F.col("s").desc()).persist(StorageLevel.MEMORY_AND_DISK)
    swept = None
    try:
        groups, n_pos, n_neg, n_rows = _group_totals(ranged, name, cluster_cols)
        stream = StreamingAudit(groups, n_pos, n_neg, cutoffs, min_count=min_count, confidence=confidence,
                                margins=margins, **stream_options)
        counts = _partition_counts(ranged, groups).sort_values("top", ascending=False)  # score order
        pos_above, neg_above = partition_offsets(np.vstack(counts["pos"]), np.vstack(counts["neg"]))
        offsets = {int(pid): (pos_above[k], neg_above[k]) for k, pid in enumerate(counts["pid"])}
        swept = _partition_sweeps(ranged, groups, n_pos, n_neg, cutoffs, offsets, len(cluster_cols))
        if cluster_cols:  # the per-cluster rows wait on the executors for the shuffle after the merge
            swept = swept.persist(StorageLevel.MEMORY_AND_DISK)
        states = _states(swept)
        merge_partition_states(stream, [states[int(pid)] for pid in counts["pid"]])
        if not cluster_cols:
            return stream.report(estimand=estimand), n_rows
        sums = ShuffledClusterSums(swept.where(F.col("stream").isNotNull()), len(cluster_key_sets(len(cluster_cols))),
                                   n_pos, n_neg, variance_alphas(cutoffs), column_pairs(len(groups)), partitions)
        return stream.report(prefix=sums.streams(), estimand=estimand), n_rows
    finally:
        if swept is not None and cluster_cols:
            swept.unpersist()
        ranged.unpersist()
