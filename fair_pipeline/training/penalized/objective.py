"""Objective and analytic gradient of the MI-penalized logistic regression (Nandy et al. eq. in section 4).

    f(theta) = (1/W) sum_i w_i [log(1 + e^{z_i}) - y_i z_i]  +  lam * 2Î(s(z); C | Y)  +  (l2/2) ||beta||^2
    z = X beta + b,   s = z ("logit") or s = sigmoid(z) ("probability")

The loss is normalized by the weight total W, so ``l2 = 1 / (C * W)`` reproduces scikit-learn's
``LogisticRegression(C=C)``. The intercept is not L2-penalized (as in scikit-learn's lbfgs).
Both terms reduce to one ``X.T @ r`` product: the penalty only adds per-row factors to r.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from fair_pipeline.training.penalized.mi_proxy import (
    N_LABELS,
    CellMoments,
    ProxyStats,
    proxy_stats,
    score_gradient_coefficients,
)

SCORES = ("probability", "logit")


def scores_and_slope(z: np.ndarray, score: str):
    """Penalized score s(z) and ds/dz."""
    if score == "logit":
        return z, None  # slope 1, skip the multiply
    p = expit(z)
    return p, p * (1.0 - p)


@dataclass
class PenalizedProblem:
    """Data of one fit, with everything that does not depend on theta precomputed."""

    X: object  # ndarray or scipy sparse, (n, d)
    y: np.ndarray  # 0/1 float
    w: np.ndarray  # sample weights
    cells: np.ndarray | None  # 2 * group_code + label; None -> no penalty possible
    n_cells: int
    group_labels: np.ndarray | None
    fit_intercept: bool

    def __post_init__(self):
        self.cell_slices = None
        if self.cells is not None:
            # Rows sorted by cell once: per-cell sums become reduceat over contiguous runs and the
            # per-row penalty factors are written slice by slice (no scatter / gather per evaluation).
            order = np.argsort(self.cells, kind="stable")
            self.X, self.y, self.w, self.cells = self.X[order], self.y[order], self.w[order], self.cells[order]
            counts = np.bincount(self.cells, minlength=self.n_cells)
            if np.all(counts > 0):
                bounds = np.concatenate([[0], np.cumsum(counts)])
                self.cell_starts = bounds[:-1]
                self.cell_slices = [slice(bounds[c], bounds[c + 1]) for c in range(self.n_cells)]
        self.total_weight = float(self.w.sum())
        self.unit_weights = bool(np.all(self.w == 1.0))
        self.w_over_W = self.w / self.total_weight
        self.wy = self.w * self.y
        if self.cells is not None:
            self.cell_weight = np.bincount(self.cells, weights=self.w, minlength=self.n_cells)
            self.cell_count = np.bincount(self.cells[self.w > 0], minlength=self.n_cells)

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    def split(self, theta):
        if self.fit_intercept:
            return theta[:-1], theta[-1]
        return theta, 0.0

    def linear(self, theta) -> np.ndarray:
        beta, b = self.split(theta)
        return np.asarray(self.X @ beta).ravel() + b

    def weighted(self, values: np.ndarray) -> np.ndarray:
        return values if self.unit_weights else values * self.w

    def proxy_stats(self, s: np.ndarray, *, check_counts: bool = False) -> ProxyStats:
        """Î's statistics at scores s: one pass of raw sums, two-pass only if cancellation threatens."""
        ws = self.weighted(s)
        mean = self._cell_sums(ws) / self.cell_weight
        m2 = self._cell_sums(ws * s) - self.cell_weight * mean**2
        if np.any(m2 <= 1e-8 * self.cell_weight * mean**2):
            moments = CellMoments.from_scores(
                s, self.cells, self.w, self.n_cells, w_cell=self.cell_weight, count=self.cell_count
            )
        else:
            moments = CellMoments(self.cell_weight, mean, m2, self.cell_count)
        return proxy_stats(moments, self.group_labels, check_counts=check_counts)

    def _cell_sums(self, values: np.ndarray) -> np.ndarray:
        if self.cell_slices is not None:
            return np.add.reduceat(values, self.cell_starts)
        return np.bincount(self.cells, weights=values, minlength=self.n_cells)

    def per_cell_affine(self, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
        """a[c_i] * s_i + b[c_i] for every row."""
        if self.cell_slices is None or self.n_cells > 64:
            return a[self.cells] * s + b[self.cells]
        out = np.empty_like(s)
        for c, rows in enumerate(self.cell_slices):
            np.multiply(s[rows], a[c], out=out[rows])
            out[rows] += b[c]
        return out


def objective(theta, problem: PenalizedProblem, lam: float, score: str, l2: float):
    """Return (f, grad, mi_proxy) at theta; mi_proxy is Î (nan when unpenalized)."""
    z = problem.linear(theta)
    p = expit(z)
    # softplus(z) = log(1 + e^z) from p, avoiding a second transcendental pass (logaddexp).
    softplus = np.maximum(z, 0.0) - np.log(np.where(z >= 0, p, 1.0 - p))
    loss = (float(problem.weighted(softplus).sum()) - float(problem.wy @ z)) / problem.total_weight
    r = (p - problem.y) * problem.w_over_W
    proxy = np.nan
    if lam > 0:
        s = z if score == "logit" else p
        stats = problem.proxy_stats(s)
        proxy = stats.value
        a, b = score_gradient_coefficients(stats)
        scale = 2.0 * lam / problem.total_weight  # d(2 lam Î)/ds_i = scale * w_i * (a s_i + b)
        g = problem.per_cell_affine(scale * a, scale * b, s)
        if score == "probability":
            g *= p * (1.0 - p)
        r += problem.weighted(g)
    beta, _ = problem.split(theta)
    f = loss + (2.0 * lam * proxy if lam > 0 else 0.0) + 0.5 * l2 * float(beta @ beta)
    grad_beta = np.asarray(problem.X.T @ r).ravel() + l2 * beta
    grad = np.append(grad_beta, r.sum()) if problem.fit_intercept else grad_beta
    return f, grad, proxy


def mi_proxy_at(theta, problem: PenalizedProblem, score: str) -> float:
    s, _ = scores_and_slope(problem.linear(theta), score)
    return problem.proxy_stats(s).value


__all__ = ["SCORES", "N_LABELS", "PenalizedProblem", "objective", "mi_proxy_at", "scores_and_slope"]
