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
PC = positives of i, NC = negatives of j; N and P are the cluster's negatives of j and positives of i.

In score order, "inside cutoff k of vector j" is "before the checkpoint where the stream passes alpha_k n_j
negatives of j". So a cluster needs no sums per cutoff: per group and class it keeps running sums of its counts
and of its counts x the curve of every vector (ROC for negatives, FPR for positives), and its sums inside a
cutoff are those running sums as they stood at that checkpoint: all of them if its last row came before, none if
its first row came after, and otherwise a copy taken when its first row after the checkpoint arrives (only
clusters straddling a checkpoint need one). Rows of a block straddling a cutoff (few) take `row_influence`
exactly, split into its parts free of and proportional to ROC(alpha). These are the values `ClusterAccumulator`
sums after sorting by cluster, in another order (tests/audit/test_prefix_clusters.py).

The pooled vector's curve is a fixed weighted sum of the groups' (ROC: weights m_g / m, FPR: n_g / n), so are a
cell's sums of it: they are derived from the groups' sums when read, not added row by row.

Memory: per cluster code, 2 G (G + 1) float64 running sums (12 with two groups, contiguous: a row's additions and
a cluster's copy touch at most two cache lines) and its last checkpoint, plus per checkpoint a cluster straddles the few
sums that checkpoint reads (`checkpoint_copies`): catalogue sized (items or queries), not day sized.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.checkpoint_copies import CheckpointCopies
from fair_pipeline.audit.stats.cluster_parts import CROSS_CHUNK, ClusterSumsBase, SummedClusterSums
from fair_pipeline.audit.stats.clustered import PrefixRows
from fair_pipeline.audit.stats.straddling_rows import straddling_values, summed_per_cluster
from fair_pipeline.audit.stats.sweep import block_curves
from fair_pipeline.audit.stats.validation import AuditInputError

DENSE_RUN_SHARE = 1.0  # rows at least this share of the codes they span: summed per (cell, code) by bincount
NOT_PASSED = np.iinfo(np.int32).max  # the checkpoint of a threshold the stream never passed (alpha = 1)


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


def vector_sums(sums: np.ndarray, j: int, G: int) -> list[np.ndarray]:
    """The sums vector j's cutoffs need of (G + 2, 2 G, ...) cell sums (``...``: clusters, or cutoffs and
    clusters): its negatives' (summed over their groups) (G + 2, ...), the positives' counts and FPR_j (2, G, ...)."""
    negatives = slice(0, 2 * G, 2) if j == G else slice(2 * j, 2 * j + 1)
    return [sums[:, negatives].sum(axis=1), sums[[0, 1 + j], 1::2]]


class PrefixClusterSums(ClusterSumsBase):
    """Per-cluster sums of the influence values of every column and cutoff, fed in score order.

    ``n_pos`` / ``n_neg``: per group totals; ``alphas``: ascending cutoffs that need a variance (the last
    one 1); ``pairs``: (positive vector, negative vector) of each column (vector G = all groups pooled);
    ``n_clusters``: the number of dense cluster codes (0 .. n_clusters - 1) the rows will carry; ``diagonal``:
    below FPR 1 only columns (v, v) will be read (`covariance` with such ``every``), so copies keep less.

    Kept per cluster (float64, ``run``, (C, 2 G, G + 1)): per cell (group g, class) and quantity the running sum
    of the rows' counts (quantity 0) and of counts x the curve of group g' seen by the row (quantity 1 + g': ROC
    for a negative, FPR for a positive); the pooled curve's sums (quantity G + 1 when read) are their weighted sum; ``last``: the checkpoint count when the cluster last took rows. The
    stream passes checkpoint e (vector u's threshold of cutoff k) once; a cluster whose rows continue past it
    gets a copy of what e reads of its sums then (`checkpoint_copies`). A batch's rows between two checkpoints
    are added by one ``add.at`` on a flat (code, quantity, cell) index, or summed per (code, quantity, cell) first
    (``bincount`` over the nearby codes they span) when they are at least as many as those codes.
    """

    def __init__(self, n_pos, n_neg, alphas, pairs, n_clusters: int, diagonal: bool = False):
        super().__init__(n_pos, n_neg, alphas, pairs, n_clusters)
        G, K, C = self.G, self.alphas.size, self.C
        self.x = self.alphas[None, :] * self.n[:, None]  # (G + 1, K) thresholds on cumulative negatives
        self.run = np.zeros((C, 2 * G, G + 1))  # a row's quantities are adjacent (one cache line)
        # per class (negatives' ROC, positives' FPR): the weight of each group's curve in the pooled one
        self.pooled_weights = np.stack([self.m[:G] / self.m[G], self.n[:G] / self.n[G]])
        self.last = np.full(C, -1, dtype=np.int32)  # checkpoints passed when the cluster last took rows
        self._mark = None  # (C,) scratch: one entry per code among a batch's rows
        self.passed = 0
        self.checkpoint = np.full((G + 1, K), NOT_PASSED, dtype=np.int32)  # its number once passed (1, 2, ...)
        self.copies = CheckpointCopies(G, self.pooled_weights, diagonal)
        self._ended = False  # the final step has read the sums
        self.edges = []  # rows of blocks straddling a cutoff, per update: (codes, neg, pos, NC, N, P) sums
        self.running = np.zeros((2, G + 1))  # positives / negatives of every vector above the next block
        self.rows = 0

    def update(self, pos, neg, row_block, group, n_pos, n_neg, codes, curves=None, also=()) -> None:
        """Next blocks (per group counts (G, B), descending scores, continuing the previous ones) and their
        rows: block index within this update, group code, positives and negatives, cluster code. ``curves``:
        the sweep's curves of these blocks (`grid_audit.GridAudit.update_columns` with ``keep_curves``), so the
        blocks are cumulated once; without them they are computed here (`sweep.block_curves`). ``also``: other
        (sums, codes) of the same audit fed the very same rows, every time (two-way's query stream beside its item
        stream): the rows' weights, the checkpoints and the straddling rows' influence are worked out once."""
        fed = [(self, codes), *also]
        for acc, _ in fed:
            if acc._ended:
                raise RuntimeError("update after the sums were read")
            if acc.passed != self.passed or acc.rows != self.rows:
                raise RuntimeError("sums updated together must have been fed the same rows")
        fed = [(acc, acc._checked(codes)) for acc, codes in fed]
        B = pos.shape[1]
        # 8-bit counts (`SortedRowBlocks`) stay so: only the few straddling blocks' are read, as floats
        pos, neg = np.asarray(pos), np.asarray(neg)
        pooled = (pos.sum(axis=0), neg.sum(axis=0))
        # per vector (the groups, then pooled): counts through each block, the half-credit ROC seen by its
        # negatives and FPR seen by its positives
        if curves is None:
            curves = np.empty((4, self.G + 1, B))
            block_curves(np.vstack([pos, pooled[0]]).astype(np.float64), np.vstack([neg, pooled[1]]).astype(np.float64),
                         *self.running, self.m, self.n, out=curves)
        curves = np.asarray(curves)  # (4, G + 1, B): one array, so the two curves a row may see are one view
        p_incl, n_incl = curves[:2]
        b = np.asarray(row_block, dtype=np.intp)
        for acc, _ in fed:
            acc.running = np.stack([p_incl[:, -1], n_incl[:, -1]]) if B else acc.running
            acc.rows += b.size
        group = np.asarray(group, dtype=np.intp)
        n_pos, n_neg = np.asarray(n_pos, dtype=np.float64), np.asarray(n_neg, dtype=np.float64)
        if not B:
            return
        # per vector, the block holding each threshold: the first whose cumulative negatives pass it; rows of
        # blocks above it are inside that cutoff. Such a block whose first negative lies below the threshold
        # straddles it: its rows take the exact path, for every vector.
        at, edge_blocks = cutoff_blocks(n_incl, neg, pooled[1], self.x)
        edge_rows = np.zeros(b.size, dtype=bool)
        for blk in edge_blocks:
            edge_rows[np.searchsorted(b, blk, side="left"):np.searchsorted(b, blk, side="right")] = True
        # one entry per row and class it holds (a row holds one class but for aggregates of both), in score order
        if np.all((n_pos > 0) != (n_neg > 0)):
            # no straddling block among these rows (nearly every update): all of them, read through views
            idx = np.flatnonzero(~edge_rows) if edge_blocks.size else None
            label, w = (n_pos > 0).astype(np.intp), n_pos + n_neg
            if idx is not None:
                label, w = label[idx], w[idx]
        else:
            both = [(np.flatnonzero(~edge_rows & (cnt > 0)), cnt, side) for side, cnt in enumerate((n_neg, n_pos))]
            idx = np.concatenate([i for i, _, _ in both])
            order = np.argsort(idx, kind="stable")
            idx = idx[order]
            label = np.concatenate([np.full(i.size, side, dtype=np.intp) for i, _, side in both])[order]
            w = np.concatenate([cnt[i] for i, cnt, _ in both])[order]
        curve = curves[2:]  # the curve a negative sees, a positive sees
        reached = (self.checkpoint == NOT_PASSED) & (at < B)  # thresholds this update passes, at their blocks
        start, row_blocks = 0, b if idx is None else b[idx]
        for blk in [*np.unique(at[reached]), None]:
            end = row_blocks.size if blk is None else int(np.searchsorted(row_blocks, blk, side="left"))
            if end > start:
                part = slice(start, end)
                rows = part if idx is None else idx[part]
                cell, weights = self._row_weights(rows, label[part], w[part], b, group, curve)
                for acc, codes in fed:
                    acc._add_rows(codes[rows], cell, weights)
            start = end
            if blk is not None:
                for u, k in zip(*np.nonzero(reached & (at == blk))):
                    for acc, _ in fed:
                        acc.passed += 1
                        acc.checkpoint[u, k] = acc.passed
                        acc.copies.passed(u)
        rows_e = np.flatnonzero(edge_rows)
        if rows_e.size:  # (the rows fed may be a subset of the blocks': a straddling block may hold none of them)
            be = edge_blocks  # the edge blocks' counts, as the exact path needs them
            counts = [np.vstack([a[:, be], pooled[side][be]]).astype(np.float64) for side, a in enumerate((pos, neg))]
            rows = PrefixRows(*(a[:, np.searchsorted(be, b[rows_e])] for a in (*counts, p_incl[:, be], n_incl[:, be])))
            values = straddling_values(self.pairs, self.alphas, self.m, self.n, rows, group[rows_e], n_pos[rows_e],
                                       n_neg[rows_e])
            for acc, codes in fed:
                acc.edges.append(summed_per_cluster(codes[rows_e], *values))

    def _checked(self, codes) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.intp)
        if codes.size and (codes.min() < 0 or codes.max() >= self.C):
            raise AuditInputError(f"cluster codes must lie in [0, {self.C}), got [{codes.min()}, {codes.max()}]")
        return codes

    def _row_weights(self, idx, label, w, b, group, curve) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``idx`` (indices or a slice; class ``label``, count ``w``): their (group, class) cell and their
        weights per quantity (Q, rows): the count, then the count x the curve of each group the row sees. ``curve``:
        (2, G + 1, blocks) the ROC of each vector at each block (for negatives), then the FPR."""
        G = self.G
        Q = G + 1
        cell, rb = 2 * group[idx] + label, b[idx]
        at = label * curve[0].size + rb  # each row's curve value of vector v: flat index at + v * blocks
        flat = curve.reshape(-1)
        weights = np.empty((Q, w.size))
        weights[0] = w
        for v in range(G):
            np.multiply(w, flat[at + v * curve.shape[2]], out=weights[1 + v])
        return cell, weights

    def _add_rows(self, c, cell, weights) -> None:
        """Rows of cluster codes ``c`` (cells and weights: `_row_weights`), all between the same two checkpoints, into
        the running sums of their cells; a cluster last fed before a checkpoint since passed first records its sums."""
        Q, cells = self.G + 1, 2 * self.G
        run = self._running(c)
        lo, hi = int(c.min()), int(c.max()) + 1
        offsets = np.arange(Q)[:, None]  # quantity q of a cell: q further
        if c.size >= DENSE_RUN_SHARE * (hi - lo):  # summed per (code, cell, quantity) over the codes they span
            key = ((c - lo) * (Q * cells) + cell * Q)[None, :] + offsets
            run[lo:hi] += np.bincount(key.ravel(), weights.ravel(), minlength=(hi - lo) * Q * cells).reshape(
                hi - lo, cells, Q)
        else:  # scattered row by row (numpy's add.at on a flat index: a row's sums share one cache line)
            np.add.at(run.reshape(-1), ((c * (Q * cells) + cell * Q)[None, :] + offsets).ravel(), weights.ravel())

    def _running(self, c: np.ndarray) -> np.ndarray:
        """The running sums that rows of codes ``c`` go into; a cluster last fed before a checkpoint since passed
        first records its sums."""
        now = self.passed
        # fed before (never fed: -1, the largest unsigned) but not since the last checkpoint passed
        back = c[self.last[c].view(np.uint32) < now]
        if back.size:
            back = self._distinct(back)
            self.copies.take(back, self.last[back], now, self.run)
        self.last[c] = now
        return self.run

    def _distinct(self, codes: np.ndarray) -> np.ndarray:
        """Each code of ``codes`` once (in no particular order), without a sort: the entry that a scatter into a
        code-sized scratch array kept."""
        if self._mark is None:
            self._mark = np.empty(self.C, dtype=np.int32)
        order = np.arange(codes.size, dtype=np.int32)
        self._mark[codes] = order
        return codes[self._mark[codes] == order]

    def shrink(self, n_clusters: int) -> None:
        """Keep codes 0..n_clusters-1 only, once the stream has ended (it was sized by an upper bound on the
        clusters and used no higher code)."""
        if n_clusters > self.C:
            raise RuntimeError(f"cannot shrink {self.C} cluster codes to {n_clusters}")
        self.C = int(n_clusters)
        self.run, self.last = self.run[:n_clusters], self.last[:n_clusters]
        self._mark = None

    def start_at(self, pos_above, neg_above) -> None:
        """Rows fed from here on lie below ``pos_above`` / ``neg_above`` (per group) rows of higher scores (a
        score range swept on its own: its rows sit at their global places on every ROC curve)."""
        if self.rows:
            raise RuntimeError("start_at before the first update")
        pos_above, neg_above = np.asarray(pos_above, dtype=np.float64), np.asarray(neg_above, dtype=np.float64)
        self.running = np.stack([np.r_[pos_above, pos_above.sum()], np.r_[neg_above, neg_above.sum()]])

    def _edges_in(self, lo: int, hi: int):
        for codes, *sums in self.edges:
            mine = (codes >= lo) & (codes < hi)
            if mine.any():
                yield (codes[mine] - lo, *(s[..., mine] for s in sums))

    def _edge_lists(self, lo: int, hi: int) -> tuple[list, list]:
        """The straddling rows of clusters lo..hi-1: (codes, ROC coefficients) and (codes, negative, positive sums)."""
        nc_edges, edges = [], []
        for codes_e, neg_sums, pos_sums, nc, _, _ in self._edges_in(lo, hi):
            nc_edges.append((codes_e, nc))
            edges.append((codes_e, neg_sums, pos_sums))
        return nc_edges, edges

    def _counts(self, lo: int, hi: int, total=None) -> tuple[np.ndarray, np.ndarray]:
        """(G, w) negatives and positives per group of clusters lo..hi-1, straddling rows included (``total``: their
        `_total`, if taken)."""
        # (2 G cells, w): negatives of group g at 2 g, positives at 2 g + 1
        counts = self.run[lo:hi, :, 0].T if total is None else total[0]
        N, P = counts[0::2].copy(), counts[1::2].copy()
        for codes, _, _, _, n_e, p_e in self._edges_in(lo, hi):
            N[:, codes] += n_e
            P[:, codes] += p_e
        return N, P

    def _total(self, lo: int, hi: int) -> np.ndarray:
        """(G + 2, 2 G, w) all the sums of clusters lo..hi-1, the pooled curve's derived (a copy: the final step
        reads it by quantity)."""
        G = self.G
        total = np.empty((G + 2, 2 * G, hi - lo))
        total[:G + 1] = self.run[lo:hi].transpose(2, 1, 0)  # kept (w, 2 G, G + 1)
        weight = self.pooled_weights[np.arange(2 * G) % 2]  # (2 G cells, G groups)
        np.multiply(total[1], weight[:, :1], out=total[G + 1])
        for g in range(1, G):
            total[G + 1] += total[1 + g] * weight[:, g:g + 1]
        return total

    def _held(self, lo: int, hi: int) -> np.ndarray:
        N, P = self._counts(lo, hi)
        return (N.sum(axis=0) + P.sum(axis=0)) > 0

    def _fed(self) -> np.ndarray:
        """(C,) clusters whose rows went into the running sums: every such row has a positive count."""
        return self.last >= 0

    def held_clusters(self) -> int:
        held = self._fed()  # (read off the checkpoints, not the 96-byte sums of every cluster)
        for codes, _, _, _, n_e, p_e in self.edges:
            held[codes] |= (n_e > 0).any(axis=0) | (p_e > 0).any(axis=0)
        return int(np.count_nonzero(held))

    @property
    def N(self) -> np.ndarray:
        """(G, C) each cluster's negatives per group."""
        return self._counts(0, self.C)[0]

    @property
    def P(self) -> np.ndarray:
        """(G, C) each cluster's positives per group."""
        return self._counts(0, self.C)[1]

    def covariance(self, auc, roc, keep_totals: bool = True, every=None):
        if self.copies.diagonal and (every is None or any(self.pairs[s][0] != self.pairs[s][1] for s in every)):
            raise ValueError("diagonal sums hold the columns (v, v) below FPR 1 only: pass those as every")
        return super().covariance(auc, roc, keep_totals, every)

    def _chunk(self, lo: int, hi: int):
        G = self.G
        self._ended = True
        total, last = self._total(lo, hi), self.last[lo:hi]
        nc_edges, edges = self._edge_lists(lo, hi)

        # one pair of buffers for every vector (each vector's are read before the next one's are formed)
        neg, pos = np.empty((self.alphas.size, G + 2, hi - lo)), np.empty((self.alphas.size, 2, G, hi - lo))

        def owners():
            for j in range(G + 1):
                e = self.checkpoint[j]  # a cluster whose last rows came before checkpoint e[k] is inside cutoff k
                run_neg, run_pos = vector_sums(total, j, G)
                # all of a cluster's sums if so, else none (the sums are of counts and curves, never negative: x
                # times False is +0), but the copy of a cluster on both sides of it; a threshold never passed
                # (FPR 1) holds every cluster's sums
                for k in range(e.size):
                    if e[k] == NOT_PASSED:
                        neg[k], pos[k] = run_neg, run_pos
                        continue
                    before = last < e[k]
                    np.multiply(run_neg, before, out=neg[k])  # (G + 2, w)
                    np.multiply(run_pos, before, out=pos[k])  # (2, G, w)
                    self.copies.scatter(e[k], lo, hi, neg[k], pos[k])
                for codes_e, nc in nc_edges:  # straddling rows: their ROC coefficient at each cutoff
                    neg[:, 0, codes_e] += nc[j]
                yield j, neg, pos

        N, P = self._counts(lo, hi, total)
        return N, P, edges, owners()

    def per_cluster(self) -> np.ndarray:
        """(C, D) this pass's sums per cluster code (per band between cutoffs, not cumulated): for disjoint score
        ranges swept on their own, the sums of a cluster over all ranges are the one pass's (`from_per_cluster`)."""
        if self.copies.diagonal:
            raise ValueError("diagonal sums hold the columns (v, v) below FPR 1 only")
        G, S, K = self.G, len(self.pairs), self.alphas.size
        out = []
        for lo in range(0, self.C, CROSS_CHUNK):
            hi = min(self.C, lo + CROSS_CHUNK)
            N, P, edges, owners = self._chunk(lo, hi)
            NR, NC = np.empty((G + 1, G + 1, K, hi - lo)), np.empty((G + 1, K, hi - lo))
            PF, PC = np.empty((G, G + 1, K, hi - lo)), np.empty((G, G + 1, K, hi - lo))
            for j, neg, pos in owners:
                NC[j], NR[j] = neg[:, 0], neg[:, 1:].transpose(1, 0, 2)
                PC[:, j], PF[:, j] = pos.transpose(1, 2, 0, 3)
            for banded in (NR, NC, PF, PC):
                banded[..., 1:, :] -= banded[..., :-1, :].copy()
            edge = np.zeros((2, S, K, hi - lo))
            for codes, neg_sums, pos_sums in edges:
                edge[0][:, :, codes] += neg_sums
                edge[1][:, :, codes] += pos_sums
            out.append(np.vstack([a.reshape(-1, hi - lo) for a in (NR, NC, PF, PC, N, P, edge)]).T)
        return np.vstack(out) if out else np.zeros((0, SummedClusterSums.width(G, K, S)))

    @classmethod
    def from_per_cluster(cls, n_pos, n_neg, alphas, pairs, sums) -> SummedClusterSums:
        """The sums of rows (C clusters, ``per_cluster`` rows added over score ranges) ready for `covariance`."""
        return SummedClusterSums(n_pos, n_neg, alphas, pairs, sums)


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
        if starts.size == scores.size and counts.min() == 1.0 == counts.max():
            # one impression per distinct score (a sorted stream of rows): 8-bit counts, which the sweep cumulates
            # as integers unchecked (`sweep.cumulate`), one-hot
            block = np.arange(starts.size)
            table = np.zeros((self.n_cells, starts.size), dtype=np.int8)
            table.reshape(-1)[cells * starts.size + block] = 1
            return scores, table, block, cells, counts, *cols[3:]
        block = np.arange(starts.size) if starts.size == scores.size else np.cumsum(new_block) - 1
        table = np.bincount(cells * starts.size + block, weights=counts, minlength=self.n_cells * starts.size)
        return (scores[starts], table.reshape(self.n_cells, starts.size), block, cells, counts, *cols[3:])
