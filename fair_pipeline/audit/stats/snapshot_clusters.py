"""Cluster sums in score order for clusters whose rows span the score range (queries: a query's candidates are
ranked by the very score audited): every cluster's sums copied at every checkpoint.

`prefix_clusters.PrefixClusterSums` keeps one set of running sums per cluster and copies a cluster's sums when its
first row after a checkpoint (a cutoff's threshold on a vector's negatives) arrives: cheap for items, whose rows
lie near one score, but a query's rows appear at nearly every checkpoint, so nearly every query would be copied
one by one at every checkpoint, after tracking which ones straddle it. Here, once the stream has passed a
checkpoint, the running sums of every cluster are copied at once (`checkpoint_copies`: only what that checkpoint
reads, fewer numbers below FPR 1 with ``diagonal``). Memory: the running sums, 2 G (G + 1) float64 per cluster,
plus per checkpoint at most as many (~0.7 KB per query with two groups and five cutoffs below FPR 1, ~0.5 KB with
``diagonal``); the final step reads them as `PrefixClusterSums` reads its copies. Same sums as `PrefixClusterSums`
(tests/audit/test_snapshot_clusters.py).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.prefix_clusters import PrefixClusterSums


def fits_snapshots(n_clusters: int, rows: float, n_groups: int, n_alphas: int) -> bool:
    """Do the copies of ``n_clusters`` clusters at every checkpoint (a cutoff of a vector) plus their running sums
    take no more memory than one copy of a cluster's running sums per row (the most `PrefixClusterSums` can keep)?"""
    return n_clusters * ((n_groups + 1) * n_alphas + 1) <= rows


class SnapshotClusterSums(PrefixClusterSums):
    """`PrefixClusterSums` (same constructor, ``update``, covariance and ``per_cluster``) copying every cluster at
    every checkpoint passed: no cluster's last checkpoint is tracked (``last`` stays -1, so the final step reads
    each cluster's copy at every checkpoint)."""

    def __init__(self, n_pos, n_neg, alphas, pairs, n_clusters: int, diagonal: bool = False):
        super().__init__(n_pos, n_neg, alphas, pairs, n_clusters, diagonal=diagonal)
        self.copied = 0  # checkpoints whose copies were taken

    def _fed(self) -> np.ndarray:
        # counts are never negative: a cluster took rows if any of its counts is positive
        return (self.run[:, :, 0] > 0).any(axis=1)

    def _running(self, c: np.ndarray) -> np.ndarray:
        # rows arrive: the running sums stood so at every checkpoint passed since the last rows
        codes = None
        while self.copied < self.passed:
            self.copied += 1
            codes = np.arange(self.C, dtype=np.int32) if codes is None else codes
            self.copies.take(codes, np.full(self.C, self.copied - 1, dtype=np.int32), self.copied, self.run,
                            straddling=False)
        return self.run
