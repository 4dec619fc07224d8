"""Fit a lambda grid along a warm-started path (the pure function the Dagster assets call)."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from fair_pipeline.training.penalized.estimator import MIPenalizedLogisticRegression


@dataclass
class PathPoint:
    lam: float
    model: MIPenalizedLogisticRegression
    mi_proxy: float  # Î on the training data at this lambda's solution
    n_iter: int
    converged: bool
    fit_seconds: float


def _checked_grid(lambdas) -> np.ndarray:
    lams = np.asarray(lambdas, dtype=float)
    if lams.ndim != 1 or lams.size == 0:
        raise ValueError(f"lambdas must be a non-empty 1-d grid, got {lambdas!r}")
    if np.any(lams < 0) or not np.all(np.isfinite(lams)):
        raise ValueError(f"lambdas must be finite and >= 0, got {lams.tolist()}")
    if np.any(np.diff(lams) <= 0):
        raise ValueError(f"lambdas must be strictly increasing for warm starts, got {lams.tolist()}")
    return lams


def _walk(lams, model, fit) -> list[PathPoint]:
    """Fit ``model`` at each lambda in turn, warm-starting each point from the previous one."""
    user_warm_start = model.warm_start
    model.set_params(lam=0.0, warm_start=True)
    points = []
    for k, lam in enumerate(lams):
        if k == 0 and lam > 0:
            fit(model)  # unpenalized start of the path
        model.set_params(lam=float(lam))
        started = time.perf_counter()
        fit(model)
        seconds = time.perf_counter() - started
        fitted = copy.deepcopy(model).set_params(warm_start=user_warm_start)
        points.append(PathPoint(float(lam), fitted, float(fitted.mi_proxy_), fitted.n_iter_, fitted.converged_, seconds))
    return points


def _template(estimator, params) -> MIPenalizedLogisticRegression:
    model = clone(estimator) if estimator is not None else MIPenalizedLogisticRegression()
    return model.set_params(**params)


def lambda_path(X, y, sensitive_features, lambdas, *, sample_weight=None, estimator=None, **params):
    """Fit one model per lambda, in increasing order, each warm-started from the previous solution.

    The first point starts from the unpenalized solution (fitted here when lambdas[0] > 0), never
    from theta = 0. ``estimator`` (unfitted template) or ``params`` set the other hyper-parameters.
    Returns a list of PathPoint sorted by lambda; each model is an independent fitted copy.
    """
    fit_kw = {"sensitive_features": sensitive_features, "sample_weight": sample_weight}
    return _walk(_checked_grid(lambdas), _template(estimator, params), lambda m: m.fit(X, y, **fit_kw))


def lambda_path_stream(batches, lambdas, *, n_features=None, classes=(0, 1), estimator=None, **params):
    """``lambda_path`` over a re-readable stream of ``(X, y, groups, sample_weight)`` chunks.

    Uses Adagrad (``fit_stream``); ``batches`` is a callable returning a fresh iterator per pass,
    e.g. chunks of a DuckDB query, so the data never has to fit in memory.
    """
    model = _template(estimator, {**params, "solver": "adagrad"})
    return _walk(_checked_grid(lambdas), model, lambda m: m.fit_stream(batches, n_features=n_features, classes=classes))
