"""Cluster-robust covariances and degrees of freedom from sums over clusters, mergeable across machines.

`cluster_pass.ClusterTotals` keeps every cluster's adjusted totals (K, clusters, S) for the Satterthwaite df of
any contrast. The audit only asks df of single columns and of differences of two columns (`grid_audit.column_df`),
whose Satterthwaite df needs, per cutoff, the sums over clusters of the contrast's squared and fourth-power
totals and the number of clusters where it is nonzero. `ClusterMoments` keeps exactly those, (K, S, S) each
(the diagonal for a single column, entry (s, t) for column s minus column t), plus the CR1 / CR2 cross products
and cluster counts. Its size does not depend on the number of clusters, so executors that each hold some of the
clusters (`merge`) hand the driver a few (K, S, S) arrays.
"""
from __future__ import annotations

import io

import numpy as np

from fair_pipeline.audit.stats.cluster_pass import ClusterCrossSums
from fair_pipeline.audit.stats.small_sample import satterthwaite_from_sums
from fair_pipeline.audit.stats.validation import AuditInputError

PAIR_CELLS = 1 << 21  # (cutoff, cluster, column, column) cells per step of the pairwise moments


class ClusterMoments(ClusterCrossSums):
    """The `ClusterTotals` interface (``add``, ``covariance``, ``cr1_covariance``, ``clusters``,
    ``clusters_with``, ``totals``) with moments instead of per-cluster totals; ``contrast_df`` gives the df."""

    FIELDS = ("cross", "cross_cr2", "sq", "fourth", "nonzero", "clusters_with")

    def __init__(self, pairs, K: int, S: int, V: int):
        super().__init__(pairs, K, S, V)
        self.sq, self.fourth, self.nonzero = np.zeros((K, S, S)), np.zeros((K, S, S)), np.zeros((K, S, S))

    def add(self, Uneg, Upos, pos_counts, neg_counts, m, n, factors=None) -> np.ndarray:
        """Clusters' influence parts (K, clusters, S) and class counts (clusters, vectors), as `ClusterTotals.add`."""
        adj = super().add(Uneg, Upos, pos_counts, neg_counts, m, n, factors)
        K, C, S = adj.shape
        step = max(1, PAIR_CELLS // max(1, K * S * S))
        eye = np.eye(S, dtype=bool)
        for lo in range(0, C, step):
            a = adj[:, lo:lo + step]
            d = a[:, :, :, None] - a[:, :, None, :]  # column s minus column t; the diagonal: column s alone
            d[:, :, eye] = a
            d2 = d * d
            self.sq += d2.sum(axis=1)
            self.fourth += (d2 * d2).sum(axis=1)
            self.nonzero += np.count_nonzero(d, axis=1)
        return adj

    def merge(self, other: ClusterMoments) -> ClusterMoments:
        """Add the moments of other clusters (disjoint from this one's)."""
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.design.part_cross += other.design.part_cross
        self.design.moments += other.design.moments
        self.clusters += other.clusters
        return self

    def totals(self) -> ClusterMoments:
        return self

    def contrast_df(self, weights) -> np.ndarray:
        """Satterthwaite df per cutoff of sum_s weights[s] * column s: one column, or two with opposite weights."""
        w = np.asarray(weights, dtype=np.float64)
        used = np.flatnonzero(w)
        if used.size == 0:
            return np.full(self.sq.shape[0], np.nan)
        if used.size == 1:
            s = t = used[0]
        elif used.size == 2 and w[used[0]] == -w[used[1]]:
            s, t = used
        else:
            raise AuditInputError(f"cluster moments give the df of one column or a difference of two, not {w.tolist()}")
        return satterthwaite_from_sums(self.sq[:, s, t], self.fourth[:, s, t], self.nonzero[:, s, t])

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, clusters=np.array([self.clusters]), design_cross=self.design.part_cross,
                 design_moments=self.design.moments, **{name: getattr(self, name) for name in self.FIELDS})
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, pairs, data: bytes) -> ClusterMoments:
        with np.load(io.BytesIO(data)) as arrays:
            K, S, _ = arrays["cross"].shape
            out = cls(pairs, K, S, arrays["clusters_with"].shape[1])
            for name in cls.FIELDS:
                setattr(out, name, arrays[name])
            out.clusters = int(arrays["clusters"][0])
            out.design.part_cross, out.design.moments = arrays["design_cross"], arrays["design_moments"]
        return out
