"""MI-penalized logistic regression: proxy, gradients, solvers, scikit-learn conformance, bad input."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from fair_pipeline.training import (
    MIPenalizedLogisticRegression,
    MIPenaltyError,
    lambda_path,
    lambda_path_stream,
    mi_proxy,
)
from fair_pipeline.training.penalized.mi_proxy import (
    CellMoments,
    cells_of,
    encode_groups,
    proxy_stats,
    score_gradient,
    stats_from_scores,
    stats_from_sums,
)
from fair_pipeline.training.penalized.objective import PenalizedProblem, objective


def _data(n=1500, d=5, n_groups=2, seed=0):
    """Logistic data whose signal differs by group, so the penalty has something to remove."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    g = rng.integers(0, n_groups, n)
    z = 1.2 * X[:, 0] + 1.0 * g * X[:, 1] - 0.5 + 0.3 * g
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return X, y, g


def _theta(model):
    return np.append(model.coef_.ravel(), model.intercept_)


def _problem(X, y, g, w=None, fit_intercept=True):
    codes, labels = encode_groups(g)
    w = np.ones(len(y)) if w is None else w
    return PenalizedProblem(X, y.astype(float), w, cells_of(codes, y), 2 * labels.size, labels, fit_intercept)


# ----------------------------------------------------------------------------- the proxy itself
def test_proxy_matches_hand_formula():
    rng = np.random.default_rng(1)
    s = rng.normal(size=40) * np.repeat([1.0, 2.0], 20)
    y = np.tile([0, 1], 20)
    g = np.repeat(["a", "b"], 20)
    two_i = 0.0
    for label in (0, 1):
        in_y = y == label
        inner = sum((np.mean(g[in_y] == grp)) * np.log(np.var(s[in_y & (g == grp)])) for grp in "ab")
        two_i += np.mean(in_y) * (np.log(np.var(s[in_y])) - inner)
    assert mi_proxy(s, y, g) == pytest.approx(two_i / 2, rel=1e-12)


def test_proxy_weighted_equals_repeated_rows():
    rng = np.random.default_rng(2)
    s, y, g = rng.normal(size=60), rng.integers(0, 2, 60), rng.integers(0, 3, 60)
    reps = rng.integers(1, 4, 60)
    assert mi_proxy(s, y, g, sample_weight=reps.astype(float)) == pytest.approx(
        mi_proxy(np.repeat(s, reps), np.repeat(y, reps), np.repeat(g, reps)), rel=1e-12
    )


def test_proxy_nonnegative_and_zero_for_identical_groups():
    rng = np.random.default_rng(3)
    values = rng.normal(size=30)
    y = rng.integers(0, 2, 30)
    y[:2], y[2:4] = 0, 1
    # The same scores and labels in both groups: conditional independence, Î = 0 exactly.
    s, yy, g = np.tile(values, 2), np.tile(y, 2), np.repeat([0, 1], 30)
    assert abs(mi_proxy(s, yy, g)) < 1e-12
    for seed in range(20):
        r = np.random.default_rng(seed)
        assert mi_proxy(r.normal(size=50) * r.uniform(0.5, 2, 50), np.arange(50) % 2, np.arange(50) % 3) >= 0


def test_streamed_moments_equal_one_pass():
    rng = np.random.default_rng(4)
    s, w = rng.normal(3, 2, 500), rng.uniform(0.2, 3, 500)
    cells = cells_of(rng.integers(0, 3, 500), rng.integers(0, 2, 500))
    whole = CellMoments.from_scores(s, cells, w, 6)
    merged = CellMoments.empty()
    for chunk in np.array_split(np.arange(500), 7):
        merged = merged.merge(CellMoments.from_scores(s[chunk], cells[chunk], w[chunk], 6))
    np.testing.assert_allclose(merged.m2, whole.m2, rtol=1e-10)
    np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-12)
    assert proxy_stats(merged).value == pytest.approx(proxy_stats(whole).value, rel=1e-10)
    # The raw-sum path used per Adagrad batch gives the same statistics.
    raw = stats_from_sums(
        np.bincount(cells, w, 6), np.bincount(cells, w * s, 6), np.bincount(cells, w * s * s, 6)
    )
    assert raw.value == pytest.approx(proxy_stats(whole).value, rel=1e-9)
    np.testing.assert_allclose(raw.label_var, proxy_stats(whole).label_var, rtol=1e-9)


def test_score_gradient_finite_differences():
    rng = np.random.default_rng(5)
    s, y, g, w = rng.normal(size=80), rng.integers(0, 2, 80), rng.integers(0, 3, 80), rng.uniform(0.5, 2, 80)
    cells = cells_of(g, y)
    analytic = score_gradient(stats_from_scores(s, y, g, w), s, cells, w)
    h = 1e-6
    numeric = np.array(
        [
            (stats_from_scores(s + h * e, y, g, w).value - stats_from_scores(s - h * e, y, g, w).value) / h
            for e in np.eye(80)
        ]
    )  # (Î(+h) - Î(-h)) / h = d(2Î)/ds, the quantity score_gradient returns
    np.testing.assert_allclose(analytic, numeric, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("penalty_score", ["probability", "logit"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_objective_gradient_finite_differences(penalty_score, fit_intercept):
    X, y, g = _data(n=400, d=4, n_groups=3, seed=6)
    w = np.random.default_rng(6).uniform(0.3, 3, 400)
    problem = _problem(X, y, g, w, fit_intercept)
    theta = np.random.default_rng(7).normal(scale=0.7, size=4 + fit_intercept)
    f, grad, proxy = objective(theta, problem, 2.5, penalty_score, 0.05)
    h = 1e-6
    numeric = [
        (objective(theta + h * e, problem, 2.5, penalty_score, 0.05)[0]
         - objective(theta - h * e, problem, 2.5, penalty_score, 0.05)[0]) / (2 * h)
        for e in np.eye(theta.size)
    ]
    np.testing.assert_allclose(grad, numeric, atol=1e-8, rtol=1e-6)
    assert proxy > 0 and f > proxy


# ----------------------------------------------------------------------------- solvers
def test_lam0_matches_sklearn_unpenalized_and_l2():
    X, y, g = _data(seed=8)
    w = np.random.default_rng(8).uniform(0.5, 2, len(y))
    sk = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(X, y, sample_weight=w)
    ours = MIPenalizedLogisticRegression(lam=0.0, tol=1e-10).fit(X, y, sensitive_features=g, sample_weight=w)
    np.testing.assert_allclose(_theta(ours), _theta(sk), atol=1e-6)
    C = 0.02
    sk = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(X, y, sample_weight=w)
    ours = MIPenalizedLogisticRegression(lam=0.0, l2=1 / (C * w.sum()), tol=1e-10).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(_theta(ours), _theta(sk), atol=1e-6)
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), atol=1e-7)


def test_integer_weights_equal_repeated_rows_when_penalized():
    X, y, g = _data(n=600, seed=9)
    reps = np.random.default_rng(9).integers(1, 4, len(y))
    a = MIPenalizedLogisticRegression(lam=3.0, tol=1e-9).fit(X, y, sensitive_features=g, sample_weight=reps)
    b = MIPenalizedLogisticRegression(lam=3.0, tol=1e-9).fit(
        np.repeat(X, reps, axis=0), np.repeat(y, reps), sensitive_features=np.repeat(g, reps)
    )
    np.testing.assert_allclose(_theta(a), _theta(b), atol=1e-5)
    assert a.mi_proxy_ == pytest.approx(b.mi_proxy_, rel=1e-4)


@pytest.mark.parametrize("penalty_score", ["probability", "logit"])
def test_path_trades_loss_for_proxy_monotonically(penalty_score):
    X, y, g = _data(seed=10)
    lams = [0.0, 0.3, 1.0, 3.0, 10.0, 30.0]
    path = lambda_path(X, y, g, lams, penalty_score=penalty_score, tol=1e-9)
    proxies = np.array([p.mi_proxy for p in path])
    problem = _problem(X, y, g)
    losses = np.array([objective(_theta(p.model), problem, 0.0, penalty_score, 0.0)[0] for p in path])
    # Exact minimizers of loss + lam * P: P non-increasing and loss non-decreasing in lam.
    assert np.all(np.diff(proxies) < 1e-9) and proxies[-1] < 0.5 * proxies[0]
    assert np.all(np.diff(losses) > -1e-9)
    # A cold start (unpenalized fit, then penalized) reaches the same optimum as the warm path.
    cold = MIPenalizedLogisticRegression(lam=3.0, penalty_score=penalty_score, tol=1e-9).fit(X, y, sensitive_features=g)
    assert objective(_theta(cold), problem, 3.0, penalty_score, 0.0)[0] == pytest.approx(
        objective(_theta(path[3].model), problem, 3.0, penalty_score, 0.0)[0], abs=1e-8
    )
    assert path[0].model.warm_start is False  # copies handed back keep the user's setting


def test_adagrad_reaches_lbfgs_objective():
    X, y, g = _data(n=3000, seed=11)
    problem = _problem(X, y, g)
    for lam in (0.0, 2.0):
        exact = MIPenalizedLogisticRegression(lam=lam, tol=1e-9).fit(X, y, sensitive_features=g)
        ada = MIPenalizedLogisticRegression(
            lam=lam, solver="adagrad", batch_size=256, learning_rate=0.2, tol=1e-6, max_iter=400, random_state=0
        ).fit(X, y, sensitive_features=g)
        f_exact = objective(_theta(exact), problem, lam, "probability", 0.0)[0]
        f_ada = objective(_theta(ada), problem, lam, "probability", 0.0)[0]
        assert 0 <= f_ada - f_exact < 2e-3, (lam, f_ada - f_exact)
        if lam > 0:
            assert ada.mi_proxy_ < 0.5 * MIPenalizedLogisticRegression(lam=0.0).fit(X, y, sensitive_features=g).mi_proxy_


def test_fit_stream_from_chunks_matches_lbfgs():
    X, y, g = _data(n=3000, seed=12)
    w = np.random.default_rng(12).uniform(0.5, 2.0, len(y))  # e.g. inverse-propensity weights
    chunks = [(X[i : i + 300], y[i : i + 300], g[i : i + 300], w[i : i + 300]) for i in range(0, 3000, 300)]
    ada = MIPenalizedLogisticRegression(lam=2.0, solver="adagrad", learning_rate=0.2, tol=1e-5, max_iter=400)
    ada.fit_stream(lambda: iter(chunks))
    exact = MIPenalizedLogisticRegression(lam=2.0, tol=1e-9).fit(X, y, sensitive_features=g, sample_weight=w)
    problem = _problem(X, y, g, w)
    gap = objective(_theta(ada), problem, 2.0, "probability", 0.0)[0] - objective(_theta(exact), problem, 2.0, "probability", 0.0)[0]
    assert 0 <= gap < 2e-3
    assert ada.mi_proxy_ == pytest.approx(exact.mi_proxy_, rel=0.25)
    assert sorted(ada.groups_.tolist()) == [0, 1]
    with pytest.raises(TypeError, match="one-shot generator"):
        MIPenalizedLogisticRegression(solver="adagrad").fit_stream(c for c in chunks)


def test_lambda_path_stream_warm_starts_and_lowers_proxy():
    X, y, g = _data(n=2000, seed=16)
    w = np.random.default_rng(16).uniform(0.5, 2.0, len(y))
    chunks = [(X[i : i + 250], y[i : i + 250], g[i : i + 250], w[i : i + 250]) for i in range(0, 2000, 250)]
    path = lambda_path_stream(lambda: iter(chunks), [0.0, 2.0, 10.0], learning_rate=0.2, tol=1e-5, max_iter=300)
    exact = lambda_path(X, y, g, [0.0, 2.0, 10.0], sample_weight=w, tol=1e-9)
    problem = _problem(X, y, g, w)
    for streamed, reference in zip(path, exact):
        assert streamed.model.solver == "adagrad"
        gap = objective(_theta(streamed.model), problem, streamed.lam, "probability", 0.0)[0] - objective(
            _theta(reference.model), problem, reference.lam, "probability", 0.0
        )[0]
        assert -1e-9 <= gap < 3e-3, (streamed.lam, gap)
    proxies = [p.mi_proxy for p in path]
    assert proxies[2] < proxies[1] < proxies[0]


def test_sparse_input_matches_dense():
    from scipy import sparse

    X, y, g = _data(n=800, seed=14)
    X[np.abs(X) < 0.7] = 0.0
    dense = MIPenalizedLogisticRegression(lam=2.0, tol=1e-9).fit(X, y, sensitive_features=g)
    sp = MIPenalizedLogisticRegression(lam=2.0, tol=1e-9).fit(sparse.csr_matrix(X), y, sensitive_features=g)
    np.testing.assert_allclose(_theta(sp), _theta(dense), atol=1e-6)
    np.testing.assert_allclose(sp.decision_function(sparse.csr_matrix(X)), dense.decision_function(X), atol=1e-6)


def test_fit_stream_rejects_bad_chunks():
    X, y, g = _data(n=600, seed=15)
    no_groups = [(X[i : i + 200], y[i : i + 200], None, None) for i in range(0, 600, 200)]
    with pytest.raises(ValueError, match="needs groups in every batch"):
        MIPenalizedLogisticRegression(lam=1.0, solver="adagrad", max_iter=5).fit_stream(no_groups)
    g = g.astype(object)
    g[np.flatnonzero(y == 0)[:3]] = "rare"  # a group with negatives only
    chunks = [(X[i : i + 200], y[i : i + 200], g[i : i + 200], None) for i in range(0, 600, 200)]
    with pytest.raises(MIPenaltyError, match="group 'rare' has 0 member"):
        MIPenalizedLogisticRegression(lam=1.0, solver="adagrad", max_iter=5).fit_stream(chunks)


def test_group_needed_only_at_fit_time():
    X, y, g = _data(seed=13)
    model = MIPenalizedLogisticRegression(lam=2.0).fit(X, y, sensitive_features=g)
    proba = model.predict_proba(X)
    assert proba.shape == (len(y), 2) and np.allclose(proba.sum(1), 1)
    assert set(model.predict(X)) <= {0, 1}
    with pytest.warns(UserWarning, match="no sensitive_features"):
        plain = MIPenalizedLogisticRegression(lam=2.0).fit(X, y)
    np.testing.assert_allclose(_theta(plain), _theta(MIPenalizedLogisticRegression(lam=0.0).fit(X, y)), atol=1e-8)
    assert np.isnan(plain.mi_proxy_)


# ----------------------------------------------------------------------------- bad input
def test_negative_lambda_rejected():
    X, y, g = _data(n=100)
    with pytest.raises(ValueError, match="'lam' parameter"):
        MIPenalizedLogisticRegression(lam=-0.1).fit(X, y, sensitive_features=g)
    with pytest.raises(ValueError, match=">= 0"):
        lambda_path(X, y, g, [0.0, -1.0])


def test_group_with_one_member_of_a_class_rejected():
    X, y, g = _data(n=300)
    g = g.astype(object)
    g[np.flatnonzero(y == 1)[0]] = "tiny"
    g[np.flatnonzero(y == 0)[:5]] = "tiny"
    with pytest.raises(MIPenaltyError, match=r"group 'tiny' has 1 member\(s\) with label 1"):
        MIPenalizedLogisticRegression(lam=1.0).fit(X, y, sensitive_features=g)
    # Unpenalized, the same data fits; Î is reported as undefined (NaN), not as 0.
    assert np.isnan(MIPenalizedLogisticRegression(lam=0.0).fit(X, y, sensitive_features=g).mi_proxy_)


def test_constant_scores_rejected():
    X, y, g = _data(n=300)
    with pytest.raises(MIPenaltyError, match="constant"):
        MIPenalizedLogisticRegression(lam=1.0).fit(np.zeros_like(X), y, sensitive_features=g)
    s = np.random.default_rng(0).normal(size=300)
    s[(g == 1) & (y == 1)] = 0.7  # one cell constant, the others fine
    with pytest.raises(MIPenaltyError, match="constant within group 1, label 1"):
        mi_proxy(s, y, g)


def test_missing_sensitive_feature_rejected():
    X, y, g = _data(n=300)
    gf = g.astype(float)
    gf[[3, 7]] = np.nan
    with pytest.raises(MIPenaltyError, match=r"2 missing value\(s\).*rows \[3, 7\]"):
        MIPenalizedLogisticRegression(lam=1.0).fit(X, y, sensitive_features=gf)
    import pandas as pd

    for missing in (None, pd.NA, float("nan")):
        go = g.astype(object)
        go[5] = missing
        with pytest.raises(MIPenaltyError, match=r"1 missing value\(s\).*rows \[5\]"):
            MIPenalizedLogisticRegression(lam=1.0).fit(X, y, sensitive_features=go)
    series = pd.Series(np.where(g == 1, "f", "m"), dtype="string")
    series[9] = pd.NA
    with pytest.raises(MIPenaltyError, match="rows \\[9\\]"):
        MIPenalizedLogisticRegression(lam=1.0).fit(X, y, sensitive_features=series)
    with pytest.raises(ValueError, match="one entry per row"):
        MIPenalizedLogisticRegression(lam=1.0).fit(X, y, sensitive_features=g[:-1])


# ----------------------------------------------------------------------------- scikit-learn checks
# The checks call fit(X, y) without sensitive_features: a single group, for which Î is identically 0,
# so they exercise the estimator contract (validation, shapes, sample_weight, pickling, clone).
# The penalized path is covered by the tests above. No check is expected to fail.
@parametrize_with_checks(
    [
        MIPenalizedLogisticRegression(lam=0.0),
        MIPenalizedLogisticRegression(lam=1.0, penalty_score="logit", l2=1e-3),
        MIPenalizedLogisticRegression(lam=1.0, solver="adagrad", max_iter=30, random_state=0),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)
