"""One pass over the (distinct score x group) grid feeding every ROC-type audit statistic.

Each statistic is a two-sample U-statistic whose positives come from some groups and whose
negatives come from some (other) groups, so a "column" is a pair of 0/1 group-selection vectors:

* per-group truncated AUC:  positives of g vs negatives of g
* overall truncated AUC:    all positives vs all negatives
* xAUC(a, b) (Kallus & Zhou, Def. 2):  positives of a vs negatives of b
* balanced xAUC_0(g) = P(R_1 > R_0^g):  all positives vs negatives of g
* balanced xAUC_1(g) = P(R_1^g > R_0):  positives of g vs all negatives

Balanced xAUCs of two groups share a sample (all positives, or all negatives), so their
difference needs the covariance of the shared sample's structural components (DeLong et al.
1988); we accumulate the needed cross-moments in the same pass. Chunks of blocks arrive in
descending score order, from memory or from a SQL cursor.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .sweep import RocSweep

CHUNK_BLOCKS = 1 << 18  # blocks per update: bounds the temporary (B x columns) arrays


@dataclass
class Columns:
    names: list = field(default_factory=list)  # (kind, a, b)
    pos_sel: list = field(default_factory=list)
    neg_sel: list = field(default_factory=list)

    def add(self, kind, a, b, pos_sel, neg_sel) -> int:
        self.names.append((kind, a, b))
        self.pos_sel.append(pos_sel)
        self.neg_sel.append(neg_sel)
        return len(self.names) - 1


def build_columns(n_groups: int, xauc: bool) -> Columns:
    cols = Columns()
    eye = np.eye(n_groups)
    ones = np.ones(n_groups)
    for g in range(n_groups):
        cols.add("group", g, g, eye[g], eye[g])
    cols.add("overall", None, None, ones, ones)
    if xauc:
        for a in range(n_groups):
            for b in range(n_groups):
                if a != b:
                    cols.add("xauc", a, b, eye[a], eye[b])
        for g in range(n_groups):
            cols.add("xauc0", g, None, ones, eye[g])
        for g in range(n_groups):
            cols.add("xauc1", g, None, eye[g], ones)
    return cols


class GridAudit:
    """Streaming accumulator: ``update(pos, neg)`` with (B, G) count chunks, then ``result()``."""

    def __init__(self, n_pos, n_neg, alphas, xauc: bool = True):
        self.n_pos = np.asarray(n_pos, dtype=np.float64)
        self.n_neg = np.asarray(n_neg, dtype=np.float64)
        G = self.n_pos.size
        self.cols = build_columns(G, xauc)
        self.P = np.array(self.cols.pos_sel)  # (S, G)
        self.N = np.array(self.cols.neg_sel)
        m = self.P @ self.n_pos
        n = self.N @ self.n_neg
        # columns with an empty class still run (zero counts); they are flagged later
        self.sweep = RocSweep(alphas, np.maximum(m, 1), np.maximum(n, 1))
        self.m, self.n = m, n
        self.xauc = xauc
        self.idx0 = [i for i, c in enumerate(self.cols.names) if c[0] == "xauc0"]
        self.idx1 = [i for i, c in enumerate(self.cols.names) if c[0] == "xauc1"]
        self.cross_pos = np.zeros((G, G))  # sum over all positives of W_a W_b (xAUC_0 columns)
        self.cross_neg = np.zeros((G, G))  # sum over all negatives of V_a V_b (xAUC_1 columns)

    def update(self, pos: np.ndarray, neg: np.ndarray) -> None:
        pos = np.asarray(pos, dtype=np.float64)
        neg = np.asarray(neg, dtype=np.float64)
        for lo in range(0, pos.shape[0], CHUNK_BLOCKS):
            p, q = pos[lo:lo + CHUNK_BLOCKS], neg[lo:lo + CHUNK_BLOCKS]
            V, W = self.sweep.update(p @ self.P.T, q @ self.N.T)
            if self.xauc:
                p_all, q_all = p.sum(axis=1), q.sum(axis=1)
                W0 = W[:, self.idx0]
                V1 = V[:, self.idx1]
                self.cross_pos += (W0 * p_all[:, None]).T @ W0
                self.cross_neg += (V1 * q_all[:, None]).T @ V1

    def result(self) -> dict:
        out = self.sweep.result()
        out["columns"] = self.cols.names
        out["m"], out["n"] = self.m, self.n
        if self.xauc:
            out["balanced_cov"] = self._balanced_cov(out)
        return out

    def _balanced_cov(self, out: dict) -> dict:
        """Covariance matrices of (xAUC_0(g))_g and of (xAUC_1(g))_g at FPR cutoff 1."""
        k1 = int(np.flatnonzero(self.sweep.alphas == 1.0)[0])
        covs = {}
        for kind, idx, cross, shared in (("xauc0", self.idx0, self.cross_pos, "pos"),
                                         ("xauc1", self.idx1, self.cross_neg, "neg")):
            var = out["variance"][idx, k1]
            total = (self.m if shared == "pos" else self.n)[idx[0]]
            if shared == "pos":  # mean FPR seen by a positive = 1 - xAUC_0
                mean = 1.0 - out["auc"][idx, k1]
            else:  # mean ROC seen by a negative = xAUC_1
                mean = out["auc"][idx, k1]
            with np.errstate(divide="ignore", invalid="ignore"):
                cov = (cross / total - np.outer(mean, mean)) / (total - 1)
            np.fill_diagonal(cov, var)
            covs[kind] = cov
        return covs


CURVE_GRID = np.linspace(0.0, 1.0, 101)  # FPR points at which ROC / xROC curves are reported


def sweep_alphas(cutoffs: np.ndarray, curves: bool) -> np.ndarray:
    """Cutoffs requested + FPR 1 (xAUC needs it) + the curve grid, sorted and distinct."""
    extra = [np.array([1.0])] + ([CURVE_GRID] if curves else [])
    return np.unique(np.concatenate([np.asarray(cutoffs, dtype=np.float64)] + extra))


def run_grid_audit(grid, cutoffs, xauc: bool = True, curves: bool = False) -> dict:
    """Feed an in-memory ScoreGrid through GridAudit (in chunks) and return its raw result."""
    alphas = sweep_alphas(cutoffs, curves)
    audit = GridAudit(grid.n_pos, grid.n_neg, alphas, xauc=xauc)
    audit.update(grid.pos, grid.neg)
    res = audit.result()
    res["alphas"] = alphas
    res["groups"] = grid.groups
    res["n_pos_group"], res["n_neg_group"] = grid.n_pos, grid.n_neg
    return res
