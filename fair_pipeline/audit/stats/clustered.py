"""Cluster-robust (sandwich) covariances of the sweep's U-statistics: items and queries repeat in logs.

Lemma 3 is an influence-function variance that treats every row as independent. Written per row, the
influence of a negative on I(alpha) (one column: positives of vector i against negatives of vector j) is

    (phi - I - r (1 - alpha)) / n,   phi = ROC seen by the negative if its block lies inside [0, alpha],
                                       r = ROC(alpha) if outside, and for the block straddling alpha the
                                       mix f (y0 + dy f / 2) + (1 - f) r (f = share of the block inside)

and the influence of a positive is -(W - (alpha - I)) / m, W = int_0^alpha (1 - its own share of the ROC)
(the capped FPR it sees). Lemma 3 is the sum of their squares (with Bessel's correction per class).
When rows come in clusters (an item shown many times with one label and similar scores, a query whose
items are judged together), the rows of a cluster are dependent and the variance is, as for any
M-estimator, the sum over clusters of the squared per-cluster sums of the influence values, times
C / (C - 1) (Liang & Zeger; C clusters). Covariances between columns are the same cross-products, so
differences of columns sharing clusters (groups whose items share queries, xAUC(a, b) vs xAUC(b, a) with
click labels) get their covariance term. Two-way clustering (items and queries):
V = V_item + V_query - V_item-x-query (Cameron, Gelbach & Miller 2011).

Input rows are aggregates: (cluster, group, score, n_pos, n_neg), e.g. ``GROUP BY item_id, grp, score``;
one row per observation is the special case n_pos + n_neg = 1. Rows of one cluster may span batches only
if they are contiguous in the stream (the SQL path streams ``ORDER BY cluster``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fair_pipeline.audit.stats.blocks import ScoreGrid
from fair_pipeline.audit.stats.validation import AuditInputError

ESTIMANDS = {  # the one description of each variance, used by the audit asset's metadata and the report
    "conditional": "every impression treated as independent: for these exact items under new traffic, not for the "
    "population of items (narrower; Lemma 3)",
    "item_clustered": "item-clustered: for the population of items (new items drawn like these), since an item is "
    "shown many times with one label",
    "clustered": "cluster-robust: for new clusters drawn like these",
    "two_way": "clustered by item and by query: for new items and new queries",
    "query_clustered": "query-clustered: for these items in new queries (not for new items)",
}


@dataclass
class ClusterRows:
    """Rows for the cluster-robust pass: cluster key(s), group code, score, n_pos, n_neg (aggregates).

    ``keys``: one array (one-way clustering) or a tuple of two (two-way, e.g. items and queries).
    """

    keys: object
    group: np.ndarray
    scores: np.ndarray
    n_pos: np.ndarray
    n_neg: np.ndarray

    @property
    def two_way(self) -> bool:
        return isinstance(self.keys, tuple)


def cluster_keys(clusters, n_rows: int) -> list[np.ndarray]:
    """Dense 0..C-1 codes of each clustering dimension (one array, or a tuple of two for two-way clustering),
    checked: one id per row, none missing."""
    parts = clusters if isinstance(clusters, tuple) else (clusters,)
    if len(parts) not in (1, 2):
        raise AuditInputError(f"clusters= takes one array or a tuple of two, got {len(parts)}")
    keys = []
    for k, part in enumerate(parts):
        arr = np.asarray(part)
        if arr.ndim != 1 or arr.shape[0] != n_rows:
            raise AuditInputError(f"clusters[{k}] must be 1-dimensional of length {n_rows}, got shape {arr.shape}")
        if arr.dtype == object and any(v is None or (isinstance(v, float) and v != v) for v in arr):
            raise AuditInputError(f"clusters[{k}] has missing values (None/NaN)")
        if arr.dtype.kind == "f" and np.isnan(arr).any():
            raise AuditInputError(f"clusters[{k}] has {int(np.isnan(arr).sum())} NaN values")
        keys.append(np.unique(arr, return_inverse=True)[1].ravel())
    return keys


def row_clusters(clusters, s: np.ndarray, y: np.ndarray, codes: np.ndarray) -> ClusterRows | None:
    """Validated per-row cluster ids (one array, or a tuple of two for two-way clustering)."""
    if clusters is None:
        return None
    keys = cluster_keys(clusters, s.size)
    yf = y.astype(np.float64)
    return ClusterRows(tuple(keys) if len(keys) == 2 else keys[0], codes, s, yf, 1.0 - yf)


def estimand_name(clusters) -> str:
    if clusters is None:
        return "conditional"
    return "two_way" if isinstance(clusters, tuple) else "clustered"



class BlockTable:
    """Cumulative counts per vector (groups, then all pooled; rows) and distinct-score block (descending;
    columns)."""

    def __init__(self, grid: ScoreGrid):
        # vector-major (G + 1, B): cumulative sums and per-vector gathers run over contiguous memory; the
        # block counts themselves stay in the grid (only the rows of boundary blocks need them)
        B, G = grid.pos.shape
        self.grid = grid
        self.ascending = grid.scores[::-1].copy()
        self.n_groups = G
        self.p_incl, self.n_incl = np.empty((G + 1, B)), np.empty((G + 1, B))
        # ROC seen by a negative of the block, FPR seen by a positive of the block (half credit within it)
        self.mid_roc, self.mid_fpr = np.empty((G + 1, B)), np.empty((G + 1, B))
        for counts, incl, mid in ((grid.pos, self.p_incl, self.mid_roc), (grid.neg, self.n_incl, self.mid_fpr)):
            for v in range(G + 1):  # row by row: numpy's 2-d cumsum along the last axis is ~10x slower
                block = counts[:, v] if v < G else counts.sum(axis=1)
                np.cumsum(block, out=incl[v])
                np.multiply(block, -0.5, out=mid[v])
                mid[v] += incl[v]
                mid[v] /= max(incl[v, -1], 1.0)
        self.m = np.maximum(self.p_incl[:, -1], 1.0)
        self.n = np.maximum(self.n_incl[:, -1], 1.0)

    def counts(self, v: int, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positives and negatives of vector v in the given blocks."""
        if v < self.n_groups:
            return self.grid.pos[blocks, v], self.grid.neg[blocks, v]
        return self.grid.pos[blocks].sum(axis=1), self.grid.neg[blocks].sum(axis=1)

    def boundary(self, j: int, x: np.ndarray) -> np.ndarray:
        """Per threshold in ``x``: the first block whose cumulative negatives of vector j exceed it."""
        return np.searchsorted(self.n_incl[j], x, side="right")

    def rows(self, scores) -> "TableRows":
        """The blocks of rows with these scores (a batch of the cluster pass)."""
        return TableRows(self, self.block_of(scores))

    def block_of(self, scores: np.ndarray) -> np.ndarray:
        """Block index (0 = highest score) of each score; every score must be one of the grid's."""
        s = np.asarray(scores, dtype=np.float64) + 0.0
        # sorted needles make the binary searches walk the table in order (cache-friendly): ~5x faster
        order = np.argsort(s, kind="stable")
        idx = np.empty(s.size, dtype=np.intp)
        idx[order] = np.searchsorted(self.ascending, s[order])
        bad = (idx >= self.ascending.size) | (self.ascending[np.minimum(idx, self.ascending.size - 1)] != s)
        if bad.any():
            raise AuditInputError(f"{int(bad.sum())} clustered rows have scores absent from the score counts "
                                  f"(e.g. {s[bad][:3].tolist()}): both passes must read the same rows")
        return self.ascending.size - 1 - idx


class TableRows:
    """The blocks of a batch of rows, looked up in an in-memory `BlockTable`."""

    def __init__(self, table: BlockTable, blocks: np.ndarray):
        self.table, self.blocks = table, blocks

    def take(self, idx: np.ndarray) -> "TableRows":
        return TableRows(self.table, self.blocks[idx])

    def mid_roc(self, v: int) -> np.ndarray:
        return self.table.mid_roc[v, self.blocks]

    def mid_fpr(self, v: int) -> np.ndarray:
        return self.table.mid_fpr[v, self.blocks]

    def incl(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        """Positives and negatives of vector v in the rows' blocks and every block above them."""
        return self.table.p_incl[v, self.blocks], self.table.n_incl[v, self.blocks]

    def counts(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        return self.table.counts(v, self.blocks)


class CountRows:
    """The blocks of a batch of rows, carried by the rows themselves (e.g. joined to them in SQL): each row's
    block index and, per group (G, rows), its block's positives and negatives and the cumulative ones through
    that block in descending score order. The pooled vector G is their sum; `m` / `n` are the (G + 1) class
    totals, floored at 1 as in `BlockTable`. Every value is the one `BlockTable` holds (integer counts are exact
    in float64 and the ratios are formed by the same operations), so both give the same influence values."""

    def __init__(self, blocks, pos, neg, pos_incl, neg_incl, m, n):
        self.blocks = np.asarray(blocks, dtype=np.intp)
        self.m, self.n = m, n
        self._pos, self._neg = self._pooled(pos), self._pooled(neg)
        self._pos_incl, self._neg_incl = self._pooled(pos_incl), self._pooled(neg_incl)

    @staticmethod
    def _pooled(per_group) -> np.ndarray:
        per_group = np.asarray(per_group, dtype=np.float64)
        return np.vstack([per_group, per_group.sum(axis=0, keepdims=True)])

    def take(self, idx: np.ndarray) -> "CountRows":
        out = CountRows.__new__(CountRows)
        out.blocks, out.m, out.n = self.blocks[idx], self.m, self.n
        out._pos, out._neg, out._pos_incl, out._neg_incl = (a[:, idx] for a in
                                                           (self._pos, self._neg, self._pos_incl, self._neg_incl))
        return out

    def mid_roc(self, v: int) -> np.ndarray:
        return (self._pos[v] * -0.5 + self._pos_incl[v]) / self.m[v]

    def mid_fpr(self, v: int) -> np.ndarray:
        return (self._neg[v] * -0.5 + self._neg_incl[v]) / self.n[v]

    def incl(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        return self._pos_incl[v], self._neg_incl[v]

    def counts(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        return self._pos[v], self._neg[v]


@dataclass
class BlockTotals:
    """What the cluster pass needs of the score grid besides each row's own block (`CountRows`): the class
    totals per vector (groups, then pooled; floored at 1) and the boundary blocks of every cutoff, so the grid
    itself need not be held. Built by `BoundaryTracker` from the blocks streamed through the sweep."""

    n_groups: int
    m: np.ndarray
    n: np.ndarray
    thresholds: np.ndarray  # (G + 1, K): alphas * n
    boundaries: np.ndarray  # (G + 1, K): blocks whose cumulative negatives are <= the threshold

    def boundary(self, j: int, x: np.ndarray) -> np.ndarray:
        if not np.array_equal(x, self.thresholds[j]):
            raise ValueError("the cluster pass asked for other cutoffs than the tracked ones")
        return self.boundaries[j]

    def rows(self, rows: CountRows) -> CountRows:
        if not isinstance(rows, CountRows):
            raise TypeError("streamed cluster batches carry their blocks' counts (CountRows), not scores")
        return rows


class BoundaryTracker:
    """Fed the negatives of the blocks in descending score order (groups x blocks, in chunks), counts for each
    vector and cutoff the blocks whose cumulative negatives are <= alpha * n: `BlockTable.boundary` without the
    table (cumulative sums of integer counts are exact, so the counts are the same)."""

    def __init__(self, n_pos, n_neg, alphas):
        m = np.r_[n_pos, np.sum(n_pos)].astype(np.float64)
        n = np.r_[n_neg, np.sum(n_neg)].astype(np.float64)
        self.n_groups = len(n_pos)
        self.m, self.n = np.maximum(m, 1.0), np.maximum(n, 1.0)
        self.thresholds = np.asarray(alphas, dtype=np.float64)[None, :] * self.n[:, None]
        self.counts = np.zeros(self.thresholds.shape, dtype=np.intp)
        self.running = np.zeros(self.n_groups + 1)

    def update(self, neg: np.ndarray) -> None:
        neg = np.asarray(neg, dtype=np.float64)
        for v in range(self.n_groups + 1):
            cum = np.cumsum(neg[v] if v < self.n_groups else neg.sum(axis=0))
            cum += self.running[v]
            self.counts[v] += np.searchsorted(cum, self.thresholds[v], side="right")
            if cum.size:
                self.running[v] = cum[-1]

    def totals(self) -> BlockTotals:
        return BlockTotals(self.n_groups, self.m, self.n, self.thresholds, self.counts.copy())


def row_influence(table, i: int, j: int, alpha: float, auc: float, roc: float,
                  rows, group: np.ndarray, n_pos: np.ndarray, n_neg: np.ndarray, parts: bool = False):
    """Each row's summed influence on column (positives of vector i, negatives of vector j) at cutoff alpha.

    ``auc`` = I(alpha) and ``roc`` = ROC(alpha) of that column (from the sweep); ``rows``: the rows' blocks
    (`TableRows` or `CountRows`); ``parts``: return the negatives' and the positives' parts separately.
    """
    G = table.n_groups
    m, n = table.m[i], table.n[j]
    x = alpha * n
    hi = rows.incl(j)[1]
    lo = hi - rows.counts(j)[1]
    p_block = rows.counts(i)[0]
    y0 = (rows.incl(i)[0] - p_block) / m
    dy = p_block / m
    inside = hi <= x
    outside = lo >= x
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(inside | outside, 0.0, (x - lo) / (hi - lo))
    phi = np.where(inside, y0 + 0.5 * dy, np.where(outside, roc, f * (y0 + 0.5 * dy * f) + (1 - f) * roc))
    t0 = lo / n
    w = np.where(inside, 0.5 * (lo + hi) / n, np.where(outside, alpha, t0 + (alpha - t0) * (1 - 0.5 * f)))
    in_j = np.ones(group.size, dtype=bool) if j == G else group == j
    in_i = np.ones(group.size, dtype=bool) if i == G else group == i
    neg_part = np.where(in_j, n_neg * (phi - auc - roc * (1 - alpha)) / n, 0.0)
    pos_part = np.where(in_i, -n_pos * (w - (alpha - auc)) / m, 0.0)
    return (neg_part, pos_part) if parts else neg_part + pos_part


def two_way_keys(first, second) -> np.ndarray:
    """Codes of the intersection clusters (first, second) for two-way clustering."""
    a = np.unique(np.asarray(first), return_inverse=True)[1].ravel().astype(np.int64)
    b = np.unique(np.asarray(second), return_inverse=True)[1].ravel().astype(np.int64)
    return a * (int(b.max()) + 1) + b


class ClassTotals:
    """What `row_influence` needs of the table: groups, class totals per vector (floored at 1)."""

    def __init__(self, n_groups, m, n):
        self.n_groups, self.m, self.n = n_groups, m, n


class PrefixRows:
    """A batch of rows seen through their blocks' prefix counts (the `CountRows` interface of
    `row_influence`): ``pos``/``neg`` the block's counts, ``pos_incl``/``neg_incl`` those through it, all
    (G + 1, rows) with the pooled vector last."""

    def __init__(self, pos, neg, pos_incl, neg_incl):
        self._pos, self._neg, self._pos_incl, self._neg_incl = pos, neg, pos_incl, neg_incl

    def take(self, idx):
        return PrefixRows(*(a[:, idx] for a in (self._pos, self._neg, self._pos_incl, self._neg_incl)))

    def incl(self, v):
        return self._pos_incl[v], self._neg_incl[v]

    def counts(self, v):
        return self._pos[v], self._neg[v]
