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
from fair_pipeline.audit.stats.small_sample import adjusted_totals, satterthwaite_df, t_wald


def _blocks(qcode, s):
    order = np.lexsort((s, qcode))
    qs, ss = qcode[order], s[order]
    new = np.ones(s.size, dtype=bool)
    new[1:] = (qs[1:] != qs[:-1]) | (ss[1:] != ss[:-1])
    block = np.empty(s.size, dtype=np.intp)
    block[order] = np.cumsum(new) - 1
    return block, qs[new]


def row_pairs(qcode, s, codes, y, n_groups: int, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (rows, G, G) pairs t_r[a, b] and wins c_r[a, b] of cell (better in a, worse in b) it takes part in
    (per unit of the row: a row of an aggregate with ``weights`` w stands for w such rows)."""
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
    qtot = np.zeros((int(qcode.max()) + 1, 2 * G))
    np.add.at(qtot, bq, counts)
    above = qtot[bq] - below - counts
    worse, better = slice(0, 2 * G, 2), slice(1, 2 * G, 2)
    t = np.zeros((s.size, G, G))
    c = np.zeros((s.size, G, G))
    rows = np.arange(s.size)
    is_b = y.astype(bool)
    rb, rw = rows[is_b], rows[~is_b]
    t[rb, codes[rb], :] = qtot[bq[block[rb]]][:, worse]
    c[rb, codes[rb], :] = below[block[rb]][:, worse] + 0.5 * counts[block[rb]][:, worse]
    t[rw, :, codes[rw]] = qtot[bq[block[rw]]][:, better]
    c[rw, :, codes[rw]] = above[block[rw]][:, better] + 0.5 * counts[block[rw]][:, better]
    return t, c


def _cell_sums(key, qcode, s, codes, y, G, w):
    """Pairs and wins per (query x cluster) cell with both ends inside it, summed per cluster: (K, G, G) each."""
    qk = np.unique(np.c_[qcode, key], axis=0, return_inverse=True)[1].ravel()
    t, c = row_pairs(qk, s, codes, y, G, w)
    t, c = t * w[:, None, None], c * w[:, None, None]
    n_keys = int(key.max()) + 1
    inside_t = np.zeros((n_keys, G, G))
    inside_c = np.zeros((n_keys, G, G))
    np.add.at(inside_t, key, t)
    np.add.at(inside_c, key, c)
    return inside_t / 2, inside_c / 2  # each inside pair was counted at both of its ends


class PairwiseClusters:
    """Per-cluster totals of every cell's ratio, for one-way (items or queries) or two-way clustering."""

    def __init__(self, clusters, qcode, s, codes, y, n_groups: int, weights=None):
        keys = cluster_keys(clusters, s.size)
        self.G = n_groups
        w = np.ones(s.size) if weights is None else np.asarray(weights, dtype=np.float64)
        t, c = row_pairs(qcode, s, codes, y, n_groups, w)
        self.t, self.c = t * w[:, None, None], c * w[:, None, None]  # the row's share of all pairs
        self.streams = [(1.0, key) for key in keys]
        if len(keys) == 2:
            cross = np.unique(np.c_[keys[0], keys[1]], axis=0, return_inverse=True)[1].ravel()
            self.streams.append((-1.0, cross))
        self.n_clusters = [int(key.max()) + 1 for key in keys]
        self._inside = [_cell_sums(key, qcode, s, codes, y, n_groups, w) for _, key in self.streams]
        self._sums = []
        for (_, key), (in_t, in_c) in zip(self.streams, self._inside):
            n = int(key.max()) + 1
            T = np.zeros((n, self.G, self.G))
            C = np.zeros((n, self.G, self.G))
            np.add.at(T, key, self.t)
            np.add.at(C, key, self.c)
            self._sums.append((T - in_t, C - in_c))  # pairs touching each cluster, each once

    def contrast(self, terms) -> tuple[float, float, float, float]:
        """Estimate, CR2 variance, CR1 variance and df of sum_terms w x (pooled ratio of the term's cells).

        ``terms``: [(cells, w)], cells a list of (better group, worse group); e.g. a gap A_{a>b} - A_{b>a} is
        [([(a, b)], 1), ([(b, a)], -1)] and the marginal A_{a>:} is [([(a, 0), ..., (a, G-1)], 1)]."""
        tot_T = self.t.sum(axis=0) / 2
        tot_C = self.c.sum(axis=0) / 2
        ratios = []
        for cells, w in terms:
            idx = tuple(np.array(cells, dtype=np.intp).T)
            Tt, Ct = tot_T[idx].sum(), tot_C[idx].sum()
            if Tt <= 0:
                return np.nan, np.nan, np.nan, np.nan
            ratios.append((idx, w, Ct / Tt, Tt))
        est = float(sum(w * A for _, w, A, _ in ratios))
        var, var_cr1, dfs = 0.0, 0.0, []
        for (sign, _), (T, C) in zip(self.streams, self._sums):
            parts, shares = [], []
            for idx, w, A, Tt in ratios:
                Tk, Ck = T[(slice(None),) + idx].sum(axis=1), C[(slice(None),) + idx].sum(axis=1)
                parts.append(w * (Ck - A * Tk) / Tt)
                shares.append(np.minimum(Tk / Tt, 1.0))
            raw = np.sum(parts, axis=0)
            adj = adjusted_totals(np.array(parts), np.array(shares))
            var += sign * float(np.sum(adj * adj))
            n = np.count_nonzero(raw)
            var_cr1 += sign * float(np.sum(raw * raw)) * (n / (n - 1) if n > 1 else np.nan)
            if sign > 0:
                dfs.append(float(satterthwaite_df(adj)))
        return est, max(var, 0.0), max(var_cr1, 0.0), min(dfs)


def _apply(frame, index, est, var, var_cr1, df, confidence, null):
    w = t_wald(est, var, df, confidence, null)
    for name in ("se", "ci_low", "ci_high", "df"):
        frame.loc[index, name] = float(w[name])
    if "z" in frame.columns:
        frame.loc[index, "z"], frame.loc[index, "p_value"] = float(w["z"]), float(w["p_value"])
    frame.loc[index, "variance"], frame.loc[index, "variance_cr1"] = var, var_cr1
    frame.loc[index, "estimable"] = bool(frame.loc[index, "estimable"]) and bool(np.isfinite(var) and np.isfinite(df))


def clustered_tables(pc: PairwiseClusters, levels, matrix, marginals, overall, gaps, estimand: str,
                     confidence: float):
    """Replace the query-clustered SEs of ``matrix``, ``marginals``, ``overall`` and ``gaps`` by ``pc``'s (CR2,
    t with the effective number of clusters); every table gains ``df``, ``variance``, ``variance_cr1``,
    ``n_clusters`` and ``variance_estimand``."""
    G = len(levels)
    code = {g: i for i, g in enumerate(levels)}
    for frame in (matrix, marginals, overall, gaps):
        for name in ("df", "variance", "variance_cr1"):
            frame[name] = np.nan
    for i, row in matrix.iterrows():
        a, b = code[row["group_better"]], code[row["group_worse"]]
        _apply(matrix, i, *pc.contrast([([(a, b)], 1.0)]), confidence, 0.5)
    for i, row in marginals.iterrows():
        g = code[row["group"]]
        cells = [(g, b) for b in range(G)] if row["role"] == "better" else [(a, g) for a in range(G)]
        _apply(marginals, i, *pc.contrast([(cells, 1.0)]), confidence, 0.5)
    _apply(overall, 0, *pc.contrast([([(a, b) for a in range(G) for b in range(G)], 1.0)]), confidence, 0.5)
    for i, row in gaps.iterrows():
        a, b = code[row["group_a"]], code[row["group_b"]]
        _apply(gaps, i, *pc.contrast([([(a, b)], 1.0), ([(b, a)], -1.0)]), confidence, 0.0)
    for frame in (matrix, marginals, overall, gaps):
        frame["n_clusters"] = min(pc.n_clusters)
        frame["variance_estimand"] = estimand
