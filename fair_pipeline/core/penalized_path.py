"""Fit a lambda grid along a warm-started path (the pure function the Dagster assets call)."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from .penalized import MIPenalizedLogisticRegression


@dataclass
class PathPoint:
    lam: float
    model: MIPenalizedLogisticRegression
    mi_proxy: float  # Î on the training data at this lambda's solution
    n_iter: int
    converged: bool
    fit_seconds: float


def lambda_path(X, y, sensitive_features, lambdas, *, sample_weight=None, estimator=None, **params):
    """Fit one model per lambda, in increasing order, each warm-started from the previous solution.

    The first point starts from the unpenalized solution (fitted here when lambdas[0] > 0), never
    from theta = 0. ``estimator`` (unfitted template) or ``params`` set the other hyper-parameters.
    Returns a list of PathPoint sorted by lambda; each model is an independent fitted copy.
    """
    lams = np.asarray(lambdas, dtype=float)
    if lams.ndim != 1 or lams.size == 0:
        raise ValueError(f"lambdas must be a non-empty 1-d grid, got {lambdas!r}")
    if np.any(lams < 0) or not np.all(np.isfinite(lams)):
        raise ValueError(f"lambdas must be finite and >= 0, got {lams.tolist()}")
    if np.any(np.diff(lams) <= 0):
        raise ValueError(f"lambdas must be strictly increasing for warm starts, got {lams.tolist()}")
    model = clone(estimator) if estimator is not None else MIPenalizedLogisticRegression()
    model.set_params(**params)
    user_warm_start = model.warm_start
    model.set_params(lam=0.0, warm_start=True)
    fit_kw = {"sensitive_features": sensitive_features, "sample_weight": sample_weight}
    points = []
    for k, lam in enumerate(lams):
        if k == 0 and lam > 0:
            model.fit(X, y, **fit_kw)  # unpenalized start of the path
        model.set_params(lam=float(lam))
        started = time.perf_counter()
        model.fit(X, y, **fit_kw)
        seconds = time.perf_counter() - started
        fitted = copy.deepcopy(model).set_params(warm_start=user_warm_start)
        points.append(PathPoint(float(lam), fitted, float(fitted.mi_proxy_), fitted.n_iter_, fitted.converged_, seconds))
    return points
