"""Cluster-robust variances from the one pass in descending score order (no second sort by cluster).

`clustered` derives each row's influence on column (positives of vector i, negatives of vector j) at a
cutoff alpha from its block's place on the ROC curves: the cumulative positives and negatives through its
block (the prefix sums of the sorted stream) and the boundary block of each cutoff. In descending score
order those prefix sums are running totals, so every row's influence can be placed while the rows stream
by, with only the per-cluster sums kept (rows are keyed by dense cluster codes). The influence depends on
the sweep's I(alpha) and ROC(alpha), which are known only at the end, but linearly:

    U_c[k, (i, j)] = A_c[k, s] + alpha_k PC_c[k, i, j] / m_i + ROC_s(alpha_k) B_c[k, j]
                     - I_s(alpha_k) (N_c[j] / n_j + P_c[i] / m_i),   B_c[k, j] = (alpha_k N_c[j] - NC_c[k, j]) / n_j

where, summed over the cluster's rows inside cutoff k (their block lies within alpha_k n_j negatives of j):
A = negatives of j x (ROC of i seen at their block) / n_j - positives of i x (FPR of j at their block) / m_i,
PC = positives of i, NC = negatives of j; N and P are the cluster's negatives of j and positives of i. A row
is inside cutoff k for every k >= its "band" (the first cutoff whose threshold its block does not pass), so
each row adds to one band slot and cumulative sums over bands give every cutoff. Rows of a block straddling
a cutoff (few) take `row_influence` exactly, split into its parts free of and proportional to ROC(alpha),
and enter only their own cutoffs (a difference across adjacent band slots). These are the values
`ClusterAccumulator` sums after sorting by cluster, in another order (tests/audit/test_prefix_clusters.py).

Memory: per cluster code, ((G + 1)^2 + (G + 1) + 2 G (G + 1)) K + 2 G float64 sums (124 with two groups and
five cutoffs), i.e. catalogue sized (items or queries), not day sized.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

from fair_pipeline.audit.stats.cluster_pass import ClusterCrossSums, ClusterTotals
from fair_pipeline.audit.stats.clustered import row_influence
from fair_pipeline.audit.stats.sweep import block_curves
from fair_pipeline.audit.stats.validation import AuditInputError

CROSS_CHUNK = 1 << 15  # clusters per step of the final cross products
DENSE_RUN_SHARE = 0.25  # a band's rows at least this share of the codes they span: summed per code first (bincount)


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


def cutoff_blocks(n_incl, neg, pooled_neg, x) -> tuple[np.ndarray, np.ndarray]:
    """Per vector and cutoff, the block holding its threshold ``x`` (G + 1, K) on cumulative negatives (the first
    block whose negatives through it pass it; B when none of these blocks does), and the sorted blocks that
    straddle a threshold (their first negative lies below it): those blocks' rows take the exact path."""
    G, B = neg.shape[0], n_incl.shape[1]
    at = np.stack([np.searchsorted(n_incl[v], x[v], side="right") for v in range(G + 1)])
    edges = set()
    for v, k in zip(*np.nonzero(at < B)):
        blk = at[v, k]
        if n_incl[v, blk] - (neg[v, blk] if v < G else pooled_neg[blk]) < x[v, k]:
            edges.add(int(blk))
    return at, np.array(sorted(edges), dtype=np.intp)


def _inside(banded: np.ndarray) -> None:
    """Band slots (axis -2) summed cumulatively in place: slot k = the rows inside cutoff k."""
    for k in range(1, banded.shape[-2]):
        banded[..., k, :] += banded[..., k - 1, :]


class PrefixClusterSums:
    """Per-cluster sums of the influence values of every column and cutoff, fed in score order.

    ``n_pos`` / ``n_neg``: per group totals; ``alphas``: ascending cutoffs that need a variance (the last
    one 1); ``pairs``: (positive vector, negative vector) of each column (vector G = all groups pooled);
    ``n_clusters``: the number of dense cluster codes (0 .. n_clusters - 1) the rows will carry.

    In score order a vector's band changes only where the stream passes one of its K thresholds, so per group,
    class and vector a batch's rows fall in a few contiguous band ranges; per range, the rows' sums per cluster
    are ``bincount``s (or ``add.at`` for a range of few rows) of the quantities the columns share (negatives x
    ROC of each vector, positives x FPR of each vector, counts), added to that band's slot. Stored, per cluster
    (float64): NR (group or pooled negatives x ROC of each vector), PF (positives of a group x FPR of each vector), NC,
    PC (counts), all per band; N and P per group.
    """

    def __init__(self, n_pos, n_neg, alphas, pairs, n_clusters: int):
        G = len(n_pos)
        self.G, self.C = G, int(n_clusters)
        self.m = np.maximum(np.r_[n_pos, np.sum(n_pos)].astype(np.float64), 1.0)
        self.n = np.maximum(np.r_[n_neg, np.sum(n_neg)].astype(np.float64), 1.0)
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.pairs = [(int(i), int(j)) for i, j in pairs]
        K, C = self.alphas.size, self.C
        self.x = self.alphas[None, :] * self.n[:, None]  # (G + 1, K) thresholds on cumulative negatives
        # vector j's negatives (j = G: all groups') x ROC of vector i, per band of j
        self.NR = np.zeros((G + 1, G + 1, K, C))
        self.NC = np.zeros((G + 1, K, C))
        # positives of group g x FPR of vector j, per band of j
        self.PF = np.zeros((G, G + 1, K, C))
        self.PC = np.zeros((G, G + 1, K, C))
        self.N, self.P = np.zeros((G, C)), np.zeros((G, C))
        self.edges = []  # (cluster codes, (S, K, codes) ROC-free sums) of rows of blocks straddling a cutoff
        self.running = np.zeros((2, G + 1))  # positives / negatives of every vector above the next block
        self.rows = 0
        self._finished = False

    def update(self, pos, neg, row_block, group, n_pos, n_neg, codes, curves=None) -> None:
        """Next blocks (per group counts (G, B), descending scores, continuing the previous ones) and their
        rows: block index within this update, group code, positives and negatives, cluster code. ``curves``:
        the sweep's curves of these blocks (`grid_audit.GridAudit.update_columns` with ``keep_curves``), so the
        blocks are cumulated once; without them they are computed here (`sweep.block_curves`)."""
        G, C = self.G, self.C
        if self._finished:
            raise RuntimeError("update after covariance()")
        codes = np.asarray(codes, dtype=np.intp)
        if codes.size and (codes.min() < 0 or codes.max() >= C):
            raise AuditInputError(f"cluster codes must lie in [0, {C}), got [{codes.min()}, {codes.max()}]")
        B = pos.shape[1]
        pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
        pooled = (pos.sum(axis=0), neg.sum(axis=0))
        # per vector (the groups, then pooled): counts through each block, the half-credit ROC seen by its
        # negatives and FPR seen by its positives
        if curves is None:
            curves = block_curves(np.vstack([pos, pooled[0]]), np.vstack([neg, pooled[1]]), *self.running, self.m,
                                  self.n)
        p_incl, n_incl, roc_of, fpr_of = curves
        if B:
            self.running = np.stack([p_incl[:, -1], n_incl[:, -1]])
        b = np.asarray(row_block, dtype=np.intp)
        group = np.asarray(group, dtype=np.intp)
        n_pos, n_neg = np.asarray(n_pos, dtype=np.float64), np.asarray(n_neg, dtype=np.float64)
        self.rows += b.size
        # per vector, the block holding each threshold: the first whose cumulative negatives pass it. A block's
        # band for that vector is the number of those at or above it, so in score order a vector's bands are
        # contiguous row ranges. Such a block whose first negative lies below the threshold straddles it: its
        # rows take the exact path, for every vector.
        at, edge_blocks = cutoff_blocks(n_incl, neg, pooled[1], self.x)
        edge_rows = np.zeros(b.size, dtype=bool)
        for blk in edge_blocks:
            edge_rows[np.searchsorted(b, blk, side="left"):np.searchsorted(b, blk, side="right")] = True
        for g in range(G):
            mine = (group == g) & ~edge_rows
            for w, neg_side in ((n_neg, True), (n_pos, False)):
                idx = np.flatnonzero(mine & (w > 0))
                if idx.size:
                    self._group_rows(g, b[idx], codes[idx], w[idx], at, roc_of if neg_side else fpr_of, neg_side)
        rows_e = np.flatnonzero(edge_rows)
        if rows_e.size:  # (the rows fed may be a subset of the blocks': a straddling block may hold none of them)
            be = edge_blocks  # the edge blocks' counts, as the exact path needs them
            counts = [np.vstack([a[:, be], pooled[side][be]]) for side, a in enumerate((pos, neg))]
            self._edge_rows(rows_e, np.searchsorted(be, b[rows_e]), counts[0], counts[1], p_incl[:, be],
                            n_incl[:, be], group, n_pos, n_neg, codes)

    def _group_rows(self, g, rb, c, w, at, curve, neg_side: bool) -> None:
        """One group's rows of one class (blocks ``rb`` in score order, cluster codes ``c``, counts ``w``) into
        their band slots. A negative's band is that of its own group's vector and of the pooled one; a
        positive's, that of every vector. Each band is a contiguous range of the rows: its sums per cluster
        are a few whole-slot additions (`_add_to`), not per-row work in Python."""
        G = self.G
        self._add_to((self.N if neg_side else self.P)[g], c, w)
        # count x curve of each vector at the rows' blocks: a negative adds them under two band owners
        weighted = [w * curve[v, rb] for v in range(G + 1)]
        for u in ((g, G) if neg_side else range(G + 1)):  # the vector whose band the rows take
            cuts = np.r_[0, np.searchsorted(rb, at[u], side="left"), rb.size]
            for t in np.flatnonzero(cuts[1:] > cuts[:-1]):
                lo, hi = cuts[t], cuts[t + 1]
                cr = c[lo:hi]
                if neg_side:
                    self._add_to(self.NC[u, t], cr, w[lo:hi])
                    for v in range(G + 1):
                        self._add_to(self.NR[u, v, t], cr, weighted[v][lo:hi])
                else:
                    self._add_to(self.PC[g, u, t], cr, w[lo:hi])
                    self._add_to(self.PF[g, u, t], cr, weighted[u][lo:hi])

    def _add_to(self, slot, c, w) -> None:
        """Add ``w`` per cluster code into the (C,) ``slot``: summed per code first (``bincount`` over the range of
        codes the rows span, then one contiguous add) when the rows are many for that range, else scattered row by
        row (``add.at``: no range-sized work)."""
        if not c.size:
            return
        lo, hi = int(c.min()), int(c.max()) + 1
        if c.size >= DENSE_RUN_SHARE * (hi - lo):
            slot[lo:hi] += np.bincount(c - lo, w, minlength=hi - lo)
        else:
            np.add.at(slot, c, w)

    def _edge_rows(self, rows_e, be, p, q, p_incl, n_incl, group, n_pos, n_neg, codes) -> None:
        """Rows of blocks straddling a cutoff: `row_influence` per column and cutoff, its ROC-free part kept
        per cluster (`edges`, few) and its ROC coefficient into NC (at the cutoff's slot, minus at the next: the cumulative sum
        over slots then holds it at that cutoff only). ``be``: each row's column in the edge blocks' counts (G + 1, E)."""
        G, K = self.G, self.alphas.size
        table = ClassTotals(G, self.m, self.n)
        rows = PrefixRows(p[:, be], q[:, be], p_incl[:, be], n_incl[:, be])
        ge, pe, ne = group[rows_e], n_pos[rows_e], n_neg[rows_e]
        uniq, inv = np.unique(codes[rows_e], return_inverse=True)
        a_vals = np.empty((2, len(self.pairs), K, rows_e.size))  # negatives' and positives' parts
        nc_vals = np.empty((G + 1, K, rows_e.size))
        no_pos = np.zeros(pe.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            for k, alpha in enumerate(self.alphas):
                for j in range(G + 1):
                    in_j = np.ones(ge.size, dtype=bool) if j == G else ge == j
                    roc0 = row_influence(table, j, j, alpha, 0.0, 0.0, rows, ge, no_pos, ne)
                    roc1 = row_influence(table, j, j, alpha, 0.0, 1.0, rows, ge, no_pos, ne)
                    nc_vals[j, k] = alpha * ne * in_j - self.n[j] * (roc1 - roc0)
                for s, (i, j) in enumerate(self.pairs):
                    a_vals[:, s, k] = row_influence(table, i, j, alpha, 0.0, 0.0, rows, ge, pe, ne, parts=True)
        nc_vals[:, 1:] -= nc_vals[:, :-1].copy()  # slot k: + value at k, - value at k - 1
        members = sparse.csr_matrix((np.ones(inv.size), (np.arange(inv.size), inv.ravel())),
                                    shape=(inv.size, uniq.size))  # row -> its cluster
        def per_cluster(vals):
            flat = vals.reshape(-1, inv.size)
            return np.asarray(members.T @ flat.T).T.reshape(vals.shape[:-1] + (uniq.size,))

        self.edges.append((uniq, per_cluster(a_vals[0]), per_cluster(a_vals[1])))
        self.NC[:, :, uniq] += per_cluster(nc_vals)
        self.N[:, uniq] += per_cluster(np.stack([ne * (ge == g) for g in range(G)]))
        self.P[:, uniq] += per_cluster(np.stack([pe * (ge == g) for g in range(G)]))

    def start_at(self, pos_above, neg_above) -> None:
        """Rows fed from here on lie below ``pos_above`` / ``neg_above`` (per group) rows of higher scores (a
        score range swept on its own: its rows sit at their global places on every ROC curve)."""
        if self.rows:
            raise RuntimeError("start_at before the first update")
        pos_above, neg_above = np.asarray(pos_above, dtype=np.float64), np.asarray(neg_above, dtype=np.float64)
        self.running = np.stack([np.r_[pos_above, pos_above.sum()], np.r_[neg_above, neg_above.sum()]])

    def per_cluster(self) -> np.ndarray:
        """(C, D) this pass's sums per cluster code (band slots not yet cumulated): for disjoint score ranges
        swept on their own, the sums of a cluster over all ranges are the one pass's (`from_per_cluster`)."""
        if self._finished:
            raise RuntimeError("per_cluster after covariance()")
        S, K, C = len(self.pairs), self.alphas.size, self.C
        edge = np.zeros((2, S, K, C))
        for codes, neg_sums, pos_sums in self.edges:  # codes are distinct within one entry
            edge[0][:, :, codes] += neg_sums
            edge[1][:, :, codes] += pos_sums
        return np.vstack([a.reshape(-1, C) for a in (*self._sums(), edge)]).T

    @classmethod
    def from_per_cluster(cls, n_pos, n_neg, alphas, pairs, sums) -> PrefixClusterSums:
        """The sums of rows (C clusters, ``per_cluster`` rows added over score ranges) ready for `covariance`."""
        sums = np.asarray(sums, dtype=np.float64)
        out = cls(n_pos, n_neg, alphas, pairs, sums.shape[0])
        S, K, C = len(out.pairs), out.alphas.size, out.C
        at = 0
        for a in out._sums():
            a[...] = sums[:, at:at + a.size // max(C, 1)].T.reshape(a.shape)
            at += a.size // max(C, 1)
        edge = sums[:, at:].T.reshape(2, S, K, C)
        out.edges = [(np.arange(C), edge[0], edge[1])]
        return out

    def _sums(self) -> tuple[np.ndarray, ...]:
        return self.NR, self.NC, self.PF, self.PC, self.N, self.P

    def held_clusters(self) -> int:
        """Clusters with rows of a positive count."""
        return int(np.count_nonzero((self.N.sum(axis=0) + self.P.sum(axis=0)) > 0))

    def covariance(self, auc, roc, keep_totals: bool = True) -> ClusterCrossSums:
        """The clusters' CR2 totals and covariances (`cluster_pass.ClusterTotals`), given the sweep's I(alpha)
        and ROC(alpha) of every column at every cutoff ((S, K) each); without ``keep_totals`` (two-way's
        intersection stream, which adds no df) only the covariances and counts (`ClusterCrossSums`)."""
        C = self.held_clusters()
        if C < 2:
            raise AuditInputError(f"a cluster-robust variance needs at least 2 clusters, got {C}")
        K, S, V = self.alphas.size, len(self.pairs), self.G + 1
        out = ClusterTotals(self.pairs, K, S, V) if keep_totals else ClusterCrossSums(self.pairs, K, S, V, design=False)
        return self.add_to(out, auc, roc)

    def add_to(self, out, auc, roc):
        """Add the clusters' influence parts and counts to ``out`` (`ClusterTotals`, or `ClusterMoments`)."""
        G, K, S = self.G, self.alphas.size, len(self.pairs)
        auc, roc = np.asarray(auc, dtype=np.float64), np.asarray(roc, dtype=np.float64)
        if not self._finished:  # from here on the band slots hold the sums inside each cutoff
            for banded in (self.NR, self.NC, self.PF, self.PC):
                _inside(banded)
            self._finished = True
        for lo in range(0, self.C, CROSS_CHUNK):
            c = slice(lo, lo + CROSS_CHUNK)
            NR, NC, PF, PC = (x[..., c] for x in (self.NR, self.NC, self.PF, self.PC))
            N = np.vstack([self.N[:, c], self.N[:, c].sum(axis=0, keepdims=True)])
            P = np.vstack([self.P[:, c], self.P[:, c].sum(axis=0, keepdims=True)])
            Uneg, Upos = np.empty((K, N.shape[1], S)), np.empty((K, N.shape[1], S))
            for s, (i, j) in enumerate(self.pairs):
                a = self.alphas[:, None]
                pf = PF[:, j].sum(axis=0) if i == G else PF[i, j]
                pc = PC[:, j].sum(axis=0) if i == G else PC[i, j]
                B = (a * N[j] - NC[j]) / self.n[j]
                Uneg[:, :, s] = NR[j, i] / self.n[j] + roc[s][:, None] * B - auc[s][:, None] * N[j] / self.n[j]
                Upos[:, :, s] = (a * pc - pf - auc[s][:, None] * P[i]) / self.m[i]
            for codes, neg_sums, pos_sums in self.edges:
                mine = (codes >= lo) & (codes < lo + CROSS_CHUNK)
                Uneg[:, codes[mine] - lo, :] += neg_sums[:, :, mine].transpose(1, 2, 0)
                Upos[:, codes[mine] - lo, :] += pos_sums[:, :, mine].transpose(1, 2, 0)
            held = (self.N[:, c].sum(axis=0) + self.P[:, c].sum(axis=0)) > 0  # codes may be unused
            if held.all():  # dense codes of distinct keys: every one holds rows
                out.add(Uneg, Upos, P.T, N.T, self.m, self.n)
            else:
                out.add(Uneg[:, held], Upos[:, held], P[:, held].T, N[:, held].T, self.m, self.n)
        return out


class SortedRowBlocks:
    """Rows (score, cell, count, cluster codes...) in descending score order, fed in batches, cut into
    distinct-score blocks that keep their rows: like `blocks.SortedCellBlocks`, and each emitted row also
    carries its block's index within the emitted blocks. The last score of a batch is held back until a
    lower score (or `finish`) shows that its block is complete."""

    def __init__(self, n_cells: int):
        self.n_cells = int(n_cells)
        self.carry = None

    def push(self, scores, cells, counts, *extras):
        """(block scores (B,), counts (n_cells, B), row blocks, cells, counts, extras) of the rows completed
        by this batch, or None."""
        cols = [np.asarray(scores, dtype=np.float64), np.asarray(cells, dtype=np.intp),
                np.asarray(counts, dtype=np.float64)] + [np.asarray(e) for e in extras]
        if self.carry is not None:
            cols = [np.concatenate([c0, c]) for c0, c in zip(self.carry, cols)]
        s = cols[0]
        if s.size == 0:
            self.carry = None
            return None
        last = s.size - np.searchsorted(s[::-1], s[-1], side="right")  # first row of the last score
        self.carry = [c[last:] for c in cols]
        return self._blocks([c[:last] for c in cols]) if last else None

    def finish(self):
        carry, self.carry = self.carry, None
        return None if carry is None else self._blocks(carry)

    def _blocks(self, cols):
        scores, cells, counts = cols[:3]
        new_block = np.empty(scores.size, dtype=bool)
        new_block[0] = True
        np.not_equal(scores[1:], scores[:-1], out=new_block[1:])
        starts = np.flatnonzero(new_block)
        block = np.arange(starts.size) if starts.size == scores.size else np.cumsum(new_block) - 1
        table = np.bincount(cells * starts.size + block, weights=counts, minlength=self.n_cells * starts.size)
        return (scores[starts], table.reshape(self.n_cells, starts.size), block, cells, counts, *cols[3:])
