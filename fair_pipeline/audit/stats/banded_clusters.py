"""Cluster sums in score order for clusters whose rows span the score range (queries: a query's candidates are
ranked by the very score audited), kept per band between checkpoints instead of as running sums.

`prefix_clusters.PrefixClusterSums` keeps one set of running sums per cluster and copies a cluster's sums when
the stream passes a checkpoint (a cutoff's threshold on a vector's negatives) between two of its rows: cheap for
items, whose rows lie near one score, but a query's rows appear at nearly every checkpoint, so nearly every query
is copied at every checkpoint, and the copies are then sorted by cluster and matched to cutoffs one by one.
Here the rows fed while the stream is between checkpoints e and e + 1 go into band e's sums (G + 2 quantities per
group and class, as the running sums), allocated when the band takes its first row; the sums inside a cutoff
are the cumulative sums of the bands before its checkpoint. Memory: at most (checkpoints + 1) x 2 G (G + 2)
float64 per cluster (~1.5 KB with two groups and five cutoffs), the size the copies reach when every cluster
straddles every checkpoint; nothing is sorted. Same sums as `PrefixClusterSums` (tests/audit/test_banded_clusters.py).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.prefix_clusters import PrefixClusterSums, vector_sums


def fits_bands(n_clusters: int, rows: float, n_groups: int, n_alphas: int) -> bool:
    """Do per-band sums of ``n_clusters`` clusters take no more memory than one copy of a cluster's running sums
    per row (the most `PrefixClusterSums` can keep)? At most one band per checkpoint (a cutoff of a vector) + 1."""
    return n_clusters * ((n_groups + 1) * n_alphas + 1) <= rows


class BandedClusterSums(PrefixClusterSums):
    """`PrefixClusterSums` (same constructor, ``update``, covariance and ``per_cluster``) with per-band sums."""

    def __init__(self, n_pos, n_neg, alphas, pairs, n_clusters: int, diagonal: bool = False):
        super().__init__(n_pos, n_neg, alphas, pairs, n_clusters, diagonal=diagonal)
        self.run = self.last = None  # no running sums or copies: the bands below
        self.bands: dict[int, np.ndarray] = {}  # checkpoints passed -> (C, G + 2, 2 G) sums of the rows fed then

    def shrink(self, n_clusters: int) -> None:
        if n_clusters > self.C:
            raise RuntimeError(f"cannot shrink {self.C} cluster codes to {n_clusters}")
        self.C = int(n_clusters)
        self.bands = {e: band[:n_clusters] for e, band in self.bands.items()}
        self._mark = None

    def _running(self, c: np.ndarray) -> np.ndarray:
        band = self.bands.get(self.passed)
        if band is None:
            band = self.bands[self.passed] = np.zeros((self.C, self.G + 2, 2 * self.G))
        return band

    def _total(self, lo: int, hi: int) -> np.ndarray:
        total = np.zeros((self.G + 2, 2 * self.G, hi - lo))
        for band in self.bands.values():
            total += np.moveaxis(band[lo:hi], 0, -1)
        return total

    def _chunk(self, lo: int, hi: int):
        G, w = self.G, hi - lo
        passed = np.array(sorted(self.bands), dtype=np.int64)
        # (bands + 1, G + 2, 2 G, w): row b + 1 holds the sums of the bands before passed[b + 1]; row 0 none
        cum = np.zeros((passed.size + 1, G + 2, 2 * G, w))
        for b, e in enumerate(passed):
            np.add(cum[b], np.moveaxis(self.bands[int(e)][lo:hi], 0, -1), out=cum[b + 1])
        nc_edges, edges = self._edge_lists(lo, hi)

        def owners():
            for j in range(G + 1):
                # inside cutoff k: the rows fed before its checkpoint (every row when the stream never passed it)
                before = np.searchsorted(passed, self.checkpoint[j], side="left")
                neg, pos = vector_sums(np.moveaxis(cum[before], 0, 2), j, G)  # (G + 2, K, w), (2, G, K, w)
                neg, pos = np.ascontiguousarray(neg.transpose(1, 0, 2)), np.ascontiguousarray(pos.transpose(2, 0, 1, 3))
                for codes_e, nc in nc_edges:  # straddling rows: their ROC coefficient at each cutoff
                    neg[:, 0, codes_e] += nc[j]
                yield j, neg, pos

        N, P = self._counts(lo, hi)
        return N, P, edges, owners()
