"""Item-, query- and two-way clustered variances of within-query pairwise accuracies (U-statistics over pairs).

A pairwise accuracy is a ratio over pairs, A = sum_pairs h / T (h = 1 when the better item scores higher, 1/2 on
ties), so A_hat - A ~= sum_pairs e_p with e_p = (h_p - A) / T. A pair depends on its two items and its query. The
cluster-robust total of a cluster k is the sum of e_p over the pairs touching k (Aronow, Samii & Assenova's dyadic
variance for items, which sit at both ends of pairs): per row r (one item in one query), psi_r = (c_r - A t_r) / T,
with t_r its pairs and c_r those it wins (as the better item) or loses (as the worse one), so every pair is counted
once at each end; a cluster's total is the sum of its rows' psi minus the pairs with both ends inside it (a query
holds all its pairs: its total is then (C_q - A T_q) / T, the linearization of the query-clustered ratio). The
variance is the sum of squared totals, CR2-scaled by each cluster's share of the pairs (`small_sample`), and for
two-way clustering V_item + V_query - V_item x query (Cameron, Gelbach & Miller). Its estimand: new items (and
queries) drawn like these; query clustering alone covers "these items, new queries".
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.clustered import cluster_keys
from fair_pipeline.audit.stats.pairwise_moments import Contrasts, PairwiseMoments, pairwise_contrasts
from fair_pipeline.audit.stats.small_sample import t_wald


def sum_by(key, values, n_keys: int) -> np.ndarray:
    """values (rows, ...) summed per key 0..n_keys-1 (a bincount per column: much faster than np.add.at)."""
    flat = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    sums = [np.bincount(key, weights=flat[:, j], minlength=n_keys) for j in range(flat.shape[1])]
    return np.stack(sums, axis=1).reshape((n_keys,) + np.shape(values)[1:])


def pair_codes(a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense codes of the distinct (a, b) pairs of two non-negative integer codes: (a of each pair, b of each pair,
    each row's pair)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    width = int(b.max()) + 1 if b.size else 1
    pairs, inverse = np.unique(a * width + b, return_inverse=True)
    return pairs // width, pairs % width, inverse.ravel()


def query_score_order(qcode, s) -> np.ndarray:
    """Rows ordered by (query, score ascending), equal pairs together: an unstable sort of the scores, then a stable
    one of their queries (~2x faster than ``np.lexsort((s, qcode))``; rows tied on both may come in another order,
    which no sum over a (query, score) block sees)."""
    by_score = np.argsort(s)
    return by_score[np.argsort(np.asarray(qcode)[by_score], kind="stable")]


def score_blocks(qcode, s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows in (query, score ascending) order: that order, each sorted row's (query, score) block id and each
    block's query."""
    order = query_score_order(qcode, s)
    qs, ss = qcode[order], s[order]
    new = np.ones(s.size, dtype=bool)
    new[1:] = (qs[1:] != qs[:-1]) | (ss[1:] != ss[:-1])
    return order, np.cumsum(new) - 1, qs[new]


def _blocks(qcode, s):
    order, sorted_block, bq = score_blocks(qcode, s)
    block = np.empty(s.size, dtype=np.intp)
    block[order] = sorted_block
    return block, bq


def row_sides(qcode, s, codes, y, n_groups: int, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Per row (rows, G): the pairs it takes part in and the ones it wins, by the other end's group. A row only
    pairs with rows of the other label, so of its (G, G) table (`row_pairs`) only one line is nonzero: row
    ``codes[r]`` (the better group) for a label-1 row, column ``codes[r]`` for a label-0 row; that line is what is
    returned (per unit of the row: a row of an aggregate with ``weights`` w stands for w such rows)."""
    G = n_groups
    block, bq = _blocks(qcode, s)
    B = bq.size
    cell = codes * 2 + y.astype(np.intp)  # 2g: worse of g, 2g + 1: better of g
    counts = np.bincount(block * 2 * G + cell, weights=weights, minlength=B * 2 * G).reshape(B, 2 * G)
    counts = counts.astype(np.float64)
    excl = np.cumsum(counts, axis=0) - counts
    first = np.flatnonzero(np.r_[True, bq[1:] != bq[:-1]])
    start = np.repeat(first, np.diff(np.r_[first, B]))
    below = excl - excl[start]  # same query, strictly lower score
    qtot = sum_by(bq, counts, int(qcode.max()) + 1)
    above = qtot[bq] - below - counts
    worse, better = slice(0, 2 * G, 2), slice(1, 2 * G, 2)
    t, c = np.empty((s.size, G)), np.empty((s.size, G))
    is_b = y.astype(bool)
    for rows, other, wins in ((np.flatnonzero(is_b), worse, below), (np.flatnonzero(~is_b), better, above)):
        b = block[rows]
        t[rows] = qtot[bq[b]][:, other]
        c[rows] = wins[b][:, other] + 0.5 * counts[b][:, other]
    return t, c


def inside_sides(cell, s, codes, y, n_groups: int, w) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`row_sides` inside each row's cell (both ends in it), per unit weight times ``w``, for the rows of cells
    holding more than one row: (those rows, their t, c); a cell of one row holds no pair (in a click log nearly
    every item x query cell), so only the few repeated cells are sorted and counted."""
    cell = np.asarray(cell, dtype=np.int64)
    rows = np.flatnonzero(np.bincount(cell)[cell] > 1) if cell.size else np.zeros(0, dtype=np.intp)
    if not rows.size:
        return rows, np.zeros((0, n_groups)), np.zeros((0, n_groups))
    local = np.unique(cell[rows], return_inverse=True)[1].ravel()  # same order as the cell codes: same sums
    t, c = row_sides(local, s[rows], codes[rows], y[rows], n_groups, w[rows])
    return rows, t * w[rows, None], c * w[rows, None]


def less_half_inside(out_t, out_c, key, codes, y, inside) -> tuple[np.ndarray, np.ndarray]:
    """Per key (``out_t``, ``out_c`` (keys, G, G), changed in place) less half the pairs inside its rows' cells
    (`inside_sides`), summed over the few keys holding such rows only."""
    rows, in_t, in_c = inside
    if rows.size:
        keys, local = np.unique(np.asarray(key)[rows], return_inverse=True)
        part_t, part_c = sum_sides(local.ravel(), keys.size, codes[rows], y[rows], in_t, in_c)
        out_t[keys] -= part_t / 2
        out_c[keys] -= part_c / 2
    return out_t, out_c


def is_function_of(a, b) -> bool:
    """Does each value of ``b`` (non-negative integer codes) come with a single value of ``a``?"""
    seen = np.empty(int(b.max()) + 1 if b.size else 0, dtype=np.asarray(a).dtype)
    seen[b] = a  # (one of each code's values)
    return bool(np.array_equal(seen[b], a))


def sum_sides(key, n_keys: int, codes, y, *values) -> list[np.ndarray]:
    """Per key (n_keys, G, G) sums of `row_sides` lines (``values``: (rows, G) each) placed in their (better group,
    worse group) cells: a bincount per group of the other end and label, not per cell of every row."""
    G = values[0].shape[1]
    out = [np.zeros((n_keys, G, G)) for _ in values]
    is_b = np.asarray(y, dtype=bool)
    for rows, flip in ((np.flatnonzero(is_b), False), (np.flatnonzero(~is_b), True)):
        idx = key[rows] * G + codes[rows]  # (key, group of the row's own end)
        for total, v in zip(out, values):
            part = np.stack([np.bincount(idx, v[rows, h], minlength=n_keys * G) for h in range(G)], axis=1)
            part = part.reshape(n_keys, G, G)  # [key, own group, other end's group]
            total += part.transpose(0, 2, 1) if flip else part
    return out


def row_pairs(qcode, s, codes, y, n_groups: int, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (rows, G, G) pairs t_r[a, b] and wins c_r[a, b] of cell (better in a, worse in b) it takes part in
    (per unit of the row: a row of an aggregate with ``weights`` w stands for w such rows); `row_sides` expanded."""
    sides = row_sides(qcode, s, codes, y, n_groups, weights)
    return tuple(sum_sides(np.arange(s.size), s.size, codes, y, *sides))


class PairwiseClusters:
    """Per-cluster totals of every cell's ratio, for one-way (items or queries) or two-way clustering.

    A cluster's total is its rows' pairs minus half the pairs with both ends inside it, i.e. inside one of its
    (query x cluster) cells, computed once per partition: a stream with one key per query (e.g. the query ids) has
    the queries as cells, so half its pairs are inside; two-way's item x query stream then has the item stream's."""

    def __init__(self, clusters, qcode, s, codes, y, n_groups: int, weights=None):
        keys = cluster_keys(clusters, s.size)
        self.G = n_groups
        w = np.ones(s.size) if weights is None else np.asarray(weights, dtype=np.float64)
        t, c = row_sides(qcode, s, codes, y, n_groups, w)
        t *= w[:, None]  # the row's share of all pairs
        c *= w[:, None]
        per_query = [is_function_of(key, qcode) for key in keys]  # one key per query: its cells are the queries
        cells = [None if one else pair_codes(qcode, key)[2] for key, one in zip(keys, per_query)]
        self.streams = [(1.0, key) for key in keys]
        if len(keys) == 2:
            # item x query clusters; when the query keys are the queries themselves, the item stream's cells
            same = per_query[1] and cells[0] is not None and is_function_of(qcode, keys[1])
            self.streams.append((-1.0, cells[0] if same else pair_codes(keys[0], keys[1])[2]))
            # their cells (query x item x query key) are the item stream's when the query key is one per query
            cells.append(cells[0] if per_query[1] else pair_codes(qcode, self.streams[2][1])[2])
            per_query.append(per_query[0] and per_query[1])
        self.n_clusters = [int(key.max()) + 1 for key in keys]
        T, C = sum_sides(np.zeros(s.size, dtype=np.intp), 1, codes, y, t, c)
        self.total_T, self.total_C = T[0] / 2, C[0] / 2
        self._sums, insides = [], {}
        for (_, key), cell, one in zip(self.streams, cells, per_query):
            n_keys = int(key.max()) + 1  # pairs touching each cluster, each once (pairs inside counted at both ends)
            if one:  # every pair of the cluster's queries is inside it
                out_t, out_c = sum_sides(key, n_keys, codes, y, t, c)
                self._sums.append((out_t - out_t / 2, out_c - out_c / 2))
                continue
            if id(cell) not in insides:
                insides[id(cell)] = inside_sides(cell, s, codes, y, n_groups, w)
            out_t, out_c = sum_sides(key, n_keys, codes, y, t, c)
            self._sums.append(less_half_inside(out_t, out_c, key, codes, y, insides[id(cell)]))

    def moments(self, contrasts: Contrasts) -> PairwiseMoments:
        """The `PairwiseMoments` of ``contrasts`` over every cluster of every stream."""
        out = PairwiseMoments.empty(contrasts, self.total_T, self.total_C,
                                    [sign for sign, _ in self.streams])
        for i, (T, C) in enumerate(self._sums):
            out.add(i, T, C)
        return out

    def contrast(self, terms) -> tuple[float, float, float, float]:
        """Estimate, CR2 variance, CR1 variance and df of sum_terms w x (pooled ratio of the term's cells).

        ``terms``: [(cells, w)], cells a list of (better group, worse group); e.g. a gap A_{a>b} - A_{b>a} is
        [([(a, b)], 1), ([(b, a)], -1)] and the marginal A_{a>:} is [([(a, 0), ..., (a, G-1)], 1)]."""
        r = self.moments(Contrasts.of(self.G, [("contrast", terms)])).results()
        return tuple(float(r[k][0]) for k in ("estimate", "variance", "variance_cr1", "df"))


def _apply(frame, index, r: dict, j: int, dims, confidence, null):
    w = t_wald(r["estimate"][j], r["variance"][j], r["df"][j], confidence, null)
    for name in ("se", "ci_low", "ci_high", "df"):
        frame.loc[index, name] = float(w[name])
    if "z" in frame.columns:
        frame.loc[index, "z"], frame.loc[index, "p_value"] = float(w["z"]), float(w["p_value"])
    frame.loc[index, "variance"], frame.loc[index, "variance_cr1"] = r["variance"][j], r["variance_cr1"][j]
    for name, count in zip(dims, r["clusters"][:, j]):
        frame.loc[index, name] = int(count)
    frame.loc[index, "n_clusters"] = int(r["clusters"][:, j].min())
    ok = bool(np.isfinite(r["variance"][j]) and np.isfinite(r["df"][j]))
    frame.loc[index, "estimable"] = bool(frame.loc[index, "estimable"]) and ok


def clustered_tables(moments: PairwiseMoments, levels, matrix, marginals, overall, gaps, estimand: str,
                     confidence: float, dims=("n_clusters",)):
    """Replace the query-clustered SEs of ``matrix``, ``marginals``, ``overall`` and ``gaps`` by the clustered ones
    of ``moments`` (made with `pairwise_contrasts`; CR2, t with the effective number of clusters ``df``); every
    table gains ``df``, ``variance``, ``variance_cr1``, the clusters holding each figure's pairs per clustering
    dimension (``dims``, e.g. ``n_items``, ``n_queries``), their minimum ``n_clusters`` and ``variance_estimand``."""
    r = moments.results()
    index = {name: j for j, name in enumerate(moments.contrasts.names)}
    code = {g: i for i, g in enumerate(levels)}
    for frame in (matrix, marginals, overall, gaps):
        for name in ("df", "variance", "variance_cr1", *dims, "n_clusters"):
            frame[name] = np.nan
    for i, row in matrix.iterrows():
        _apply(matrix, i, r, index["matrix", code[row["group_better"]], code[row["group_worse"]]], dims, confidence, 0.5)
    for i, row in marginals.iterrows():
        _apply(marginals, i, r, index[row["role"], code[row["group"]]], dims, confidence, 0.5)
    _apply(overall, 0, r, index["overall",], dims, confidence, 0.5)
    for i, row in gaps.iterrows():
        _apply(gaps, i, r, index["gap", code[row["group_a"]], code[row["group_b"]]], dims, confidence, 0.0)
    for frame in (matrix, marginals, overall, gaps):
        for name in (*dims, "n_clusters"):
            frame[name] = frame[name].astype("Int64")
        frame["variance_estimand"] = estimand
