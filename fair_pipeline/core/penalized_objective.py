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

from .mi_proxy import N_LABELS, CellMoments, ProxyStats, proxy_stats, score_gradient

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
        self.total_weight = float(self.w.sum())
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

    def proxy_stats(self, s: np.ndarray, *, check_counts: bool = False) -> ProxyStats:
        moments = CellMoments.from_scores(
            s, self.cells, self.w, self.n_cells, w_cell=self.cell_weight, count=self.cell_count
        )
        return proxy_stats(moments, self.group_labels, check_counts=check_counts)


def objective(theta, problem: PenalizedProblem, lam: float, score: str, l2: float):
    """Return (f, grad, mi_proxy) at theta; mi_proxy is Î (nan when unpenalized)."""
    z = problem.linear(theta)
    W = problem.total_weight
    loss = float(problem.w @ (np.logaddexp(0.0, z) - problem.y * z)) / W
    r = problem.w * (expit(z) - problem.y) / W
    proxy = np.nan
    if lam > 0:
        s, slope = scores_and_slope(z, score)
        stats = problem.proxy_stats(s)
        proxy = stats.value
        g = score_gradient(stats, s, problem.cells, problem.w)
        r += lam * (g if slope is None else g * slope)
    beta, _ = problem.split(theta)
    f = loss + lam * 2.0 * (proxy if lam > 0 else 0.0) + 0.5 * l2 * float(beta @ beta)
    grad_beta = np.asarray(problem.X.T @ r).ravel() + l2 * beta
    grad = np.append(grad_beta, r.sum()) if problem.fit_intercept else grad_beta
    return f, grad, proxy


def mi_proxy_at(theta, problem: PenalizedProblem, score: str) -> float:
    s, _ = scores_and_slope(problem.linear(theta), score)
    return problem.proxy_stats(s).value


__all__ = ["SCORES", "N_LABELS", "PenalizedProblem", "objective", "mi_proxy_at", "scores_and_slope"]
