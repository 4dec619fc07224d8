"""The last step of the cluster-robust variances of the one pass in score order (`prefix_clusters`): per chunk of
clusters, their sums inside every cutoff into influence parts (the formula of `prefix_clusters`), then the CR1 /
CR2 cross products, df sums and cluster counts (`cluster_pass.ClusterTotals`, or `cluster_moments.ClusterMoments`
on Spark). `SummedClusterSums` holds the sums of a pass's score ranges added up per cluster (Spark's shuffle).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.cluster_pass import (ClusterCrossSums, ClusterTotals, PartSums, compared_contrasts,
                                                    cr2_factors)
from fair_pipeline.audit.stats.validation import AuditInputError

CROSS_CHUNK = 1 << 13  # clusters per step of the final cross products (their temporaries stay cache-sized)


class ClusterSumsBase:
    """The final step shared by the streamed sums and sums added up over score ranges: per chunk of clusters,
    their sums inside every cutoff (`_chunk`) into influence parts, CR1 / CR2 cross products and df sums."""

    def __init__(self, n_pos, n_neg, alphas, pairs, n_clusters: int):
        G = len(n_pos)
        self.G, self.C = G, int(n_clusters)
        self.m = np.maximum(np.r_[n_pos, np.sum(n_pos)].astype(np.float64), 1.0)
        self.n = np.maximum(np.r_[n_neg, np.sum(n_neg)].astype(np.float64), 1.0)
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.pairs = [(int(i), int(j)) for i, j in pairs]

    def _chunk(self, lo: int, hi: int):
        """Clusters lo..hi-1: N / P (G, w) all negatives / positives of each group; the ROC-free parts of
        straddling rows [(codes - lo, neg (S, K, codes), pos (S, K, codes))]; and per vector j, (j, neg, pos) with
        the sums inside each of j's cutoffs: ``neg`` (K, G + 2, w) vector j's negatives, then those x ROC of each
        vector; ``pos`` (K, 2, G, w) each group's positives and those x FPR of j."""
        raise NotImplementedError

    def held_clusters(self) -> int:
        """Clusters with rows of a positive count."""
        return int(sum(np.count_nonzero(self._held(lo, min(self.C, lo + CROSS_CHUNK)))
                       for lo in range(0, self.C, CROSS_CHUNK)))

    def _held(self, lo: int, hi: int) -> np.ndarray:
        raise NotImplementedError

    def covariance(self, auc, roc, keep_totals: bool = True, every=None) -> ClusterCrossSums:
        """The clusters' CR2 totals and covariances (`cluster_pass.ClusterTotals`), given the sweep's I(alpha)
        and ROC(alpha) of every column at every cutoff ((S, K) each); without ``keep_totals`` (two-way's
        intersection stream, which adds no df) only the covariances and counts (`ClusterCrossSums`).
        ``every``: the columns needed at every cutoff; the others only at the last one (FPR 1, xAUC), so
        their other cross products are not formed (`LastCutoffColumns`)."""
        C = self.held_clusters()
        if C < 2:
            raise AuditInputError(f"a cluster-robust variance needs at least 2 clusters, got {C}")
        K, S, V = self.alphas.size, len(self.pairs), self.G + 1
        if every is not None and K > 1:
            out = last_cutoff_sums(self.pairs, K, V, every, keep_totals)
            self.add_to(out, auc, roc, out[0].every)
            return LastCutoffColumns(*out)
        out = ClusterTotals(self.pairs, K, S, V, compared_contrasts(self.pairs, self.G)) if keep_totals else \
            ClusterCrossSums(self.pairs, K, S, V, design=False)
        return self.add_to(out, auc, roc)

    def add_to(self, out, auc, roc, every=None):
        """Add the clusters' influence parts and counts to ``out`` (`ClusterTotals`, or `ClusterMoments`); with
        ``every``, ``out`` is a pair: the sums of those columns at the cutoffs before the last, then of all
        columns at the last."""
        G, K, S = self.G, self.alphas.size, len(self.pairs)
        auc, roc = np.asarray(auc, dtype=np.float64), np.asarray(roc, dtype=np.float64)
        a = self.alphas[:, None, None]
        # per negative vector j: (cutoffs, its columns formed there); with ``every``, the others at the last only
        plan = []
        for j in range(G + 1):
            s, i = np.array([(s, i) for s, (i, jj) in enumerate(self.pairs) if jj == j], dtype=np.intp).reshape(-1, 2).T
            keep = np.ones(s.size, dtype=bool) if every is None else np.isin(s, every)
            plan.append([(ks, s[m], i[m], as_slice(s[m]), as_slice(i[m]), as_slice(1 + i[m]))
                         for ks, m in ((slice(0, K), keep), (slice(K - 1, K), ~keep)) if m.any()])
        targets = ([(out, slice(0, K), slice(None))] if every is None else
                   [(out[0], slice(0, K - 1), as_slice(every)), (out[1], slice(K - 1, K), slice(None))])
        # (K, S, clusters) while the columns are formed (each contiguous), then (K, clusters, S); one pair of buffers
        # for every chunk (entries not formed are never read, but are added to: zeros, not garbage)
        empty = np.empty if every is None else np.zeros
        buffers = empty((2, K, S, min(self.C, CROSS_CHUNK)))
        for lo in range(0, self.C, CROSS_CHUNK):
            hi = min(self.C, lo + CROSS_CHUNK)
            N, P, edges, owners = self._chunk(lo, hi)
            N = np.vstack([N, N.sum(axis=0, keepdims=True)])
            P = np.vstack([P, P.sum(axis=0, keepdims=True)])
            Uneg, Upos = buffers[..., :hi - lo]
            for j, neg, pos in owners:
                for ks, s, i, at_s, at_i, at_roc in plan[j]:
                    R, I = roc[s, ks].T[:, :, None], auc[s, ks].T[:, :, None]  # (cutoffs, columns, 1)
                    outside = a[ks] * N[j]
                    outside -= neg[ks, :1]  # n_j B of these columns
                    # in place, in the buffers where the columns are a run (views): fewer temporaries, same sums
                    u = np.multiply(R, outside, out=Uneg[ks, at_s] if isinstance(at_s, slice) else None)
                    u += neg[ks, at_roc]  # (a view where the columns' positive vectors are a run)
                    u -= I * N[j]
                    u /= self.n[j]
                    if not isinstance(at_s, slice):
                        Uneg[ks, s] = u
                    counts, fpr = (vector_rows(pos[ks, side], at_i) for side in range(2))  # (k, columns, w)
                    u = np.multiply(a[ks], counts, out=Upos[ks, at_s] if isinstance(at_s, slice) else None)
                    u -= fpr
                    u -= I * P[i]
                    u /= self.m[i][:, None]
                    if not isinstance(at_s, slice):
                        Upos[ks, s] = u
            for codes, neg_sums, pos_sums in edges:
                Uneg[:, :, codes] += neg_sums.transpose(1, 0, 2)
                Upos[:, :, codes] += pos_sums.transpose(1, 0, 2)
            held = (N[G] + P[G]) > 0  # codes may be unused
            if not held.all():  # (dense codes of distinct keys: every one holds rows)
                N, P, Uneg, Upos = N[:, held], P[:, held], Uneg[..., held], Upos[..., held]
            factors = cr2_factors(P.T, N.T, self.m, self.n)  # the same clusters for every target
            for target, ks, cols in targets:
                un, up = (u[ks, cols].transpose(0, 2, 1) for u in (Uneg, Upos))  # views: read once, by the sums
                target.add(un, up, P.T, N.T, self.m, self.n, factors)
        return out


def as_slice(columns) -> slice | np.ndarray:
    """Column indices as a slice when they are a run (numpy then takes a view, not a copy)."""
    columns = np.asarray(columns, dtype=np.intp)
    if columns.size and np.array_equal(columns, np.arange(columns[0], columns[0] + columns.size)):
        return slice(int(columns[0]), int(columns[0]) + columns.size)
    return columns


def vector_rows(counts, i) -> np.ndarray:
    """(k, len(i), w) rows ``i`` (indices, or a slice of them) of per-group sums (k, G, w), row G being the pooled
    vector (their sum)."""
    G = counts.shape[1]
    if isinstance(i, slice) and i.stop <= G:
        return counts[:, i]
    rows = np.arange(G + 1)[i]
    if np.all(rows < G):
        return counts[:, i]
    if np.all(rows == G):
        return np.repeat(counts.sum(axis=1, keepdims=True), rows.size, axis=1)
    return np.concatenate([counts, counts.sum(axis=1, keepdims=True)], axis=1)[:, i]


def last_cutoff_sums(pairs, K: int, V: int, every, keep_totals: bool = True) -> tuple:
    """Empty sums for `LastCutoffColumns`: of the columns ``every`` at the K - 1 cutoffs before the last, of all
    columns at the last (`ClusterTotals`, or with ``keep_totals`` false cross products only, `ClusterCrossSums`);
    the first carries ``every``."""
    every = np.asarray(every, dtype=np.intp)
    if keep_totals:
        first = [pairs[s] for s in every]  # the group pairs compared are those of the xAUC columns among all
        compared = [(a, b) for a, b in pairs if a < b < V - 1 and (b, a) in pairs]
        out = (ClusterTotals(first, K - 1, every.size, V, compared_contrasts(first, V - 1, compared)),
               ClusterTotals(pairs, 1, len(pairs), V, compared_contrasts(pairs, V - 1)))
        out[0].design.moments = None  # the clusters' shares are the last cutoff's (`LastCutoffColumns`)
    else:
        out = (ClusterCrossSums([pairs[s] for s in every], K - 1, every.size, V, design=False),
               ClusterCrossSums(pairs, 1, len(pairs), V, design=False))
    out[0].every = every
    return out


class LastCutoffColumns:
    """The `ClusterTotals` interface over columns some of which are needed at the last cutoff only: ``first``
    holds the columns ``first.every`` at the cutoffs before the last, ``last`` all columns at the last
    (`last_cutoff_sums`). Covariances of the cross products not formed are NaN, and so are the df of contrasts
    using such a column there. Sums of cross products only (two-way's intersection) have no totals or design."""

    def __init__(self, first: ClusterCrossSums, last: ClusterCrossSums):
        self.first, self.last, self.every, self.S = first, last, first.every, len(last.pairs)
        self.clusters_with = last.clusters_with
        self.design = None
        if last.design is not None:
            K = first.cross.shape[0] + 1
            self.design = PartSums(K, self.S, last.design.moments.shape[2])
            self.design.moments = last.design.moments  # the clusters' shares: the same for every cutoff and column
            # zeros, not NaN, where not formed: a contrast's design variance weights every column (most by 0)
            self.design.part_cross[:, :-1] = self._full(first.design.part_cross, 0.0, axis=1)
            self.design.part_cross[:, -1:] = last.design.part_cross

    @property
    def clusters(self) -> int:
        return self.last.clusters

    def add_clusters(self, n: int) -> None:
        """Count ``n`` more clusters, whose cross products were added to ``first`` and ``last`` directly."""
        self.first.clusters += n
        self.last.clusters += n

    def _full(self, sums: np.ndarray, fill: float, axis: int = 0) -> np.ndarray:
        """(..., K - 1, S, S) from the sums of the ``every`` columns (..., K - 1, s, s)."""
        shape = list(sums.shape)
        shape[-2:] = [self.S, self.S]
        out = np.full(shape, fill)
        out[..., self.every[:, None], self.every[None, :]] = sums
        return out

    def covariance(self) -> np.ndarray:
        return np.concatenate([self._full(self.first.covariance(), np.nan), self.last.covariance()])

    def cr1_covariance(self) -> np.ndarray:
        return np.concatenate([self._full(self.first.cr1_covariance(), np.nan), self.last.cr1_covariance()])

    def totals(self) -> LastCutoffColumns:
        return self

    def contrast_df(self, weights) -> np.ndarray:
        """Satterthwaite df per cutoff of sum_s weights[s] * column s (`cluster_pass.ColumnTotals`)."""
        w = np.asarray(weights, dtype=np.float64)
        first = (self.first.totals().contrast_df(w[self.every]) if np.isin(np.flatnonzero(w), self.every).all()
                 else np.full(self.first.cross.shape[0], np.nan))
        return np.r_[first, self.last.totals().contrast_df(w)]


class SummedClusterSums(ClusterSumsBase):
    """`PrefixClusterSums.per_cluster` rows of several score ranges added up per cluster, cumulated over bands."""

    @staticmethod
    def width(G: int, K: int, S: int) -> int:
        return (G + 1) ** 2 * K + (G + 1) * K + 2 * G * (G + 1) * K + 2 * G + 2 * S * K

    def __init__(self, n_pos, n_neg, alphas, pairs, sums):
        sums = np.asarray(sums, dtype=np.float64)
        super().__init__(n_pos, n_neg, alphas, pairs, sums.shape[0])
        G, K, S, C = self.G, self.alphas.size, len(self.pairs), self.C
        # (shape, banded): NR, NC, PF, PC per band (cumulated here into "inside cutoff k"), N, P, edge parts
        shapes = [((G + 1, G + 1, K), True), ((G + 1, K), True), ((G, G + 1, K), True), ((G, G + 1, K), True),
                  ((G,), False), ((G,), False), ((2, S, K), False)]
        self.parts, at = [], 0
        for shape, banded in shapes:
            size = int(np.prod(shape))
            part = sums[:, at:at + size].T.reshape(shape + (C,))
            if banded:
                part = np.cumsum(part, axis=-2)
            self.parts.append(part)
            at += size

    def _held(self, lo: int, hi: int) -> np.ndarray:
        return (self.parts[4][:, lo:hi].sum(axis=0) + self.parts[5][:, lo:hi].sum(axis=0)) > 0

    def _chunk(self, lo: int, hi: int):
        NR, NC, PF, PC, N, P, edge = (p[..., lo:hi] for p in self.parts)
        owners = ((j, np.concatenate([NC[j][:, None], NR[j].transpose(1, 0, 2)], axis=1),
                   np.stack([PC[:, j], PF[:, j]]).transpose(2, 0, 1, 3)) for j in range(self.G + 1))
        return N, P, [(np.arange(hi - lo), edge[0], edge[1])], owners
