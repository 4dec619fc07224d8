"""CR2 / effective-cluster t inference from per-cluster influence totals, against direct matrix computations."""
import numpy as np
import pytest
from scipy import stats

from fair_pipeline.audit.stats.small_sample import (
    adjusted_totals,
    cluster_robust_interval,
    critical_value,
    design_df,
    leverage_moments,
    satterthwaite_df,
    t_wald,
    welch_df,
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
    equal = cluster_robust_interval(y.mean(), totals, np.full(C, 1 / C))
    assert equal.se ** 2 == pytest.approx(cr1, rel=1e-12)
    assert equal.n_clusters == C and equal.effective_clusters <= C - 1
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


def _design_matrix_df(h):
    """tr(B)^2 / tr(B^2) of the CR2 quadratic form B = M' A M (M = I - 1h', A = diag(h^2 / (1 - h))) directly."""
    C = h.size
    M = np.eye(C) - np.outer(np.ones(C), h)
    B = M.T @ np.diag(h * h / (1 - h)) @ M
    return np.trace(B) ** 2 / np.trace(B @ B)


def test_design_df_is_the_satterthwaite_df_of_the_cr2_variance_of_a_weighted_mean():
    rng = np.random.default_rng(3)
    for tail in (1.1, 1.5, 3.0):
        h = 1.0 + rng.pareto(tail, 40)
        h /= h.sum()
        assert design_df(leverage_moments(h)) == pytest.approx(_design_matrix_df(h), rel=1e-9)
        halves = leverage_moments(h[:17]) + leverage_moments(h[17:])  # clusters streamed in chunks
        assert design_df(halves) == pytest.approx(_design_matrix_df(h), rel=1e-9)
    assert design_df(leverage_moments(np.full(12, 1 / 12))) == pytest.approx(11.0)  # equal clusters: C - 1
    assert np.isnan(design_df(leverage_moments(np.r_[1.0, 0.0])))  # one cluster holds the part
    # Monte Carlo: cluster means iid normal; the CR2 variance of the weighted mean has 2 E[V]^2 / Var(V) = df
    h = np.r_[0.6, np.full(25, 0.4 / 25)]
    x = rng.standard_normal((40000, h.size))
    est = x @ h
    v = np.sum((h * (x - est[:, None])) ** 2 / (1 - h), axis=1)
    assert 2 * v.mean() ** 2 / v.var() == pytest.approx(float(design_df(leverage_moments(h))), rel=0.06)
    # the totals' own effective clusters count the 25 small clusters as independent: they are not (all share the
    # big one's value through the estimate), and exactly when the variance comes out small they claim many df
    totals = h * (x - est[:, None]) / np.sqrt(1 - h)
    small = v < np.quantile(v, 0.25)
    assert np.median(satterthwaite_df(totals[small], axis=1)) > 3 * float(design_df(leverage_moments(h)))


def test_welch_df_combines_parts_and_leaves_empty_ones_out():
    assert welch_df(np.array([1.0, 1.0]), np.array([4.0, 4.0])) == pytest.approx(8.0)
    assert welch_df(np.array([1.0, 0.0]), np.array([4.0, np.nan])) == pytest.approx(4.0)
    assert np.isnan(welch_df(np.array([1.0, 1.0]), np.array([4.0, np.nan])))
    assert welch_df(np.array([3.0, 1.0]), np.array([2.0, 50.0])) == pytest.approx(16 / (9 / 2 + 1 / 50))


def test_an_item_holding_most_of_a_groups_positives_leaves_the_gap_few_df():
    from fair_pipeline.audit.stats.blocks import build_grid
    from fair_pipeline.audit.stats.cluster_pass import contrast_df, part_design_df
    from fair_pipeline.audit.stats.clustered import row_clusters
    from fair_pipeline.audit.stats.grid_audit import column_df, run_grid_audit

    rng = np.random.default_rng(5)
    n_items = 200
    group = (np.arange(n_items) >= 40).astype(int)
    label = rng.random(n_items) < 0.4
    label[0], group[0] = True, 0
    merit = rng.normal(size=n_items) + label
    merit[0] = -1.0
    shows = np.full(n_items, 5)
    shows[0] = 300  # one group-0 item shown 300 times: ~85% of the group's positive impressions
    item = np.repeat(np.arange(n_items), shows)
    s, y, codes = merit[item], label[item], group[item]
    res = run_grid_audit(build_grid(s, y, codes, np.array(["0", "1"])), [1.0], xauc=False,
                         clusters=row_clusters(item, s, y, codes))
    col = {name: i for i, name in enumerate(res["columns"])}
    w = np.zeros(len(res["pairs"]))
    w[col[("group", 0, 0)]], w[col[("group", 1, 1)]] = 1.0, -1.0
    k = int(np.searchsorted(res["cov_alphas"], 1.0))
    data = contrast_df(res["cluster_totals"], w)[k]
    design = part_design_df(res["cluster_designs"][0], w, res["pairs"])[k]
    got = column_df(res, [1.0], {col[("group", 0, 0)]: 1.0, col[("group", 1, 1)]: -1.0})[0]
    parts = [float(design_df(res["cluster_designs"][0].moments[c][:, v])) for c in (0, 1) for v in (0, 1)]
    assert parts[2] < 1.1 and min(parts[:2] + parts[3:]) > 20  # group 0's positives: about one cluster
    assert design < 3.0 and got == pytest.approx(min(data, design))
