"""Cluster-robust variances of the audit on Spark: influence sums per cluster on the executors, moments to the driver.

Each score range (`spark_audit`) is swept on its executor from its offsets together with `PrefixClusterSums`
started at the same offsets (`prefix_stream.feed_rows`): every row of the range sits at its global place on every
ROC curve, so the range's sums per cluster are its share of the one pass's sums. The ranges emit one row per
(clustering stream, cluster key) holding those sums (`PrefixClusterSums.per_cluster`: ~10^2 numbers). Once the
driver has merged the sweep and knows I(alpha) and ROC(alpha), a shuffle on (stream, key) brings each cluster's rows
together; each shuffle partition adds them up, forms the clusters' influence totals and returns their
`ClusterMoments` (CR1 / CR2 cross products, the sums df needs, cluster counts): (cutoffs x columns x columns)
numbers per partition, whatever the number of clusters or rows. The streams: item or query clusters, or two-way
(item, query, item x query), as `prefix_stream.cluster_key_sets`.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from scipy import sparse

from fair_pipeline.audit.prefix_stream import cluster_key_sets, cluster_sums, feed_rows, signed_streams
from fair_pipeline.audit.stats import AuditInputError
from fair_pipeline.audit.stats.cluster_moments import ClusterMoments
from fair_pipeline.audit.stats.prefix_clusters import PrefixClusterSums

SUMS_SCHEMA = "pid int, state binary, stream int, k0 string, k1 string, sums array<double>"
FEED_ROWS = 1 << 18  # rows per Arrow batch fed to the sweep


def _stream_codes(table: pa.Table, n_cluster_cols: int) -> tuple[list[np.ndarray], list[tuple]]:
    """Dense codes of each clustering stream's key among the range's rows, and the keys of each code
    (second key None for one-way streams)."""
    encoded = [table.column(f"c{k}").combine_chunks().dictionary_encode() for k in range(n_cluster_cols)]
    idx = [np.asarray(e.indices.to_numpy(zero_copy_only=False), dtype=np.int64) for e in encoded]
    words = [e.dictionary for e in encoded]
    codes, keys = [], []
    for cols in cluster_key_sets(n_cluster_cols):
        if len(cols) == 1:
            k = int(cols[0][1:])
            codes.append(idx[k])
            keys.append((words[k], None))
        else:
            pair, inverse = np.unique(idx[0] * len(words[1]) + idx[1], return_inverse=True)
            codes.append(inverse.ravel())
            keys.append((words[0].take(pa.array(pair // len(words[1]))), words[1].take(pa.array(pair % len(words[1])))))
    return codes, keys


def sweep_range_with_clusters(table: pa.Table, group_codes: np.ndarray, part, n_cluster_cols: int):
    """Sweep a score range's rows (any order) into ``part`` (`PartitionSweep`, started at the range's offsets)
    with the per-cluster sums of every stream; yields Arrow batches of `SUMS_SCHEMA` rows, one per (stream,
    cluster) (the range's state row is the caller's)."""
    codes, keys = _stream_codes(table, n_cluster_cols)
    s = table.column("s").to_numpy()
    n_pos, n_neg = table.column("n_pos").to_numpy(), table.column("n_neg").to_numpy()
    neg_rows, pos_rows = np.flatnonzero(n_neg > 0), np.flatnonzero(n_pos > 0)
    rows = np.r_[neg_rows, pos_rows]
    cell = np.r_[group_codes[neg_rows] * 2, group_codes[pos_rows] * 2 + 1]
    order = np.argsort(-s[rows], kind="stable")
    rows, cell = rows[order], cell[order]
    count = np.where(cell & 1, n_pos[rows], n_neg[rows])
    fed = pa.table({"s": s[rows], "cell": cell, "n": count, **{f"k{n}": c[rows] for n, c in enumerate(codes)}})
    sums = cluster_sums(part.stream, [len(k[0]) for k in keys], split_singletons=False)
    sweep = part.stream.audit.sweep
    for acc in sums:
        acc.start_at(sweep.p_above[:-1], sweep.n_above[:-1])
    feed_rows(fed.to_batches(FEED_ROWS), part.stream, sums)
    for n, (acc, (first, second)) in enumerate(zip(sums, keys)):
        per = acc.per_cluster()
        held = np.flatnonzero((acc.N.sum(axis=0) + acc.P.sum(axis=0)) > 0)
        if not held.size:
            continue
        per = per[held]
        offsets = pa.array(np.arange(held.size + 1, dtype=np.int32) * per.shape[1])
        yield pa.RecordBatch.from_pydict({
            "pid": pa.nulls(held.size, pa.int32()), "state": pa.nulls(held.size, pa.binary()),
            "stream": pa.array(np.full(held.size, n, dtype=np.int32)), "k0": first.take(pa.array(held)),
            "k1": pa.nulls(held.size, pa.string()) if second is None else second.take(pa.array(held)),
            "sums": pa.ListArray.from_arrays(offsets, pa.array(per.ravel()))})


def _cluster_moments(batches, n_pos, n_neg, alphas, pairs, auc, roc):
    """A shuffle partition's clusters (rows of one (stream, key) together): their summed rows' influence
    totals as `ClusterMoments`, one serialized row per stream."""
    batches = list(batches)
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        return
    stream = table.column("stream").to_numpy()
    first, second = (table.column(k).combine_chunks().dictionary_encode() for k in ("k0", "k1"))
    in_second = pc.fill_null(second.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1  # 0: no key
    cluster = first.indices.to_numpy(zero_copy_only=False).astype(np.int64) * (len(second.dictionary) + 1) + in_second
    values = table.column("sums").combine_chunks()
    width = len(values[0])
    flat = values.flatten().to_numpy().reshape(-1, width)
    for n in np.unique(stream):
        mine = np.flatnonzero(stream == n)
        ids, inverse = np.unique(cluster[mine], return_inverse=True)
        members = sparse.csr_matrix((np.ones(mine.size), (inverse.ravel(), np.arange(mine.size))),
                                    shape=(ids.size, mine.size))
        summed = PrefixClusterSums.from_per_cluster(n_pos, n_neg, alphas, pairs, members @ flat[mine])
        moments = summed.add_to(ClusterMoments(pairs, alphas.size, len(pairs), len(n_pos) + 1), auc, roc)
        yield pa.RecordBatch.from_pydict({"stream": pa.array([int(n)], pa.int32()),
                                          "moments": pa.array([moments.to_bytes()], pa.binary())})


class ShuffledClusterSums:
    """The per-cluster rows of every score range (a DataFrame of `SUMS_SCHEMA` rows with a stream) and what the
    shuffle makes of them; `streams` gives ``report(prefix=...)`` its (sign, sums) list."""

    def __init__(self, rows: DataFrame, n_streams: int, n_pos, n_neg, alphas, pairs, partitions: int):
        self.rows, self.n_streams, self.partitions = rows, n_streams, int(partitions)
        self.n_pos, self.n_neg, self.alphas, self.pairs = n_pos, n_neg, alphas, pairs
        self._moments: dict[int, ClusterMoments] | None = None

    def moments(self, auc, roc) -> dict[int, ClusterMoments]:
        """Per stream, the moments of all its clusters (one shuffle for every stream, run once)."""
        if self._moments is None:
            n_pos, n_neg, alphas, pairs = self.n_pos, self.n_neg, self.alphas, self.pairs
            auc, roc = np.asarray(auc, dtype=np.float64), np.asarray(roc, dtype=np.float64)

            def totals(batches):
                yield from _cluster_moments(batches, n_pos, n_neg, alphas, pairs, auc, roc)

            shuffled = self.rows.select("stream", "k0", "k1", "sums").repartition(self.partitions, "stream", "k0", "k1")
            parts = shuffled.mapInArrow(totals, "stream int, moments binary").toPandas()
            merged = {n: ClusterMoments(pairs, alphas.size, len(pairs), len(n_pos) + 1) for n in range(self.n_streams)}
            for n, data in zip(parts["stream"], parts["moments"]):
                merged[int(n)].merge(ClusterMoments.from_bytes(pairs, data))
            self._moments = merged
        return self._moments

    def streams(self) -> list:
        return signed_streams([_Stream(self, n) for n in range(self.n_streams)])


class _Stream:
    """One clustering stream of `ShuffledClusterSums`, as `PrefixClusterSums` looks to the report."""

    def __init__(self, shuffled: ShuffledClusterSums, n: int):
        self.shuffled, self.n = shuffled, n

    def covariance(self, auc, roc, keep_totals: bool = True, every=None) -> ClusterMoments:
        # moments are small whatever the stream, so two-way's intersection (``keep_totals`` False) keeps them too,
        # and every column's are formed at every cutoff (``every``, the columns read below FPR 1, is a subset)
        moments = self.shuffled.moments(auc, roc)[self.n]
        if moments.clusters < 2:
            raise AuditInputError(f"a cluster-robust variance needs at least 2 clusters, got {moments.clusters}")
        return moments
