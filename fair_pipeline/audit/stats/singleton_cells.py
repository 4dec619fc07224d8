"""Two-way clustering's intersection stream when most (item, query) cells hold a single impression.

Two-way clustering subtracts the covariance of the intersection clusters, and in a click log nearly every (item,
query) cell is shown once: keeping `prefix_clusters`' ~10^2 banded sums per cell would cost ~1 KB per impression.
A cell of one impression is its own cluster total, so its influence value is one row's, and the cross products
sum_c U_c U_c' over such cells are sums over rows. A row's influence on column (i, j) at cutoff k is linear in the
sweep's I and ROC at that cutoff (known only at the end) with coefficients that depend on the row only through
its place on the ROC curves (the half-credit ROC of each vector it sees as a negative, the FPR of each vector it
sees as a positive) and its "band" per vector (the first cutoff whose threshold its block does not pass; inside
cutoff k iff band <= k):

    negative of group g, j in {g, pooled}:  U[k, (i, j)] = (e_jk (roc_i - R) + alpha_k R - I) / n_j
    positive of group g, i in {g, pooled}:  U[k, (i, j)] = (e_jk (alpha_k - fpr_j) - I) / m_i

(e_jk = [band_j <= k], R = ROC_(i,j)(alpha_k), I = I_(i,j)(alpha_k)). Products of two columns' values therefore
need, per group and pair of band values, only sums of 1, the curves and their pairwise products: a few hundred
numbers in all, whatever the rows. CR2 scales a one-impression cluster's part by the same factor for every such
cluster (its share of vector v's class total is 1 / n_v). Rows of blocks straddling a cutoff (few) keep their
exact coefficients (`clustered.row_influence`) and are added at the end. `IntersectionSums` feeds cells of more
than one row to `PrefixClusterSums` and single-impression cells (code -1) here; the two covariances add up to
the one pass's over all cells (tests/audit/test_singleton_cells.py).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.cluster_parts import LastCutoffColumns, last_cutoff_sums
from fair_pipeline.audit.stats.cluster_pass import ClusterCrossSums
from fair_pipeline.audit.stats.clustered import ClassTotals, PrefixRows, row_influence
from fair_pipeline.audit.stats.prefix_clusters import PrefixClusterSums, cutoff_blocks
from fair_pipeline.audit.stats.small_sample import leverage_factor
from fair_pipeline.audit.stats.validation import AuditInputError

SINGLE = -1  # the cluster code of a cell holding one impression


class CellCodes:
    """The (item, query) cells holding more than one impression, by their item and query codes (or integer ids,
    less ``lo``; ``n_second``: the query codes' range): a row's cell code, or `SINGLE` for a cell missing here,
    looked up among the sorted keys (item code x queries + query code). Few items hold such a cell, so a table
    of flags by item code picks the rows worth looking up (a gather per row instead of a binary search)."""

    def __init__(self, first, second, codes, n_second: int, lo=(0, 0)):
        self.n_second, self.lo = max(int(n_second), 1), (int(lo[0]), int(lo[1]))
        first = np.asarray(first, dtype=np.int64) - self.lo[0]
        keys = first * self.n_second + (np.asarray(second, dtype=np.int64) - self.lo[1])
        self.size = keys.size
        order = np.argsort(keys, kind="stable")
        self.keys, self.codes = keys[order], np.asarray(codes, dtype=np.int64)[order]
        if self.keys.size > 1 and np.any(self.keys[1:] == self.keys[:-1]):
            raise ValueError("each cell must be listed once")
        # items are numbered from 0 (codes, or ids less lo): the flags span the highest item holding a listed cell
        self.has_cell = np.zeros(int(first.max()) + 1 if first.size else 0, dtype=bool)
        self.has_cell[first] = True

    def lookup(self, first, second) -> np.ndarray:
        """The cell code of each row (item code ``first``, query code ``second``)."""
        first = np.asarray(first, dtype=np.int64) - self.lo[0]
        out = np.full(first.size, SINGLE, dtype=np.int64)
        if not self.keys.size:
            return out
        flagged = self.has_cell[np.clip(first, 0, self.has_cell.size - 1)]
        flagged &= (first >= 0) & (first < self.has_cell.size)
        rows = np.flatnonzero(flagged)
        keys = first[rows] * self.n_second + (np.asarray(second, dtype=np.int64)[rows] - self.lo[1])
        at = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        out[rows] = np.where(self.keys[at] == keys, self.codes[at], SINGLE)
        return out


class SingletonMoments:
    """Cross products over one-impression clusters of every column's influence values, fed in score order (the
    `PrefixClusterSums.update` interface, every row of count 1)."""

    def __init__(self, n_pos, n_neg, alphas, pairs):
        G = len(n_pos)
        self.G = G
        self.m = np.maximum(np.r_[n_pos, np.sum(n_pos)].astype(np.float64), 1.0)
        self.n = np.maximum(np.r_[n_neg, np.sum(n_neg)].astype(np.float64), 1.0)
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.pairs = [(int(i), int(j)) for i, j in pairs]
        K, V = self.alphas.size, G + 1
        self.x = self.alphas[None, :] * self.n[:, None]
        self.bins = (K + 1) ** 2  # (band of one vector, band of another)
        # negatives of group g by (band of g, band pooled): sums of ROC_v ROC_w, ROC_v, 1
        self.neg_rr = np.zeros((G, self.bins, V, V))
        self.neg_r = np.zeros((G, self.bins, V))
        self.neg_1 = np.zeros((G, self.bins))
        # positives of group g by (band of j, band of j'), per (j, j'): sums of 1, FPR_j, FPR_j', FPR_j FPR_j'
        self.pos = np.zeros((G, V, V, self.bins, 4))
        self.edge = []  # per straddling row: (neg part at I = ROC = 0, pos part, ROC coefficient, I coefficients)
        self.rows = 0
        self.running = np.zeros((2, V))

    def update(self, pos, neg, row_block, group, n_pos, n_neg, curves, skip=None) -> None:
        """Next blocks (per group counts (G, B)) and the sweep's curves of them; rows: block, group code,
        positives and negatives (one of them 1, the other 0). ``skip``: a mask of rows to leave out (fed elsewhere;
        a mask, not a copy of the others)."""
        G, K = self.G, self.alphas.size
        b = np.asarray(row_block, dtype=np.intp)
        group = np.asarray(group, dtype=np.intp)
        n_pos, n_neg = np.asarray(n_pos, dtype=np.float64), np.asarray(n_neg, dtype=np.float64)
        skip = np.zeros(b.size, dtype=bool) if skip is None else np.asarray(skip, dtype=bool)
        if b.size and not np.all((n_pos + n_neg == 1) | skip):
            raise AuditInputError("a one-impression cell must hold exactly one positive or one negative")
        p_incl, n_incl, roc_of, fpr_of = curves
        pooled_neg = neg.sum(axis=0)
        at, edge_blocks = cutoff_blocks(n_incl, neg, pooled_neg, self.x)
        self.rows += b.size - int(np.count_nonzero(skip))
        edge = (np.isin(b, edge_blocks) & ~skip) if edge_blocks.size else np.zeros(b.size, dtype=bool)
        cuts, cut_band = self._segments(b, at)
        kept = ~(edge | skip)
        for g in range(G):
            mine = (group == g) & kept
            rows = np.flatnonzero(mine & (n_neg > 0))
            if rows.size:
                starts, band = self._runs(rows, cuts, cut_band)
                self._add_negatives(g, starts, band[g] * (K + 1) + band[G], roc_of[:, b[rows]])
            rows = np.flatnonzero(mine & (n_pos > 0))
            if rows.size:
                self._add_positives(g, *self._runs(rows, cuts, cut_band), fpr_of[:, b[rows]])
        if edge.any():
            self._edge_rows(np.flatnonzero(edge), b, pos, neg, pooled_neg, p_incl, n_incl, group, n_pos, n_neg)

    @staticmethod
    def _segments(b: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of blocks ``b`` (ascending: score order) cut where any vector's band grows (its first row in or past
        the block of a threshold ``at`` (V, K)): the first row of each segment and every vector's band there
        (V, segments), found by a few searches of the thresholds among the rows, none per row."""
        if b.size > 1 and np.any(b[1:] < b[:-1]):
            raise ValueError("one-impression rows must come in score order")
        grows = [np.searchsorted(b, at[v], side="left") for v in range(at.shape[0])]  # band v counts those <= row
        cuts = np.unique(np.r_[0, np.concatenate(grows)])
        cuts = cuts[cuts < b.size]
        return cuts, np.stack([np.searchsorted(g, cuts, side="right") for g in grows])

    @staticmethod
    def _runs(rows: np.ndarray, cuts: np.ndarray, cut_band: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The runs of ``rows`` (ascending) lying in one segment: where each starts in ``rows``, its bands (V, runs)."""
        starts = np.searchsorted(rows, cuts, side="left")
        held = np.r_[starts[1:], rows.size] > starts
        return starts[held], cut_band[:, held]

    @staticmethod
    def _run_moments(curve: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per run of rows (from each of ``starts`` to the next) of ``curve`` (V, rows): its rows, the sums of each
        vector's curve (runs, V) and of the products of every two (runs, V, V), one small matrix product per run
        (runs are few: the bands only grow down the stream)."""
        ends = np.r_[starts[1:], curve.shape[1]]
        sums = np.add.reduceat(curve, starts, axis=1).T
        cross = np.stack([curve[:, lo:hi] @ curve[:, lo:hi].T for lo, hi in zip(starts.tolist(), ends.tolist())])
        return (ends - starts).astype(np.float64), sums, cross

    def _add_negatives(self, g, starts, key, roc) -> None:
        """Negatives of group g (score order), binned by (band of g, band pooled): both bands grow down the stream,
        so runs of rows (from ``starts``, bin ``key`` each) share a bin and each run's sums are taken at once (a bin
        may hold several runs)."""
        ones, sums, cross = self._run_moments(roc, starts)
        np.add.at(self.neg_1[g], key, ones)
        np.add.at(self.neg_r[g], key, sums)
        np.add.at(self.neg_rr[g], key, cross)

    def _add_positives(self, g, starts, run_band, fpr) -> None:
        """Positives of group g (score order) in runs sharing every vector's band (from ``starts``, bands
        ``run_band`` (V, runs)): each run is summed once, then each (j, j') bin adds its few runs."""
        V, K1 = self.G + 1, self.alphas.size + 1
        ones, sums, cross = self._run_moments(fpr, starts)
        for j in range(V):
            for jj in range(V):
                np.add.at(self.pos[g, j, jj], run_band[j] * K1 + run_band[jj],
                          np.stack([ones, sums[:, j], sums[:, jj], cross[:, j, jj]], axis=1))

    def _edge_rows(self, rows, b, pos, neg, pooled_neg, p_incl, n_incl, group, n_pos, n_neg) -> None:
        """Rows of blocks straddling a cutoff: their exact influence, as coefficients of I and ROC."""
        K, S = self.alphas.size, len(self.pairs)
        blocks = b[rows]
        counts = [np.vstack([a[:, blocks], a[:, blocks].sum(axis=0)]) for a in (pos, neg)]
        view = PrefixRows(counts[0], counts[1], p_incl[:, blocks], n_incl[:, blocks])
        table = ClassTotals(self.G, self.m, self.n)
        ge, pe, ne = group[rows], n_pos[rows], n_neg[rows]
        parts = np.empty((4, S, K, rows.size))  # neg part, pos part at I = ROC = 0; ROC coefficient; I coefficient
        with np.errstate(divide="ignore", invalid="ignore"):
            for s, (i, j) in enumerate(self.pairs):
                in_i = np.ones(ge.size, dtype=bool) if i == self.G else ge == i
                in_j = np.ones(ge.size, dtype=bool) if j == self.G else ge == j
                for k, alpha in enumerate(self.alphas):
                    parts[0, s, k], parts[1, s, k] = row_influence(table, i, j, alpha, 0.0, 0.0, view, ge, pe, ne,
                                                                   parts=True)
                    parts[2, s, k] = row_influence(table, i, j, alpha, 0.0, 1.0, view, ge, pe, ne,
                                                   parts=True)[0] - parts[0, s, k]
                parts[3, s] = -(ne * in_j / self.n[j])[None, :]  # the negatives' share; positives' below
        pos_share = np.stack([pe * (ge == v if v < self.G else True) for v in range(self.G + 1)])  # (V, rows)
        self.edge.append((parts, pos_share))

    def cross_sums(self, auc, roc) -> tuple[np.ndarray, np.ndarray]:
        """(K, S, S) sums over the one-impression clusters of U U' (CR1) and of the CR2-scaled U~ U~'."""
        G, K, S = self.G, self.alphas.size, len(self.pairs)
        auc, roc = np.asarray(auc, dtype=np.float64), np.asarray(roc, dtype=np.float64)
        f_neg, f_pos = leverage_factor(1.0 / self.n), leverage_factor(1.0 / self.m)  # one impression's share
        first, second = np.divmod(np.arange(self.bins), K + 1)  # each bin's two band values
        cross, cross_cr2 = np.zeros((K, S, S)), np.zeros((K, S, S))
        for k, alpha in enumerate(self.alphas):
            e = [(first <= k).astype(np.float64), (second <= k).astype(np.float64)]
            R, A = roc[:, k], auc[:, k]
            d = alpha * R - A
            for g in range(G):
                self._neg_cross(cross, cross_cr2, k, g, e, R, d, f_neg)
                self._pos_cross(cross, cross_cr2, k, g, e, alpha, A, f_pos)
        for parts, pos_share in self.edge:
            neg_part = parts[0] + roc[:, :, None] * parts[2] + auc[:, :, None] * parts[3]
            pos_part = parts[1] - auc[:, :, None] * np.stack([pos_share[i] / self.m[i] for i, _ in self.pairs])[:, None]
            h_neg = -parts[3]  # the row's share of the column's negatives
            h_pos = np.stack([pos_share[i] / self.m[i] for i, _ in self.pairs])[:, None]
            u = neg_part + pos_part
            adj = np.where(neg_part == 0, 0.0, neg_part * leverage_factor(h_neg)) + \
                np.where(pos_part == 0, 0.0, pos_part * leverage_factor(h_pos))
            cross += np.einsum("skr,tkr->kst", u, u)
            cross_cr2 += np.einsum("skr,tkr->kst", adj, adj)
        return cross, cross_cr2

    def _neg_cross(self, cross, cross_cr2, k, g, e, R, d, f_neg) -> None:
        """Negatives of group g: columns whose negative vector is g (band slot 0) or pooled (slot 1)."""
        G = self.G
        cols = [(s, i, 0 if j == g else 1, j) for s, (i, j) in enumerate(self.pairs) if j in (g, G)]
        if not cols:
            return
        rr, r1, one = self.neg_rr[g], self.neg_r[g], self.neg_1[g]
        L = [e[a] @ r1 for a in (0, 1)]  # sum of ROC_i over rows inside, by the band of slot a
        E = [e[a] @ one for a in (0, 1)]
        Z = one.sum()
        for s, i, a, j in cols:
            for t, ii, bb, jj in cols:
                ee = e[a] * e[bb]
                val = (ee @ rr[:, i, ii] - R[t] * (ee @ r1[:, i]) - R[s] * (ee @ r1[:, ii]) + R[s] * R[t] * (ee @ one)
                       + d[t] * L[a][i] - R[s] * d[t] * E[a] + d[s] * L[bb][ii] - d[s] * R[t] * E[bb] + d[s] * d[t] * Z)
                val /= self.n[j] * self.n[jj]
                cross[k, s, t] += val
                cross_cr2[k, s, t] += val * f_neg[j] * f_neg[jj]

    def _pos_cross(self, cross, cross_cr2, k, g, e, alpha, A, f_pos) -> None:
        """Positives of group g: columns whose positive vector is g or pooled; any negative vector."""
        G = self.G
        cols = [(s, i, j) for s, (i, j) in enumerate(self.pairs) if i in (g, G)]
        for s, i, j in cols:
            for t, ii, jj in cols:
                sums = self.pos[g, j, jj]  # bins by (band of j, band of jj)
                ee = e[0] * e[1]
                q_ee, q_f, q_ff, q_f2 = (ee @ sums[:, c] for c in (0, 1, 3, 2))
                m_e, m_f = e[0] @ sums[:, 0], e[0] @ sums[:, 1]  # inside cutoff k for j: 1, FPR_j
                m_e2, m_f2 = e[1] @ sums[:, 0], e[1] @ sums[:, 2]  # for jj: 1, FPR_jj
                val = (alpha * alpha * q_ee - alpha * (q_f + q_f2) + q_ff - A[t] * (alpha * m_e - m_f)
                       - A[s] * (alpha * m_e2 - m_f2) + A[s] * A[t] * sums[:, 0].sum())
                val /= self.m[i] * self.m[ii]
                cross[k, s, t] += val
                cross_cr2[k, s, t] += val * f_pos[i] * f_pos[ii]


class IntersectionSums:
    """Two-way clustering's intersection stream: cells of several rows (codes 0..C-1) into `PrefixClusterSums`,
    one-impression cells (code `SINGLE`) into `SingletonMoments`; `covariance` as `PrefixClusterSums`'s."""

    def __init__(self, n_pos, n_neg, alphas, pairs, n_clusters: int, diagonal: bool = False):
        self.several = PrefixClusterSums(n_pos, n_neg, alphas, pairs, n_clusters, diagonal=diagonal)
        self.single = SingletonMoments(n_pos, n_neg, alphas, pairs)

    def update(self, pos, neg, row_block, group, n_pos, n_neg, codes, curves) -> None:
        codes = np.asarray(codes)
        several = codes != SINGLE  # few rows: taken apart; the others are fed in place
        rest = np.flatnonzero(several)
        args = (np.asarray(row_block), np.asarray(group), np.asarray(n_pos), np.asarray(n_neg))
        self.several.update(pos, neg, *(a[rest] for a in args), codes[rest], curves)
        self.single.update(pos, neg, *args, curves, skip=several)

    def covariance(self, auc, roc, keep_totals: bool = False, every=None):
        """`ClusterCrossSums` of both kinds of cells (``every``: as `PrefixClusterSums.covariance`'s, then a
        `cluster_parts.LastCutoffColumns`)."""
        if keep_totals:
            raise ValueError("the intersection stream keeps no totals")
        several = self.several
        K, S, V = several.alphas.size, len(several.pairs), several.G + 1
        cross, cross_cr2 = self.single.cross_sums(auc, roc)
        if every is not None and K > 1:
            first, last = last_cutoff_sums(several.pairs, K, V, every, keep_totals=False)
            several.add_to((first, last), auc, roc, first.every)
            pick = np.ix_(first.every, first.every)
            for out, (a, b) in ((first, (cross[:-1], cross_cr2[:-1])), (last, (cross[-1:], cross_cr2[-1:]))):
                out.cross += a if out is last else a[:, pick[0], pick[1]]
                out.cross_cr2 += b if out is last else b[:, pick[0], pick[1]]
            out = LastCutoffColumns(first, last)
            out.add_clusters(self.single.rows)
        else:
            out = ClusterCrossSums(several.pairs, K, S, V, design=False)
            several.add_to(out, auc, roc)
            out.cross += cross
            out.cross_cr2 += cross_cr2
            out.clusters += self.single.rows
        if out.clusters < 2:
            raise AuditInputError(f"a cluster-robust variance needs at least 2 clusters, got {out.clusters}")
        return out
