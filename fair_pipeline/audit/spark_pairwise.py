"""Within-query pairwise accuracies of one scored output on Spark where the rows are, two-way clustered by item and
query; the driver receives sums of fixed size only.

The held-out rows (a lazy DataFrame: ``query_id``, ``item_id``, ``group``, ``n_pos``, ``n_neg`` and the columns the
output scores) are scored on the executors (`spark_audit.score_on_executors`), then:

1. hash-partitioned by query and sorted within each partition, so every partition streams whole queries: each
   chunk of whole queries yields, on the executor, one row per query (its pairs and correct pairs per (better
   group, worse group) cell, and its parity counts) and one row per item x query cell (the pairs touching the item
   there; `stats.pairwise_cells.query_cell_sums`); kept (`persist`);
2. each partition sums its queries' rows into a `PairwiseAccumulator` (a few G x G arrays) for the driver, which
   merges them: every accuracy, pair count and the totals the variances need;
3. with the totals sent back, each partition turns its queries and its cells into the query and item x query
   streams' moments (`stats.pairwise_moments`: a (figures x 6) array), and a shuffle on the item key adds each
   item's cells up (Spark's aggregation) before the same is done for items.

So the driver receives O(partitions x figures) numbers, flat in the day's rows, queries and items; the result
equals `pairwise_from_counts` on the same rows (tests/platform/spark/test_spark_pairwise.py).
"""
from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fair_pipeline.audit.spark_audit import score_on_executors, session_partitions
from fair_pipeline.audit.spark_errors import executor_input_errors
from fair_pipeline.audit.stats import AuditInputError
from fair_pipeline.audit.stats.pairwise import (
    TWO_WAY_DIMS,
    PairwiseAccumulator,
    PairwiseResult,
    clustered_result,
    labelled_rows,
    query_counts,
)
from fair_pipeline.audit.stats.pairwise_cells import CELL, ITEM, QUERY, TWO_WAY_SIGNS, query_cell_sums
from fair_pipeline.audit.stats.pairwise_moments import MOMENTS, TERM_MOMENTS, PairwiseMoments, pairwise_contrasts

QUERY_ROW, CELL_ROW = 0, 1
PARTS_SCHEMA = "kind int, key string, t array<double>, c array<double>, pt array<double>, pc array<double>"
BYTES_SCHEMA = "part binary"


def _lists(values: np.ndarray) -> pa.Array:
    """(rows, G, G) as a list<double> column of G*G values a row."""
    flat = np.ascontiguousarray(values, dtype=np.float64).reshape(len(values), -1)
    offsets = np.arange(len(flat) + 1, dtype=np.int32) * flat.shape[1]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat.ravel()))


def _arrays(column, G: int) -> np.ndarray:
    return np.asarray(pc.list_flatten(column).to_numpy(zero_copy_only=False), dtype=np.float64).reshape(-1, G, G)


def _chunk_parts(frame: pd.DataFrame, levels: pa.Array, G: int) -> pa.RecordBatch:
    """Query and item x query cell rows of a chunk of whole queries (columns q, i, grp, s, n_pos, n_neg)."""
    for column, what in (("q", "query_id"), ("i", "item_id"), ("grp", "group")):
        if frame[column].isna().any():
            raise AuditInputError(f"pairwise rows: {what} has {int(frame[column].isna().sum())} missing values")
    if not np.isfinite(frame["s"].to_numpy(np.float64)).all():
        raise AuditInputError(f"pairwise rows: {int((~np.isfinite(frame['s'].to_numpy(np.float64))).sum())} scores "
                              "are NaN or infinite")
    codes = pc.index_in(pa.array(frame["grp"], pa.string()), value_set=levels).to_numpy(zero_copy_only=False)
    if pd.isna(codes).any():
        unknown = sorted(set(frame["grp"][pd.isna(codes)].astype(str)))
        raise AuditInputError(f"groups {unknown} are not among the audited groups {levels.to_pylist()}")
    queries, qcode = np.unique(frame["q"].to_numpy(dtype=object).astype(str), return_inverse=True)
    items, icode = np.unique(frame["i"].to_numpy(dtype=object).astype(str), return_inverse=True)
    q, item, s, g, y, w = labelled_rows(qcode, icode, frame["s"], codes.astype(np.intp), frame["n_pos"], frame["n_neg"])
    (qs, qT, qC), (_, cell_items, cT, cC) = query_cell_sums(q, item, s, g, y, G, w)
    C, T, Cs, Ts = query_counts(np.searchsorted(qs, q), s, g, y, G, w)
    n_q, n_c = len(qs), len(cell_items)
    empty = pa.nulls(n_c, pa.list_(pa.float64()))
    return pa.RecordBatch.from_pydict({
        "kind": pa.array(np.r_[np.full(n_q, QUERY_ROW), np.full(n_c, CELL_ROW)].astype(np.int32)),
        "key": pa.array(np.r_[queries[qs], items[cell_items]].astype(object), pa.string()),
        "t": pa.concat_arrays([_lists(T), _lists(cT)]), "c": pa.concat_arrays([_lists(C), _lists(cC)]),
        "pt": pa.concat_arrays([_lists(Ts), empty]), "pc": pa.concat_arrays([_lists(Cs), empty])})


def _per_query_parts(scored: DataFrame, levels: list, partitions: int) -> DataFrame:
    """Step 1: per partition of whole queries (sorted by query), the query and cell rows, chunk by chunk."""
    groups, G = pa.array(levels, pa.string()), len(levels)

    def parts(batches):
        carry = None
        for batch in batches:
            frame = batch.to_pandas()
            if carry is not None:
                frame = pd.concat([carry, frame], ignore_index=True)
            if frame.empty:
                continue
            last = frame["q"].iloc[-1]
            carry = frame[frame["q"] == last]  # the last query may continue in the next batch
            done = frame[frame["q"] != last]
            if len(done):
                yield _chunk_parts(done, groups, G)
        if carry is not None and len(carry):
            yield _chunk_parts(carry.reset_index(drop=True), groups, G)

    rows = (scored.select(F.col("c0").alias("q"), F.col("c1").alias("i"), "grp", "s", "n_pos", "n_neg")
            .repartition(partitions, "q").sortWithinPartitions("q"))
    return rows.mapInArrow(parts, PARTS_SCHEMA)


def _accumulator_bytes(acc: PairwiseAccumulator) -> bytes:
    buffer = io.BytesIO()
    arrays = {f"{name}.{k}": np.asarray(v) for name, sums in acc.sums.items() for k, v in enumerate(sums)}
    np.savez(buffer, n_queries=np.array([acc.n_queries]), **arrays)
    return buffer.getvalue()


def _accumulator(levels, data: bytes) -> PairwiseAccumulator:
    acc = PairwiseAccumulator(np.asarray(levels, dtype=object))
    sums: dict[str, dict[int, np.ndarray]] = {}
    with np.load(io.BytesIO(data)) as arrays:
        for key in arrays.files:
            if key != "n_queries":
                name, k = key.rsplit(".", 1)
                sums.setdefault(name, {})[int(k)] = arrays[key]
        acc.n_queries = int(arrays["n_queries"][0])
    acc.sums = {name: tuple(parts[k] for k in range(len(parts))) for name, parts in sums.items()}
    return acc


def _accumulate(parts: DataFrame, levels: list) -> PairwiseAccumulator:
    """Step 2: every partition's queries summed into an accumulator; merged on the driver."""
    G = len(levels)

    def sums(batches):
        acc = PairwiseAccumulator(np.asarray(levels, dtype=object))
        for batch in batches:
            acc.add_counts(*(_arrays(batch.column(name), G) for name in ("c", "t", "pc", "pt")))
        if acc.sums:
            yield pa.RecordBatch.from_pydict({"part": pa.array([_accumulator_bytes(acc)], pa.binary())})

    out = PairwiseAccumulator(np.asarray(levels, dtype=object))
    for row in parts.filter(F.col("kind") == QUERY_ROW).mapInArrow(sums, BYTES_SCHEMA).collect():
        out.merge(_accumulator(levels, bytes(row["part"])))
    return out


def _stream_moments(frame: DataFrame, levels: list, tot_T, tot_C) -> tuple[np.ndarray, np.ndarray]:
    """Step 3: the moments of one stream's clusters (rows of t, c lists), per partition, summed on the driver."""
    contrasts, G = pairwise_contrasts(len(levels)), len(levels)
    shapes = [(contrasts.weights.shape[1], len(MOMENTS)), (contrasts.weights.shape[0], TERM_MOMENTS)]

    def moments(batches):
        out = PairwiseMoments.empty(contrasts, tot_T, tot_C, [1.0])
        for batch in batches:
            out.add(0, _arrays(batch.column("t"), G), _arrays(batch.column("c"), G))
        data = np.r_[out.moments[0].ravel(), out.terms[0].ravel()]
        yield pa.RecordBatch.from_pydict({"part": pa.array([data.tobytes()], pa.binary())})

    total = np.zeros(sum(a * b for a, b in shapes))
    for row in frame.mapInArrow(moments, BYTES_SCHEMA).collect():
        total += np.frombuffer(bytes(row["part"]), dtype=np.float64)
    split = shapes[0][0] * shapes[0][1]
    return total[:split].reshape(shapes[0]), total[split:].reshape(shapes[1])


def _items(cells: DataFrame, G: int) -> DataFrame:
    """Each item's cells added up by a shuffle on the item key: (t, c) lists per item."""
    cols = [F.sum(F.col(name)[k]).alias(f"{name}{k}") for name in ("t", "c") for k in range(G * G)]
    summed = cells.groupBy("key").agg(*cols)
    return summed.select(*[F.array(*[F.col(f"{name}{k}") for k in range(G * G)]).alias(name) for name in ("t", "c")])


@executor_input_errors()
def pairwise_spark_rows(rows: DataFrame, score: Callable[[pd.DataFrame], np.ndarray], name: str, levels, *,
                        prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None, confidence: float = 0.95,
                        margins=None, partitions: int | None = None) -> tuple[PairwiseResult, int]:
    """The output's pairwise accuracies on ``rows`` (query_id, item_id, group, n_pos, n_neg and the scored columns),
    two-way clustered by item and query (new items and new queries), computed on the executors; and the number of
    queries the rows hold. ``partitions``: of the queries (default: `spark_audit.session_partitions`)."""
    levels = [str(g) for g in levels]
    partitions = partitions or session_partitions(rows)
    scored = score_on_executors(rows, score, name, prepare, cluster_cols=("query_id", "item_id"))
    parts = _per_query_parts(scored, levels, partitions).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        acc = _accumulate(parts, levels)
        matrix, marginals, parity, overall = acc.tables(confidence)
        gaps = acc.gaps(confidence, margins)
        Ct, Tt = acc.sums["matrix"][:2]
        moments = PairwiseMoments.empty(pairwise_contrasts(len(levels)), Tt, Ct, TWO_WAY_SIGNS)
        cells = parts.filter(F.col("kind") == CELL_ROW)
        streams = {QUERY: parts.filter(F.col("kind") == QUERY_ROW), CELL: cells, ITEM: _items(cells, len(levels))}
        for stream, frame in streams.items():
            moments.add_moments(stream, *_stream_moments(frame.select("t", "c"), levels, Tt, Ct))
    finally:
        parts.unpersist()
    result = clustered_result(moments, np.asarray(levels, dtype=object), matrix, marginals, parity, overall, None,
                              gaps, "two_way", confidence, margins, dims=TWO_WAY_DIMS)
    return result, acc.n_queries


def sampled_cell_items(rows: DataFrame) -> pd.DataFrame:
    """group, with_pos, with_neg: each group's distinct items with positives and with negatives among the sampled
    queries' ``rows`` (group, item_id, n_pos, n_neg), counted on the executors; one row per group to the driver
    (the minimum cell size of the pairwise accuracies, `stats.cell_size.sampled_small_cells`)."""
    def items_where(condition):
        return F.count_distinct(F.when(condition, F.col("item_id")))  # NULL (the other rows) is not counted

    counts = rows.groupBy("group").agg(items_where(F.col("n_pos") > 0).alias("with_pos"),
                                       items_where(F.col("n_neg") > 0).alias("with_neg")).toPandas()
    return counts.astype({"with_pos": "int64", "with_neg": "int64"})
