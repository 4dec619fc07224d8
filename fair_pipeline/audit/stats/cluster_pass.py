"""The cluster pass: per-cluster influence totals of every column and cutoff, their CR2 covariance and df.

Rows arrive in batches, whole clusters contiguous (a stream ``ORDER BY cluster``). Per cluster and column the
influence values of the negatives and of the positives are summed separately, with the cluster's count of
each column's positives and negatives: CR2 scales each part by 1 / sqrt(1 - the cluster's share of that
class) (`small_sample`), which for a group's column is the group's own finite-cluster factor. The pass keeps
the (cutoffs, clusters, columns) adjusted totals for one-way streams, so the degrees of freedom of any
contrast of columns (a group difference, ΔxAUC) can be computed afterwards.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.clustered import BlockTable, row_influence
from fair_pipeline.audit.stats.small_sample import (N_MOMENTS, adjusted_totals, design_df, leverage_factor,
                                                    leverage_moments, satterthwaite_df, satterthwaite_from_sums,
                                                    welch_df)
from fair_pipeline.audit.stats.validation import AuditInputError


def gram(a: np.ndarray) -> np.ndarray:
    """(..., S, S) sums over clusters of the outer products of (..., clusters, S) totals: one batched matrix
    product (BLAS), several times cheaper than the equivalent einsum at a catalogue's clusters."""
    return np.matmul(np.swapaxes(a, -1, -2), a)


def cr2_factors(pos_counts, neg_counts, m, n) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per class (negatives, positives): the clusters' shares of each vector's class total (clusters, vectors),
    their CR2 factors (`leverage_factor`) and, per vector, whether all of its factors are finite. Columns share
    vectors, and the sums of several column sets over the same clusters share these (`cr2_parts`)."""
    out = []
    for counts, total in ((neg_counts, n), (pos_counts, m)):
        h = np.asarray(counts) / np.asarray(total, dtype=np.float64)[None, :]
        out.append((h, leverage_factor(h), (h < 1.0).all(axis=0)))
    return out


def cr2_parts(neg_part, pos_part, pos_counts, neg_counts, pairs, m, n, factors=None) -> np.ndarray:
    """(2, K, clusters, columns) CR2-adjusted negatives' and positives' parts from the parts (K, clusters, columns)
    and counts (clusters, vectors): what any engine producing per-cluster sums hands to the covariance and df (the
    adjusted totals are their sum over the first axis). ``factors``: `cr2_factors` of these counts, if known."""
    i = np.array([p for p, _ in pairs], dtype=np.intp)
    j = np.array([q for _, q in pairs], dtype=np.intp)
    factors = factors or cr2_factors(pos_counts, neg_counts, m, n)
    out = np.empty((2,) + np.shape(neg_part))
    for p, (part, (h, factor, finite), col) in enumerate(zip((neg_part, pos_part), factors, (j, i))):
        if finite[col].all():  # every factor finite: `adjusted_totals` is the product
            # (the columns' factors laid out as the parts are: a mixed layout makes the product ~3x slower)
            np.multiply(part, np.ascontiguousarray(factor[:, col])[None], out=out[p])
        else:
            out[p] = adjusted_totals(part[None], h[:, col][None, None])
    return out


class PartSums:
    """What the design df of any contrast needs, summed over clusters as they stream by: per class (negatives,
    positives) the cross-products of the columns' adjusted parts, and per class and vector the `leverage_moments`
    of the clusters' shares of that vector's class total (a part is a vector's negatives or positives: its
    clusters' shares are the same for every column that uses it)."""

    def __init__(self, K: int, S: int, V: int):
        self.part_cross = np.zeros((2, K, S, S))
        self.moments = np.zeros((2, N_MOMENTS, V))

    def add(self, parts, pos_counts, neg_counts, m, n, shares=None) -> None:
        """``shares``: the clusters' shares of each class total (negatives', positives'), if known."""
        self.part_cross += gram(parts)
        if self.moments is None:  # read from another `PartSums` over the same clusters (`LastCutoffColumns`)
            return
        if shares is None:
            with np.errstate(divide="ignore", invalid="ignore"):
                shares = (np.asarray(neg_counts) / np.asarray(n)[None, :],
                          np.asarray(pos_counts) / np.asarray(m)[None, :])
        self.moments += np.stack([leverage_moments(h) for h in shares])


class ClusterAccumulator:
    """Per-cluster influence totals for every column and cutoff, and their cross-products.

    ``pairs``: (positive vector, negative vector) of each column; ``alphas``: the cutoffs that need a
    variance; ``auc`` / ``roc``: (S, K) I(alpha) and ROC(alpha) from the sweep at those cutoffs;
    ``keep_totals``: keep the adjusted totals (for degrees of freedom; not needed for the intersection
    stream of two-way clustering, whose clusters are many and tiny).
    """

    def __init__(self, table: BlockTable, pairs, alphas, auc, roc, keep_totals: bool = True):
        self.table = table
        self.pairs = [(int(i), int(j)) for i, j in pairs]
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.auc = np.asarray(auc, dtype=np.float64)
        self.roc = np.asarray(roc, dtype=np.float64)
        S, K = len(self.pairs), self.alphas.size
        V = table.n_groups + 1
        # per negative vector and cutoff: the block holding the cutoff (the first whose negatives pass it)
        self.boundary = {j: table.boundary(j, self.alphas * table.n[j]) for j in {j for _, j in self.pairs}}
        self.cross = np.zeros((K, S, S))  # CR0: sum_c U_c U_c'
        self.cross_cr2 = np.zeros((K, S, S))
        self.design = PartSums(K, S, V) if keep_totals else None  # df come from the one-way streams only
        self.keep_totals = keep_totals
        self._totals: list[np.ndarray] = []
        self.clusters = 0
        self.clusters_with = np.zeros((2, V), dtype=np.int64)  # clusters holding positives / negatives per vector
        self.rows = 0
        self._carry_key = None
        self._carry = None  # (neg part, pos part, pos counts, neg counts) of the last cluster of the previous batch

    def _cluster_sums(self, codes, n_codes, rows, group, n_pos, n_neg):
        """(K, clusters, S) sums of the rows' influence values: negatives' part and positives' part.

        A row's influence depends on the cutoff only through whether its block is inside, outside or
        the boundary block of the cutoff. So per column the rows are binned by "band" (how many of the
        K boundary blocks lie above the row's block), four sums per (cluster, band) are taken, and
        cumulative sums over bands give every cutoff at once; rows in a boundary block itself (few)
        take the exact path (`row_influence`).
        """
        tab, K, blocks = self.table, self.alphas.size, rows.blocks
        Uneg = np.zeros((K, n_codes, len(self.pairs)))
        Upos = np.zeros((K, n_codes, len(self.pairs)))
        bands, at_boundary, members, roc_of, fpr_of = {}, {}, {}, {}, {}
        for j in {j for _, j in self.pairs}:  # per negative vector: band of every row
            J = self.boundary[j]
            t = np.searchsorted(J, blocks, side="right")
            at_boundary[j] = (t > 0) & (J[np.maximum(t - 1, 0)] == blocks)
            bands[j] = t * n_codes + codes  # band-major: the cumulative sums below run over contiguous rows
            fpr_of[j] = rows.mid_fpr(j)
        for v in {v for pair in self.pairs for v in pair}:
            members[v] = None if v == tab.n_groups else group == v
            roc_of[v] = rows.mid_roc(v)
        size = n_codes * (K + 1)
        for s, (i, j) in enumerate(self.pairs):
            keep = ~at_boundary[j]
            neg = n_neg * keep if members[j] is None else n_neg * (keep & members[j])
            pos = n_pos * keep if members[i] is None else n_pos * (keep & members[i])
            inside = np.stack([np.bincount(bands[j], weights=w, minlength=size).reshape(K + 1, n_codes)
                               for w in (neg * roc_of[i], neg, pos * fpr_of[j], pos)])
            for k in range(1, K + 1):  # cumulative over bands: row k = bands <= k, i.e. inside cutoff k
                inside[:, k] += inside[:, k - 1]
            total = inside[:, K]
            inside = inside[:, :K]
            a, auc, roc = self.alphas[:, None], self.auc[s][:, None], self.roc[s][:, None]
            neg_part = inside[0] + roc * (total[1] - inside[1]) - (auc + roc * (1 - a)) * total[1]
            pos_part = inside[2] + a * (total[3] - inside[3]) - (a - auc) * total[3]
            Uneg[:, :, s] = neg_part / tab.n[j]
            Upos[:, :, s] = -pos_part / tab.m[i]
            edge = np.flatnonzero(at_boundary[j])
            edge_rows = rows.take(edge) if edge.size else None
            for k, alpha in enumerate(self.alphas):
                if edge.size:
                    un, up = row_influence(tab, i, j, alpha, self.auc[s, k], self.roc[s, k], edge_rows,
                                           group[edge], n_pos[edge], n_neg[edge], parts=True)
                    Uneg[k, :, s] += np.bincount(codes[edge], weights=un, minlength=n_codes)
                    Upos[k, :, s] += np.bincount(codes[edge], weights=up, minlength=n_codes)
        return Uneg, Upos

    def _counts(self, codes, n_codes, group, n_pos, n_neg) -> tuple[np.ndarray, np.ndarray]:
        """(clusters, vectors) positives and negatives per cluster: the groups, then pooled."""
        G = self.table.n_groups
        key = codes * G + group
        out = []
        for w in (n_pos, n_neg):
            c = np.bincount(key, weights=w, minlength=n_codes * G).reshape(n_codes, G)
            out.append(np.hstack([c, c.sum(axis=1, keepdims=True)]))
        return out[0], out[1]

    def add(self, keys, scores, group, n_pos, n_neg) -> None:
        """Rows (cluster key, score, group code, n_pos, n_neg); instead of the scores, the rows' blocks
        (`CountRows`) when the table is `BlockTotals`. Within a call rows may come in any order;
        across calls the rows of one cluster must be contiguous (a stream ``ORDER BY cluster``): only the
        last cluster of a batch may continue in the next one."""
        keys = np.asarray(keys)
        if keys.size == 0:
            return
        if keys.dtype.kind in "iu" and keys[-1] - keys[0] == np.count_nonzero(np.diff(keys)) and \
                np.all(keys[1:] >= keys[:-1]):  # running codes of a sorted stream: no sort needed
            codes = (keys - keys[0]).astype(np.intp)
            uniq = np.arange(keys[0], keys[-1] + 1)
        else:
            uniq, codes = np.unique(keys, return_inverse=True)
            codes = codes.ravel()
        group = np.asarray(group, dtype=np.intp)
        n_pos, n_neg = np.asarray(n_pos, dtype=np.float64), np.asarray(n_neg, dtype=np.float64)
        parts = [*self._cluster_sums(codes, uniq.size, self.table.rows(scores), group, n_pos, n_neg),
                 *self._counts(codes, uniq.size, group, n_pos, n_neg)]
        self.rows += keys.size
        if self._carry is not None:
            if keys[0] == self._carry_key:
                for part, carried in zip(parts, self._carry):
                    part[..., codes[0], :] += carried
            else:
                self._flush(*(c[..., None, :] for c in self._carry))
        last = codes[-1]
        self._flush(*(np.delete(p, last, axis=p.ndim - 2) for p in parts))
        self._carry, self._carry_key = [p[..., last, :].copy() for p in parts], keys[-1]

    def _flush(self, Uneg, Upos, pos_counts, neg_counts) -> None:
        U = Uneg + Upos
        self.cross += gram(U)
        parts = cr2_parts(Uneg, Upos, pos_counts, neg_counts, self.pairs, self.table.m, self.table.n)
        if self.design is not None:
            self.design.add(parts, pos_counts, neg_counts, self.table.m, self.table.n)
        adj = parts.sum(axis=0)
        self.cross_cr2 += gram(adj)
        if self.keep_totals:
            self._totals.append(adj)
        self.clusters += U.shape[1]
        self.clusters_with += np.stack([(pos_counts > 0).sum(axis=0), (neg_counts > 0).sum(axis=0)])

    def _finish(self) -> None:
        if self._carry is not None:
            self._flush(*(c[..., None, :] for c in self._carry))
            self._carry = None
        if self.clusters < 2:
            raise AuditInputError(f"a cluster-robust variance needs at least 2 clusters, got {self.clusters}")

    def covariance(self) -> np.ndarray:
        """(K, S, S) CR2 covariance matrices sum_c U~_c U~_c' (U~: leverage-adjusted totals)."""
        self._finish()
        return self.cross_cr2.copy()

    def cr1_covariance(self) -> np.ndarray:
        """(K, S, S) Liang-Zeger covariance C/(C-1) sum_c U_c U_c' (all clusters' factor; for comparison)."""
        self._finish()
        return self.cross * (self.clusters / (self.clusters - 1))

    def totals(self) -> np.ndarray:
        """(K, clusters, S) adjusted per-cluster totals (``keep_totals`` streams only)."""
        self._finish()
        if not self.keep_totals:
            raise ValueError("this stream did not keep its totals")
        K, S = self.alphas.size, len(self.pairs)
        return np.concatenate(self._totals, axis=1) if self._totals else np.zeros((K, 0, S))


class ClusterCrossSums:
    """CR1 / CR2 cross products, the parts' design sums and cluster counts of clusters fed in chunks: what
    `ClusterTotals` and `cluster_moments.ClusterMoments` share."""

    def __init__(self, pairs, K: int, S: int, V: int, design: bool = True):
        self.pairs = pairs
        self.cross, self.cross_cr2 = np.zeros((K, S, S)), np.zeros((K, S, S))
        # the parts' design sums feed df, which come from the one-way streams only (not two-way's intersection)
        self.design = PartSums(K, S, V) if design else None
        self.clusters = 0
        self.clusters_with = np.zeros((2, V), dtype=np.int64)

    def add(self, Uneg, Upos, pos_counts, neg_counts, m, n, factors=None) -> np.ndarray:
        """Clusters' influence parts (K, clusters, S) and class counts (clusters, vectors); returns the clusters'
        adjusted totals (K, clusters, S). ``factors``: `cr2_factors` of these counts, if known."""
        U = Uneg + Upos
        self.cross += gram(U)
        factors = factors or cr2_factors(pos_counts, neg_counts, m, n)
        parts = cr2_parts(Uneg, Upos, pos_counts, neg_counts, self.pairs, m, n, factors)
        if self.design is not None:
            self.design.add(parts, pos_counts, neg_counts, m, n, shares=[h for h, _, _ in factors])
        adj = parts.sum(axis=0)
        self.cross_cr2 += gram(adj)
        self.clusters += U.shape[1]
        self.clusters_with += np.stack([(pos_counts > 0).sum(axis=0), (neg_counts > 0).sum(axis=0)])
        return adj

    def covariance(self) -> np.ndarray:
        return self.cross_cr2.copy()

    def cr1_covariance(self) -> np.ndarray:
        return self.cross * (self.clusters / (self.clusters - 1))


class ClusterTotals(ClusterCrossSums):
    """Finished per-cluster parts fed in chunks of clusters (`prefix_clusters`): the same covariances, totals and
    counts as `ClusterAccumulator` (CR2, CR1, adjusted totals, clusters holding each vector's classes).

    ``contrasts``: the (s, t) differences of two columns whose df will be asked (`compared_contrasts`): their sums and
    each column's are then taken while a chunk is in cache, and no cluster's totals are kept (a catalogue's totals
    are hundreds of MB); the df of any other contrast is then an error. Without, every chunk is kept."""

    def __init__(self, pairs, K: int, S: int, V: int, contrasts=None):
        super().__init__(pairs, K, S, V)
        self._totals: list[np.ndarray] = []
        self.contrasts = None if contrasts is None else [(int(s), int(t)) for s, t in contrasts]
        # per column, then per contrast, and cutoff: nonzero totals, sums of squares and of fourth powers
        rows = S + len(self.contrasts or ())
        self._nonzero, self._squares = np.zeros((rows, K), dtype=np.int64), np.zeros((2, rows, K))
        self._buffer = None  # one chunk's totals column by column, reused when the totals are not kept

    def add(self, Uneg, Upos, pos_counts, neg_counts, m, n, factors=None) -> np.ndarray:
        adj = super().add(Uneg, Upos, pos_counts, neg_counts, m, n, factors)
        S = adj.shape[2]
        if self.contrasts is None:
            chunk = np.ascontiguousarray(np.moveaxis(adj, 2, 0))  # column by column, (S, K, clusters)
            self._totals.append(chunk)
        else:
            if self._buffer is None or self._buffer.shape[1:] != adj.shape[:2]:
                self._buffer = np.empty((S + len(self.contrasts),) + adj.shape[:2])
            chunk = self._buffer
            np.copyto(chunk[:S], np.moveaxis(adj, 2, 0))
            for row, (s, t) in enumerate(self.contrasts, start=S):
                np.subtract(chunk[s], chunk[t], out=chunk[row])
        self._nonzero += np.count_nonzero(chunk, axis=2)
        self._squares[0] += np.einsum("skc,skc->sk", chunk, chunk)
        squared = chunk * chunk
        self._squares[1] += np.einsum("skc,skc->sk", squared, squared)
        return adj

    def totals(self) -> ColumnTotals:
        return ColumnTotals(self._totals, (self._nonzero, *self._squares), self.contrasts)


def compared_contrasts(pairs, pooled: int, compared=None) -> list[tuple[int, int]]:
    """The differences of two columns an audit asks the df of (`compare`, `xauc`), as (s, t) column indices of
    ``pairs``: for each pair of groups (a, b) compared, their AUCs (a, a) and (b, b), xAUC(a, b) and xAUC(b, a),
    and the balanced xAUCs (G, a) and (G, b), (a, G) and (b, G), those of them among ``pairs`` (G = ``pooled``, the
    pooled vector). ``compared``: the group pairs, default those with xAUC columns both ways in ``pairs``."""
    at = {(int(i), int(j)): s for s, (i, j) in enumerate(pairs)}
    G = int(pooled)
    if compared is None:
        compared = [(i, j) for i, j in at if i < j < G and (j, i) in at]
    out = []
    for a, b in compared:
        for x, y in (((a, a), (b, b)), ((a, b), (b, a)), ((G, a), (G, b)), ((a, G), (b, G))):
            if x in at and y in at:
                out.append((at[x], at[y]))
    return out


class ColumnTotals:
    """Every cluster's adjusted totals in chunks of clusters, each (S, K, clusters): a column's (K, clusters) are
    contiguous, so the df of a contrast of a few columns reads only those columns, a cache-sized chunk at a time
    (an audit asks a dozen contrasts of catalogue-sized totals)."""

    def __init__(self, chunks: list[np.ndarray], column_sums=None, contrasts=None):
        """``column_sums``: per column, then per contrast of ``contrasts`` ((s, t): column s minus column t), and
        cutoff, the nonzero totals and the sums of their squares and fourth powers, if known (a column alone or such
        a difference then reads no chunk)."""
        self.chunks, self.column_sums = chunks, column_sums
        self.rows = {}  # (s, t, weight of s) -> the row of column_sums: weights +-1, the same squares either sign
        if column_sums is not None:
            S = column_sums[0].shape[0] - len(contrasts or ())
            for row, (s, t) in [*((s, (s, s)) for s in range(S)), *enumerate(contrasts or (), start=S)]:
                for key in ((s, t), (t, s)):
                    self.rows[(*key, 1.0)] = self.rows[(*key, -1.0)] = row

    def contrast_df(self, weights) -> np.ndarray:
        """`satterthwaite_df` over clusters of sum_s weights[s] * column s, per cutoff."""
        w = np.asarray(weights, dtype=np.float64)
        used = np.flatnonzero(w)
        key = (used[0], used[0], w[used[0]]) if used.size == 1 else \
            (used[0], used[1], w[used[0]]) if used.size == 2 and w[used[0]] == -w[used[1]] else None
        if key in self.rows:  # (the sums of a difference s - t serve t - s: the same squares)
            nonzero, s2, s4 = (sums[self.rows[key]] for sums in self.column_sums)
            return satterthwaite_from_sums(s2, s4, nonzero)
        if used.size and not self.chunks:
            raise AuditInputError(f"the df of this contrast was not summed (a column alone, or the difference of "
                                  f"two compared columns): {w.tolist()}")
        K = self.chunks[0].shape[1] if self.chunks else 0
        s2, s4, nonzero = np.zeros(K), np.zeros(K), np.zeros(K, dtype=np.int64)
        for chunk in self.chunks if used.size else ():
            u = w[used[0]] * chunk[used[0]]
            for s in used[1:]:
                u += w[s] * chunk[s]
            nonzero += np.count_nonzero(u, axis=1)
            s2 += np.einsum("kc,kc->k", u, u)
            u *= u
            s4 += np.einsum("kc,kc->k", u, u)
        return satterthwaite_from_sums(s2, s4, nonzero)


def cluster_covariance(table: BlockTable, pairs, alphas, auc, roc, batches, keep_totals: bool = True):
    """Feed batches of (keys, scores, group codes, n_pos, n_neg); returns the finished `ClusterAccumulator`."""
    acc = ClusterAccumulator(table, pairs, alphas, auc, roc, keep_totals)
    for batch in batches:
        acc.add(*batch)
    acc.covariance()
    return acc


def contrast_df(totals_by_stream, weights, designs=None, pairs=None) -> np.ndarray:
    """Degrees of freedom per cutoff of the contrast sum_s weights[s] * column s: the smaller of the Satterthwaite
    effective clusters of each one-way stream's (K, clusters, S) adjusted totals and, with ``designs`` (each
    stream's `PartSums`) and the columns' (positive, negative) vector ``pairs``, the Welch combination of its parts'
    design df. The first catches clusters whose residuals differ in spread, the second clusters that dominate a
    part (the first is fooled there: see `small_sample`); two-way clustering takes the smaller over its streams."""
    w = np.asarray(weights, dtype=np.float64)
    # kept totals by column (`ColumnTotals`) or, summed on several machines, moments (`cluster_moments.ClusterMoments`)
    dfs = [satterthwaite_df(np.tensordot(t, w, axes=([2], [0])), axis=1) if isinstance(t, np.ndarray)
           else t.contrast_df(w) for t in totals_by_stream]
    for design in designs or ():
        dfs.append(part_design_df(design, w, pairs))
    return np.minimum.reduce(dfs) if len(dfs) > 1 else dfs[0]


def part_design_df(design: PartSums, weights, pairs) -> np.ndarray:
    """(K,) Welch-Satterthwaite df of a contrast from its parts' CR2 variances and Bell-McCaffrey design df."""
    w = np.asarray(weights, dtype=np.float64)
    variances, dfs = [], []
    for cls, side in ((0, 1), (1, 0)):  # negatives: the columns' negative vector; positives: their positive one
        vector_of = np.array([pair[side] for pair in pairs], dtype=np.intp)
        for v in np.unique(vector_of[w != 0]):
            wv = np.where(vector_of == v, w, 0.0)
            variances.append(np.einsum("s,kst,t->k", wv, design.part_cross[cls], wv))
            dfs.append(np.full(design.part_cross.shape[1], float(design_df(design.moments[cls][:, v]))))
    if not variances:
        return np.full(design.part_cross.shape[1], np.nan)
    return welch_df(np.stack(variances), np.stack(dfs))
