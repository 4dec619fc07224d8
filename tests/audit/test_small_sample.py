"""CR2 / effective-cluster t inference from per-cluster influence totals, against direct matrix computations."""
import numpy as np
import pytest
from scipy import stats

from fair_pipeline.audit.stats.small_sample import (
    adjusted_totals,
    cluster_robust_interval,
    critical_value,
    satterthwaite_df,
    t_wald,
)


def _cr2_matrix(y, clusters):
    """Bell-McCaffrey CR2 for the intercept-only OLS (the mean) by its matrix definition:
    V = (X'X)^-1 sum_c X_c' A_c e_c e_c' A_c X_c (X'X)^-1 with A_c = (I - H_cc)^(-1/2)."""
    n = y.size
    X = np.ones((n, 1))
    XtX_inv = np.linalg.inv(X.T @ X)
    e = y - X @ XtX_inv @ X.T @ y
    meat = np.zeros((1, 1))
    for c in np.unique(clusters):
        idx = np.flatnonzero(clusters == c)
        Xc = X[idx]
        H = Xc @ XtX_inv @ Xc.T
        w, V = np.linalg.eigh(np.eye(idx.size) - H)
        A = V @ np.diag(1.0 / np.sqrt(w)) @ V.T
        s = Xc.T @ A @ e[idx]
        meat += np.outer(s, s)
    return float((XtX_inv @ meat @ XtX_inv)[0, 0])


def test_cr2_of_a_clustered_mean_equals_the_matrix_definition():
    # hand-checkable: 3 clusters of sizes 1, 2, 3
    y = np.array([1.0, 2.0, 4.0, 0.0, 3.0, 5.0])
    c = np.array([0, 1, 1, 2, 2, 2])
    mean = y.mean()
    n_c = np.bincount(c).astype(float)
    totals = (np.bincount(c, weights=y) - n_c * mean) / y.size
    got = cluster_robust_interval(mean, totals, n_c / y.size)
    assert got.se ** 2 == pytest.approx(_cr2_matrix(y, c), rel=1e-12)
    # by hand: mean 2.5, cluster sums minus n_c x mean = (-1.5, 1, 0.5), over n = 6, scaled by 1/sqrt(1 - n_c/6)
    hand = (-1.5 / 6) ** 2 / (5 / 6) + (1 / 6) ** 2 / (4 / 6) + (0.5 / 6) ** 2 / (3 / 6)
    assert got.se ** 2 == pytest.approx(hand, rel=1e-12)
    assert got.n_clusters == 3


def test_cr2_random_unequal_clusters_against_the_matrix_definition():
    rng = np.random.default_rng(0)
    c = np.repeat(np.arange(12), rng.integers(1, 9, 12))
    y = rng.normal(size=c.size) + rng.normal(size=12)[c]
    n_c = np.bincount(c).astype(float)
    totals = (np.bincount(c, weights=y) - n_c * y.mean()) / y.size
    assert cluster_robust_interval(y.mean(), totals, n_c / y.size).se ** 2 == pytest.approx(_cr2_matrix(y, c), rel=1e-10)


def test_equal_clusters_give_the_liang_zeger_factor_and_many_clusters_the_sandwich():
    rng = np.random.default_rng(1)
    C, k = 10, 4
    c = np.repeat(np.arange(C), k)
    y = rng.normal(size=c.size)
    totals = (np.bincount(c, weights=y) - k * y.mean()) / y.size
    cr1 = C / (C - 1) * np.sum(totals ** 2)
    assert cluster_robust_interval(y.mean(), totals, np.full(C, 1 / C)).se ** 2 == pytest.approx(cr1, rel=1e-12)
    C = 5000  # many small clusters: CR2 ~ the plain sandwich, t ~ normal
    c = rng.integers(0, C, 20000)
    y = rng.normal(size=c.size)
    n_c = np.bincount(c, minlength=C).astype(float)
    totals = (np.bincount(c, weights=y, minlength=C) - n_c * y.mean()) / y.size
    got = cluster_robust_interval(y.mean(), totals, n_c / y.size)
    assert got.se ** 2 == pytest.approx(np.sum(totals ** 2), rel=2e-3)
    assert got.df > 1000 and (got.ci_high - got.estimate) / got.se == pytest.approx(1.96, abs=0.01)


def test_effective_clusters_and_t_critical_values():
    assert satterthwaite_df(np.ones(20)) == pytest.approx(19.0)  # capped at C - 1
    assert satterthwaite_df(np.r_[100.0, np.full(30, 1.0)]) == pytest.approx((1e4 + 30) ** 2 / (1e8 + 30))
    assert np.isnan(satterthwaite_df(np.r_[1.0, 0.0, 0.0]))  # one cluster with data
    assert critical_value(0.95, 7) == pytest.approx(stats.t.ppf(0.975, 7))
    assert critical_value(0.95) == pytest.approx(stats.norm.ppf(0.975))
    w = t_wald(np.array([0.3, 0.3]), np.array([0.01, 0.01]), np.array([4.0, np.inf]))
    assert w["p_value"][0] == pytest.approx(2 * stats.t.sf(3.0, 4))
    assert w["p_value"][1] == pytest.approx(2 * stats.norm.sf(3.0))
    assert w["ci_high"][0] == pytest.approx(0.3 + stats.t.ppf(0.975, 4) * 0.1)


def test_a_cluster_holding_a_whole_part_makes_the_variance_unknown():
    assert np.isnan(adjusted_totals(np.array([[0.5, -0.5]]), np.array([[1.0, 0.0]]))[0])
    assert adjusted_totals(np.array([[0.0, -0.5]]), np.array([[1.0, 0.0]]))[0] == 0.0
    with pytest.raises(ValueError, match="shares"):
        cluster_robust_interval(0.0, np.ones(3), np.full(3, 1.5))
