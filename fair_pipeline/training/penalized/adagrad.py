"""Mini-batch Adagrad for the MI-penalized logistic regression, over a re-readable stream of batches.

The proxy Î is a population quantity (variances over all rows of a (group, label) cell), so a batch
alone cannot give its gradient. Given the population means/variances, though, d(2Î)/ds_i is a
per-row term (see ``mi_proxy.score_gradient``), so the gradient is a sum over batches like the loss.
The statistics come from running per-cell sums: they start from a full pass at the starting
coefficients and, batch after batch, are decayed by ``1 - 1/stats_window`` and added to the current
batch's sums, so they follow the moving scores (statistics frozen for a whole epoch made large-lambda fits
overshoot). Memory stays O(features + cells); one read of the stream per epoch.

A batch is ``(X, y01, cells, w)`` with ``cells = 2 * group_code + label`` (or None when no groups).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from fair_pipeline.training.penalized.mi_proxy import (
    N_LABELS,
    CellMoments,
    score_gradient_coefficients,
    stats_from_sums,
)
from fair_pipeline.training.penalized.objective import scores_and_slope

Batch = tuple  # (X, y01, cells | None, w)
EpochFactory = Callable[[], Iterable[Batch]]


@dataclass
class AdagradResult:
    theta: np.ndarray
    n_epochs: int
    converged: bool


def _split(theta, fit_intercept):
    return (theta[:-1], theta[-1]) if fit_intercept else (theta, 0.0)


def _n_cells(cells: np.ndarray) -> int:
    return N_LABELS * (int(cells.max()) // N_LABELS + 1) if cells.size else 0


def measure_moments(epoch: EpochFactory, theta, *, score: str, fit_intercept: bool) -> CellMoments:
    """One read of the stream: score moments per (group, label) cell at fixed theta."""
    acc = CellMoments.empty()
    for X, _y, cells, w in epoch():
        if cells is None:
            raise ValueError("the mutual-information penalty needs groups in every batch")
        beta, b = _split(theta, fit_intercept)
        s, _ = scores_and_slope(np.asarray(X @ beta).ravel() + b, score)
        acc = acc.merge(CellMoments.from_scores(s, cells, w, _n_cells(cells)))
    return acc


def adagrad(
    epoch: EpochFactory,
    theta0: np.ndarray,
    *,
    lam: float,
    score: str,
    l2: float,
    fit_intercept: bool,
    learning_rate: float,
    max_epochs: int,
    tol: float,
    moments: CellMoments | None = None,
    stats_window: int = 10,
    n_iter_no_change: int = 5,
    eps: float = 1e-8,
) -> AdagradResult:
    """Run Adagrad epochs from theta0 until the epoch objective stops improving.

    The epoch objective is the weighted log-loss of each batch at the coefficients it was scored
    with, plus 2 lam Î of the scores seen in the epoch, plus the L2 term. Like
    scikit-learn's SGD, stop after ``n_iter_no_change`` epochs without a relative improvement
    larger than ``tol``. With lam > 0, ``moments`` must hold the population moments at theta0
    (``measure_moments``).
    """
    theta = np.array(theta0, dtype=float)
    sq_grad = np.zeros_like(theta)
    penalized = lam > 0
    if penalized and moments is None:
        raise ValueError("penalized Adagrad needs the starting population moments")
    if penalized:
        # Running raw sums per cell (sum w, sum w s, sum w s^2), exponentially forgotten per batch.
        running = np.stack([moments.weight, moments.weight * moments.mean, moments.m2 + moments.weight * moments.mean**2])
        n_cells, decay = moments.weight.size, 1.0 - 1.0 / stats_window
    best, stalled = np.inf, 0
    for n_epoch in range(1, max_epochs + 1):
        loss_sum = weight_sum = 0.0
        if penalized:
            epoch_sums = np.zeros_like(running)
        for X, y, cells, w in epoch():
            beta, b = _split(theta, fit_intercept)
            z = np.asarray(X @ beta).ravel() + b
            batch_weight = float(w.sum())
            if batch_weight <= 0:
                continue
            loss_sum += float(w @ (np.logaddexp(0.0, z) - y * z))
            weight_sum += batch_weight
            r = w * (expit(z) - y) / batch_weight
            if penalized:
                s, slope = scores_and_slope(z, score)
                if cells.max() >= n_cells:
                    raise ValueError("a group appeared that was absent from the first pass")
                ws = w * s
                batch_sums = np.stack(
                    [np.bincount(cells, weights=w, minlength=n_cells),
                     np.bincount(cells, weights=ws, minlength=n_cells),
                     np.bincount(cells, weights=ws * s, minlength=n_cells)]
                )
                running = decay * running + batch_sums
                epoch_sums += batch_sums
                a, b_coef = score_gradient_coefficients(stats_from_sums(*running))
                g = (2.0 * lam / batch_weight) * w * (a[cells] * s + b_coef[cells])
                r += g if slope is None else g * slope
            grad_beta = np.asarray(X.T @ r).ravel() + l2 * beta
            grad = np.append(grad_beta, r.sum()) if fit_intercept else grad_beta
            sq_grad += grad**2
            theta -= learning_rate * grad / (np.sqrt(sq_grad) + eps)
        if weight_sum <= 0:
            raise ValueError("the batch stream yielded no rows with positive sample weight")
        beta, _ = _split(theta, fit_intercept)
        if not np.all(np.isfinite(theta)):
            raise FloatingPointError("Adagrad diverged (non-finite coefficients); lower learning_rate")
        value = loss_sum / weight_sum + 0.5 * l2 * float(beta @ beta)
        if penalized:
            value += 2.0 * lam * stats_from_sums(*epoch_sums).value
        if not np.isfinite(best) or value < best - tol * abs(best):
            best, stalled = value, 0
        else:
            stalled += 1
            if stalled >= n_iter_no_change:
                return AdagradResult(theta, n_epoch, True)
    return AdagradResult(theta, max_epochs, False)
