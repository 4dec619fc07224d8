"""Preconditioner for L-BFGS: a change of variables under which the log-loss Hessian is ~identity.

Adult's rare one-hot columns make the log-loss Hessian ill-conditioned (condition number ~1e4), and
the penalty raises its largest curvature ~20-fold at lam = 10 (~2e5): plain L-BFGS needed 86
iterations unpenalized and 229 at lam = 10, most of them in a slow linear tail. L-BFGS now runs on
u with theta = V diag(scale) u, where H = V diag(h) V^T is the loss Hessian at the starting point
and scale = 1 / sqrt(h + l2): the loss part of the u-problem is well conditioned and the L-BFGS
memory only has to learn the few directions the penalty bends (17 and 38 iterations). The
minimizer is the same; only the path to it changes.

Directions the data do not determine (h ~ 0: collinear one-hot columns, fewer rows than columns)
are scaled like the flattest direction they do determine. Scaled by 1 / sqrt(l2) instead, they
became the stiffest directions of the u-problem, and on separable data, where the loss curvature
collapses during the fit, L-BFGS overshot along them and amplified rounding noise ~10x per
iteration (fits on weighted and on repeated rows stopped 1e-4 apart in scikit-learn's
sample-weight check); left unscaled, the intercept / one-hot trade-off that only l2 settles took
Adult's unpenalized fit from 17 to 31 iterations.

H costs O(n d^2), a few gradient evaluations for narrow data, so it is formed only up to
DENSE_LIMIT columns; wider problems are scaled by its diagonal (Jacobi).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from fair_pipeline.training.penalized.objective import PenalizedProblem

DENSE_LIMIT = 256
# Curvature below this fraction of the largest counts as "not determined by the data".
NULL_CURVATURE = 1e-10


@dataclass(frozen=True)
class Preconditioner:
    """theta = basis @ (scale * u); basis None means the coordinate axes (diagonal scaling)."""

    scale: np.ndarray
    basis: np.ndarray | None = None  # orthonormal eigenvectors of H, one per column

    def to_theta(self, u: np.ndarray) -> np.ndarray:
        v = self.scale * u
        return v if self.basis is None else self.basis @ v

    def to_u(self, theta: np.ndarray) -> np.ndarray:
        v = theta if self.basis is None else self.basis.T @ theta
        return v / self.scale

    def gradient_in_u(self, grad_theta: np.ndarray) -> np.ndarray:
        """df/du = diag(scale) basis^T df/dtheta."""
        v = grad_theta if self.basis is None else self.basis.T @ grad_theta
        return self.scale * v


def loss_curvature(problem: PenalizedProblem, theta: np.ndarray) -> np.ndarray:
    """Per-row weights D of the log-loss Hessian X_1^T diag(D) X_1 (X_1: X with the intercept column)."""
    p = expit(problem.linear(theta))
    return problem.w_over_W * p * (1.0 - p)


def loss_hessian(problem: PenalizedProblem, theta: np.ndarray) -> np.ndarray:
    """Hessian of the weight-normalized log-loss at theta, intercept last (as in theta)."""
    X = problem.X
    D = loss_curvature(problem, theta)
    if hasattr(X, "tocsr"):
        H_beta = np.asarray((X.T @ X.multiply(D[:, None])).todense())
    else:
        Xs = X * np.sqrt(D)[:, None]
        H_beta = Xs.T @ Xs
    if not problem.fit_intercept:
        return H_beta
    cross = np.asarray(X.T @ D).ravel()
    return np.block([[H_beta, cross[:, None]], [cross[None, :], np.array([[D.sum()]])]])


def loss_hessian_diagonal(problem: PenalizedProblem, theta: np.ndarray) -> np.ndarray:
    X = problem.X
    D = loss_curvature(problem, theta)
    squares = X.multiply(X) if hasattr(X, "tocsr") else X * X
    diag = np.asarray(squares.T @ D).ravel()
    return np.append(diag, D.sum()) if problem.fit_intercept else diag


def loss_preconditioner(problem: PenalizedProblem, theta: np.ndarray, l2: float) -> Preconditioner:
    """Preconditioner from the log-loss Hessian at theta, the start of an L-BFGS run.

    l2 is added to every direction's curvature, the intercept's too (it is not penalized): a
    preconditioner only has to be close.
    """
    if problem.n_features <= DENSE_LIMIT:
        curvature, basis = np.linalg.eigh(loss_hessian(problem, theta))
    else:
        curvature, basis = loss_hessian_diagonal(problem, theta), None
    determined = curvature > NULL_CURVATURE * max(float(curvature.max()), np.finfo(float).tiny)
    # Undetermined directions are scaled like the flattest determined one (see the module docstring).
    # (All-zero data determine nothing: unit scale.)
    flattest = curvature[determined].min() if determined.any() else 1.0
    curvature = np.where(determined, curvature, flattest)
    return Preconditioner(1.0 / np.sqrt(curvature + l2), basis)


__all__ = ["DENSE_LIMIT", "Preconditioner", "loss_hessian", "loss_preconditioner"]
