"""L-BFGS preconditioning of the MI-penalized logistic regression: exact change of variables, same optimum."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.utils import shuffle

from fair_pipeline.training import MIPenalizedLogisticRegression
from fair_pipeline.training.penalized import precondition as penalized_precondition
from fair_pipeline.training.penalized.mi_proxy import cells_of, encode_groups
from fair_pipeline.training.penalized.objective import PenalizedProblem, objective
from fair_pipeline.training.penalized.precondition import loss_hessian, loss_preconditioner


def _ill_conditioned(n=3000, seed=0):
    """Columns on scales from 1e-2 to 1e2, like rare one-hot next to raw counts; group-dependent signal."""
    rng = np.random.default_rng(seed)
    scales = np.array([1e-2, 1e-1, 1.0, 10.0, 100.0])
    Z = rng.normal(size=(n, scales.size))
    g = rng.integers(0, 2, n)
    logit = Z[:, 0] - 0.8 * Z[:, 1] + 0.5 * Z[:, 2] + 0.7 * g * Z[:, 3] - 0.3 * Z[:, 4]
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return Z * scales, y, g


def _problem(X, y, g, fit_intercept=True, w=None):
    codes, labels = encode_groups(g)
    w = np.ones(len(y)) if w is None else w
    return PenalizedProblem(X, y.astype(float), w, cells_of(codes, y), 2 * labels.size, labels, fit_intercept)


def _theta(model):
    return np.append(model.coef_.ravel(), model.intercept_)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_loss_hessian_matches_finite_differences(sparse, fit_intercept):
    X, y, g = _ill_conditioned(n=500, seed=1)
    X = X / X.std(0)  # finite differences need comparable scales
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(y))
    problem = _problem(sp.csr_matrix(X) if sparse else X, y, g, fit_intercept, w)
    theta = np.random.default_rng(2).normal(scale=0.5, size=X.shape[1] + fit_intercept)
    h = 1e-6
    numeric = np.column_stack(
        [
            (objective(theta + h * e, problem, 0.0, "logit", 0.0)[1] - objective(theta - h * e, problem, 0.0, "logit", 0.0)[1]) / (2 * h)
            for e in np.eye(theta.size)
        ]
    )
    np.testing.assert_allclose(loss_hessian(problem, theta), numeric, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("dense_limit", [256, 0])  # eigenbasis, or diagonal (Jacobi) for wide data
def test_change_of_variables_is_exact_and_whitens_the_loss(monkeypatch, dense_limit):
    monkeypatch.setattr(penalized_precondition, "DENSE_LIMIT", dense_limit)
    X, y, g = _ill_conditioned(n=800, seed=3)
    problem = _problem(X, y, g)
    theta = np.random.default_rng(3).normal(scale=0.01, size=X.shape[1] + 1)
    l2 = 1e-3
    pre = loss_preconditioner(problem, theta, l2)
    np.testing.assert_allclose(pre.to_theta(pre.to_u(theta)), theta, rtol=1e-12, atol=1e-15)
    # Chain rule: the u-gradient is the finite-difference gradient of u -> f(theta(u)).
    u = pre.to_u(theta)
    h = 1e-6
    numeric = [
        (objective(pre.to_theta(u + h * e), problem, 2.0, "probability", l2)[0]
         - objective(pre.to_theta(u - h * e), problem, 2.0, "probability", l2)[0]) / (2 * h)
        for e in np.eye(u.size)
    ]
    grad = objective(theta, problem, 2.0, "probability", l2)[1]
    np.testing.assert_allclose(pre.gradient_in_u(grad), numeric, atol=1e-7, rtol=1e-5)
    # In u, the loss + L2 Hessian at the start is the identity (diagonal scaling: unit diagonal only).
    P = np.column_stack([pre.to_theta(e) for e in np.eye(u.size)])
    H = loss_hessian(problem, theta) + l2 * np.diag(np.append(np.ones(X.shape[1]), 1.0))
    H_u = P.T @ H @ P
    if dense_limit:
        np.testing.assert_allclose(H_u, np.eye(u.size), atol=1e-8)
        assert np.linalg.cond(H) > 1e6  # the problem was badly conditioned to begin with
    else:
        np.testing.assert_allclose(np.diag(H_u), 1.0, rtol=1e-10)


@pytest.mark.parametrize("lam", [0.0, 3.0])
def test_preconditioned_fit_converges_fast_to_the_same_optimum(lam):
    X, y, g = _ill_conditioned(seed=4)
    problem = _problem(X, y, g)
    fit = MIPenalizedLogisticRegression(lam=lam, l2=1e-4, tol=1e-6).fit(X, y, sensitive_features=g)
    f, grad, _ = objective(_theta(fit), problem, lam, "probability", 1e-4)
    assert fit.converged_ and np.max(np.abs(grad)) <= 1e-6  # the stopping rule is on the theta-gradient
    # Plain (unpreconditioned) L-BFGS from the estimator's start (0 unpenalized, else the unpenalized
    # solution): with the same gradient test it needs many more iterations; run far tighter, it
    # finds the optimum the preconditioned fit reached.
    start = np.zeros(X.shape[1] + 1)
    if lam > 0:
        start = _theta(MIPenalizedLogisticRegression(lam=0.0, l2=1e-4, tol=1e-6).fit(X, y))
    plain = _plain_lbfgs(problem, lam, start, gtol=1e-6)
    tight = _plain_lbfgs(problem, lam, start, gtol=1e-11)
    assert 0 <= f - tight.fun < 1e-9
    assert plain.nit > 5 * fit.n_iter_ and fit.n_iter_ <= 40


def _plain_lbfgs(problem, lam, start, gtol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return minimize(
            lambda t: objective(t, problem, lam, "probability", 1e-4)[:2], start, jac=True, method="L-BFGS-B",
            options={"maxiter": 50_000, "maxfun": 100_000, "gtol": gtol, "ftol": 0.0, "maxcor": 30},
        )


@pytest.mark.parametrize("l2", [0.0, 1e-3])
@pytest.mark.parametrize("seed", range(4))
def test_weighted_and_repeated_rows_take_the_same_path_when_columns_outnumber_rows(l2, seed):
    # Separable data with a null space: the case where a careless preconditioner makes L-BFGS amplify
    # rounding noise (fits stopped 1e-4 apart). Integer weights must give the repeated-rows fit.
    rng = np.random.RandomState(seed)
    X, y, w = rng.rand(15, 30), rng.randint(0, 2, 15), rng.randint(0, 5, 15)
    if w[y == 0].sum() == 0 or w[y == 1].sum() == 0:
        w[:] = 1
    Xw, yw, ww = shuffle(X, y, w, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        repeated = MIPenalizedLogisticRegression(lam=0.0, l2=l2).fit(X.repeat(w, axis=0), y.repeat(w))
        weighted = MIPenalizedLogisticRegression(lam=0.0, l2=l2).fit(Xw, yw, sample_weight=ww)
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-9)
