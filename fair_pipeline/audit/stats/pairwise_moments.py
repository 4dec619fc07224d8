"""Clustered variances of pairwise accuracies from fixed-size moments over clusters (mergeable across machines).

`pairwise_clustered` sums, per cluster k of a stream (items, queries, or item x query cells), the pairs T_k[a, b]
touching k and the ones ranked correctly C_k[a, b]. Every reported figure is a contrast sum_j w_j A_j of pooled
ratios A_j = sum_{cells of j} C / sum_{cells of j} T (a cell, a marginal, the overall accuracy, a cross-group gap).
Its CR2 variance needs, per stream, only the sums over clusters of the contrast's squared and fourth-power adjusted
totals, its squared raw totals and two counts (`MOMENTS`): a (contrasts, 6) array whatever the number of clusters,
and per ratio the leverage moments of the clusters' shares of its pairs with its CR2 variance (`TERM_MOMENTS`), for
the Bell-McCaffrey design df the audit's other clustered CIs also take (`small_sample.parts_design_df`). Executors
that each hold some clusters hand the driver these few numbers, and the driver merges them by addition.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from fair_pipeline.audit.stats.small_sample import (
    N_MOMENTS,
    design_df,
    leverage_factor,
    leverage_moments,
    satterthwaite_from_sums,
    welch_df,
)

MOMENTS = ("adj_sq", "adj_fourth", "adj_nonzero", "raw_sq", "raw_nonzero", "clusters_with_pairs")
TERM_MOMENTS = N_MOMENTS + 1  # `small_sample.leverage_moments` of the shares, then the ratio's CR2 variance
# clusters per step: bounds the (clusters, terms) temporaries; the products with the masks and weights run on one BLAS
# thread (`stream_moments`): at these sizes OpenBLAS's threads mostly spin, and on a loaded machine their waits cost
# ~10x the products' CPU time (measured)
CHUNK = 1 << 11


@dataclass(frozen=True)
class Contrasts:
    """Contrasts sum_j w_j A_j of pooled ratios over (better group, worse group) cells of a G x G table.

    ``masks``: (G*G, terms) 0/1, which cells each ratio pools; ``weights``: (terms, contrasts)."""

    n_groups: int
    masks: np.ndarray
    weights: np.ndarray
    names: tuple

    @classmethod
    def of(cls, n_groups: int, contrasts: list[tuple[object, list[tuple[list[tuple[int, int]], float]]]]) -> Contrasts:
        """From [(name, [(cells, w), ...]), ...], cells a list of (better group, worse group)."""
        masks, weights = [], []
        for j, (_, terms) in enumerate(contrasts):
            for cells, w in terms:
                m = np.zeros((n_groups, n_groups))
                m[tuple(np.array(cells, dtype=np.intp).T)] = 1.0
                masks.append(m.ravel())
                weights.append((len(masks) - 1, j, w))
        W = np.zeros((len(masks), len(contrasts)))
        for term, j, w in weights:
            W[term, j] = w
        return cls(n_groups, np.array(masks).T.reshape(n_groups * n_groups, -1), W, tuple(n for n, _ in contrasts))


def pairwise_contrasts(n_groups: int) -> Contrasts:
    """Every figure of the pairwise tables: cells ("matrix", a, b), marginals ("better"/"worse", g),
    ("overall",) and cross-group gaps ("gap", a, b) = A_{a>b} - A_{b>a} for a < b."""
    G = n_groups
    out = [(("matrix", a, b), [([(a, b)], 1.0)]) for a in range(G) for b in range(G)]
    out += [(("better", g), [([(g, b) for b in range(G)], 1.0)]) for g in range(G)]
    out += [(("worse", g), [([(a, g) for a in range(G)], 1.0)]) for g in range(G)]
    out.append((("overall",), [([(a, b) for a in range(G) for b in range(G)], 1.0)]))
    out += [(("gap", a, b), [([(a, b)], 1.0), ([(b, a)], -1.0)]) for a in range(G) for b in range(a + 1, G)]
    return Contrasts.of(G, out)


def stream_moments(T_k: np.ndarray, C_k: np.ndarray, tot_T: np.ndarray, tot_C: np.ndarray,
                   contrasts: Contrasts, variance_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(contrasts, 6) `MOMENTS` and (ratios, 8) `TERM_MOMENTS` of some clusters of one stream: ``T_k``, ``C_k``
    (clusters, G, G) pairs touching each cluster (each pair once) and the correct ones; ``tot_T``, ``tot_C`` (G, G)
    the totals over all data. ``variance_only``: only the sums the variances take (adj_sq, raw_sq, raw_nonzero),
    the rest left 0: a subtracted stream (two-way's item x query cells, about one per row) adds no df and no
    cluster counts (`PairwiseMoments.results`)."""
    G2 = contrasts.n_groups ** 2
    Tt = np.asarray(tot_T, dtype=np.float64).reshape(G2) @ contrasts.masks
    Ct = np.asarray(tot_C, dtype=np.float64).reshape(G2) @ contrasts.masks
    with np.errstate(divide="ignore", invalid="ignore"):
        A = np.where(Tt > 0, Ct / Tt, np.nan)
    denom = np.where(Tt > 0, Tt, np.nan)
    T_k = np.asarray(T_k, dtype=np.float64).reshape(-1, G2)
    C_k = np.asarray(C_k, dtype=np.float64).reshape(-1, G2)
    out = np.zeros((contrasts.weights.shape[1], len(MOMENTS)))
    terms = np.zeros((contrasts.weights.shape[0], TERM_MOMENTS))
    used = (contrasts.weights != 0).astype(np.float64)
    with threadpool_limits(limits=1, user_api="blas"):
        _chunk_moments(T_k, C_k, A, denom, contrasts, used, out, terms, variance_only)
    return out, terms


def _chunk_moments(T_k, C_k, A, denom, contrasts: Contrasts, used, out, terms, variance_only: bool) -> None:
    """`stream_moments`' sums over clusters, ``CHUNK`` clusters at a time, into ``out`` and ``terms``."""
    for lo in range(0, T_k.shape[0], CHUNK):
        Tk, Ck = T_k[lo:lo + CHUNK] @ contrasts.masks, C_k[lo:lo + CHUNK] @ contrasts.masks
        with np.errstate(divide="ignore", invalid="ignore"):
            part = (Ck - A * Tk) / denom
            shares = np.minimum(Tk / denom, 1.0)
            scaled = np.where(part == 0.0, 0.0, part * leverage_factor(shares))
        adj, raw = scaled @ contrasts.weights, part @ contrasts.weights
        adj2, raw2 = adj * adj, raw * raw
        out[:, 0] += adj2.sum(axis=0)
        out[:, 3] += raw2.sum(axis=0)
        out[:, 4] += np.count_nonzero(raw, axis=0)
        if variance_only:
            continue
        terms[:, :N_MOMENTS] += leverage_moments(np.nan_to_num(shares)).T
        terms[:, N_MOMENTS] += (scaled * scaled).sum(axis=0)
        out[:, 1] += (adj2 * adj2).sum(axis=0)
        out[:, 2] += np.count_nonzero(adj, axis=0)
        out[:, 5] += np.count_nonzero((Tk > 0).astype(np.float64) @ used, axis=0)


@dataclass
class PairwiseMoments:
    """Totals (G, G) and per-stream moments: everything the clustered pairwise tables need, mergeable.

    ``signs``: +1 per clustering dimension, -1 for their intersection (two-way: V_item + V_query - V_cell)."""

    contrasts: Contrasts
    tot_T: np.ndarray
    tot_C: np.ndarray
    signs: tuple
    moments: list = field(default_factory=list)  # per stream: (contrasts, 6) MOMENTS
    terms: list = field(default_factory=list)  # per stream: (ratios, 8) TERM_MOMENTS

    @classmethod
    def empty(cls, contrasts: Contrasts, tot_T, tot_C, signs) -> PairwiseMoments:
        shape, term_shape = (contrasts.weights.shape[1], len(MOMENTS)), (contrasts.weights.shape[0], TERM_MOMENTS)
        return cls(contrasts, np.asarray(tot_T, float), np.asarray(tot_C, float), tuple(signs),
                   [np.zeros(shape) for _ in signs], [np.zeros(term_shape) for _ in signs])

    def add(self, stream: int, T_k, C_k) -> PairwiseMoments:
        """Add clusters of stream ``stream`` (disjoint from the ones already added); a subtracted stream's only as
        far as its variance needs them (`stream_moments`)."""
        return self.add_moments(stream, *stream_moments(T_k, C_k, self.tot_T, self.tot_C, self.contrasts,
                                                        variance_only=self.signs[stream] < 0))

    def add_moments(self, stream: int, moments, terms) -> PairwiseMoments:
        """Add `stream_moments` computed elsewhere (e.g. on an executor) for clusters of stream ``stream``."""
        self.moments[stream] = self.moments[stream] + moments
        self.terms[stream] = self.terms[stream] + terms
        return self

    def results(self) -> dict[str, np.ndarray]:
        """Per contrast: estimate, CR2 ``variance``, ``variance_cr1``, Satterthwaite ``df`` (the smaller over the
        clustering dimensions) and the clusters holding its pairs per dimension (``clusters``: (dims, contrasts))."""
        c = self.contrasts
        G2 = c.n_groups ** 2
        Tt, Ct = self.tot_T.reshape(G2) @ c.masks, self.tot_C.reshape(G2) @ c.masks
        with np.errstate(divide="ignore", invalid="ignore"):
            A = np.where(Tt > 0, Ct / Tt, np.nan)
        valid = ((Tt[:, None] > 0) | (c.weights == 0)).all(axis=0)
        est = np.where(valid, np.nan_to_num(A) @ c.weights, np.nan)
        var, var_cr1, dfs, clusters = np.zeros(est.size), np.zeros(est.size), [], []
        for sign, m, terms in zip(self.signs, self.moments, self.terms):
            var += sign * m[:, 0]
            n = m[:, 4]
            with np.errstate(divide="ignore", invalid="ignore"):
                var_cr1 += sign * m[:, 3] * np.where(n > 1, n / (n - 1), np.nan)
            if sign > 0:  # the smaller of the effective clusters and the ratios' Welch-combined design df
                design = welch_df(terms[:, N_MOMENTS, None] * c.weights ** 2, design_df(terms[:, :N_MOMENTS].T)[:, None])
                dfs.append(np.fmin(satterthwaite_from_sums(m[:, 0], m[:, 1], m[:, 2]), design))
                clusters.append(m[:, 5])
        nan = ~valid
        return {"estimate": est, "variance": np.where(nan, np.nan, np.maximum(var, 0.0)),
                "variance_cr1": np.where(nan, np.nan, np.maximum(var_cr1, 0.0)),
                "df": np.where(nan, np.nan, np.min(dfs, axis=0)), "clusters": np.array(clusters)}

