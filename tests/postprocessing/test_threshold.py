"""ThresholdPostProcessor: the LP against brute force on small hulls, exact in-sample rates, errors, SEs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.spatial import ConvexHull

from fair_pipeline.postprocessing import (
    PostProcessingInputError,
    ThresholdPostProcessor,
    UnseenGroupError,
    equalized_odds_gap,
    rate_table,
    roc_points,
)


def _small(seed, n=(14, 18)):
    rng = np.random.default_rng(seed)
    s, y, g = [], [], []
    for a, size in enumerate(n):
        yy = rng.random(size) < (0.35 + 0.2 * a)
        yy[:2] = [True, False]
        s.append(np.round(rng.normal(yy * (1.0 + a), 1.0), 1))
        y.append(yy)
        g += [f"g{a}"] * size
    return np.concatenate(s), np.concatenate(y), np.array(g, dtype=object)


def _region(s, y):
    """Reachable (FPR, TPR) of randomized thresholds: the convex hull of ALL ROC points (Claim 3.2),
    as half-planes A p + b <= 0 (scipy Qhull, independent of the package's hull code)."""
    c = roc_points(s, y)
    return ConvexHull(np.c_[c.fpr, c.tpr]).equations


def _inside(eq, x, y, tol=1e-9):
    return (eq[:, 0][None, :] * x[:, None] + eq[:, 1][None, :] * y[:, None] + eq[:, 2][None, :] <= tol).all(1)


GRID = np.linspace(0, 1, 401)


@pytest.mark.parametrize("seed", range(8))
def test_equalized_odds_lp_matches_brute_force_over_a_grid(seed):
    s, y, g = _small(seed, n=(14, 18) if seed < 5 else (14, 18, 16))  # two and three groups
    pp = ThresholdPostProcessor("equalized_odds").fit(s, y, sensitive_features=g)
    X, Y = np.meshgrid(GRID, GRID)
    X, Y = X.ravel(), Y.ravel()
    ok = np.ones(X.size, bool)
    acc = np.zeros(X.size)
    for a in np.unique(g):
        m = g == a
        ok &= _inside(_region(s[m], y[m]), X, Y)
        acc += (y[m].sum() * Y + (~y[m]).sum() * (1 - X)) / y.size
    brute = acc[ok].max()
    # the LP is exact: at least the best grid point, and within the grid's resolution of it
    assert pp.objective_value_ >= brute - 1e-9
    assert pp.objective_value_ <= brute + 2 / 400
    op = pp.operating_points_
    assert np.ptp(op["fpr"]) < 1e-9 and np.ptp(op["tpr"]) < 1e-9
    for a, row in op.set_index("group").iterrows():
        m = g == a
        assert _inside(_region(s[m], y[m]), np.array([row.fpr]), np.array([row.tpr]), tol=1e-7)[0]


@pytest.mark.parametrize("seed", range(6))
def test_equal_opportunity_lp_matches_brute_force(seed):
    s, y, g = _small(seed + 100)
    pp = ThresholdPostProcessor("equal_opportunity").fit(s, y, sensitive_features=g)
    best = -np.inf
    for t in GRID:  # common TPR; each group takes its smallest reachable FPR there
        total, feasible = 0.0, True
        for a in ("g0", "g1"):
            m = g == a
            inside = _inside(_region(s[m], y[m]), GRID, np.full(GRID.size, t))
            if not inside.any():
                feasible = False
                break
            x = GRID[inside].min()
            total += (y[m].sum() * t + (~y[m]).sum() * (1 - x)) / y.size
        if feasible:
            best = max(best, total)
    assert best - 1e-9 <= pp.objective_value_ <= best + 2 / 400
    assert np.ptp(pp.operating_points_["tpr"]) < 1e-9


@pytest.mark.parametrize("constraint", ["equalized_odds", "equal_opportunity", "demographic_parity"])
@pytest.mark.parametrize("objective", ["accuracy", "balanced_accuracy", {"false_positive": 1.0, "false_negative": 3.0}])
def test_in_sample_expected_rates_equal_the_lp_rates(constraint, objective):
    s, y, g = _small(7, n=(60, 80))
    pp = ThresholdPostProcessor(constraint, objective).fit(s, y, sensitive_features=g)
    p = pp.predict_expected(s, sensitive_features=g)
    for _, row in pp.operating_points_.iterrows():
        m = g == row.group
        assert p[m & y].mean() == pytest.approx(row.tpr, abs=1e-9)
        assert p[m & ~y].mean() == pytest.approx(row.fpr, abs=1e-9)
        assert p[m].mean() == pytest.approx(row.selection_rate, abs=1e-9)
    if constraint == "equalized_odds":
        assert equalized_odds_gap(p, y, g) < 1e-9
    if constraint == "demographic_parity":
        assert np.ptp(pp.operating_points_["selection_rate"]) < 1e-9
    if objective == "accuracy":
        assert np.mean(np.where(y, p, 1 - p)) == pytest.approx(pp.objective_value_, abs=1e-9)
    if isinstance(objective, dict):
        assert np.mean(np.where(y, 3.0 * (1 - p), p)) == pytest.approx(pp.objective_value_, abs=1e-9)


def test_the_optimum_beats_every_single_threshold_pair_meeting_the_constraint():
    # equal opportunity with deterministic per-group thresholds is a subset of the derived predictors
    s, y, g = _small(3, n=(40, 50))
    pp = ThresholdPostProcessor("demographic_parity").fit(s, y, sensitive_features=g)
    best = -np.inf
    for t0 in np.r_[np.unique(s), np.inf]:
        for t1 in np.r_[np.unique(s), np.inf]:
            d = np.where(g == "g0", s >= t0, s >= t1)
            if abs(d[g == "g0"].mean() - d[g == "g1"].mean()) < 1e-12:
                best = max(best, np.mean(d == y))
    assert pp.objective_value_ >= best - 1e-12


def test_randomized_predictions_average_to_the_expected_ones():
    s, y, g = _small(5, n=(200, 300))
    pp = ThresholdPostProcessor().fit(s, y, sensitive_features=g)
    p = pp.predict_expected(s, sensitive_features=g)
    draws = np.mean([pp.predict(s, sensitive_features=g, random_state=r) for r in range(400)], axis=0)
    assert np.abs(draws - p).max() < 0.1
    np.testing.assert_array_equal(pp.predict(s, sensitive_features=g, random_state=1),
                                  pp.predict(s, sensitive_features=g, random_state=1))
    assert np.all(np.diff(pp.predict_expected(np.sort(s), sensitive_features=np.full(s.size, "g0"))) >= 0)


def test_errors_name_the_problem():
    s, y, g = _small(0)
    with pytest.raises(PostProcessingInputError, match="'g1' has .* positives and 0 negatives"):
        ThresholdPostProcessor().fit(s, np.where(g == "g1", 1, y), sensitive_features=g)
    pp = ThresholdPostProcessor().fit(s, y, sensitive_features=g)
    with pytest.raises(UnseenGroupError, match=r"\['g9'\]"):
        pp.predict(s[:3], sensitive_features=["g0", "g9", "g1"])
    with pytest.raises(PostProcessingInputError, match="constraint must be"):
        ThresholdPostProcessor("parity").fit(s, y, sensitive_features=g)
    with pytest.raises(PostProcessingInputError, match="cost weights"):
        ThresholdPostProcessor(objective={"fp": 1}).fit(s, y, sensitive_features=g)
    with pytest.raises(PostProcessingInputError, match="not fitted"):
        ThresholdPostProcessor().predict_expected(s, sensitive_features=g)
    with pytest.raises(PostProcessingInputError, match="missing group"):
        ThresholdPostProcessor().fit(s, y, sensitive_features=np.where(np.arange(s.size) == 3, None, g))


def test_rate_ses_are_the_plain_and_the_cluster_formulas():
    rng = np.random.default_rng(0)
    n = 500
    p, y = rng.random(n), rng.random(n) < 0.5
    g = np.where(rng.random(n) < 0.4, "a", "b")
    t = rate_table(p, y, g).set_index(["group", "metric"])
    m = (g == "a") & y
    # a cell mean over independent rows: CR2 with one row per cluster is the cell's own m/(m-1), i.e. s^2 / m
    dev = p[m] - p[m].mean()
    k = m.sum()
    assert t.loc[("a", "tpr"), "se"] == pytest.approx(np.sqrt(k / (k - 1) * (dev @ dev)) / k, rel=1e-9)
    assert t.loc[("a", "tpr"), "se"] == pytest.approx(p[m].std(ddof=1) / np.sqrt(k), rel=1e-9)
    assert t.loc[("a", "tpr"), "clusters"] == k and (k - 1) / 3 < t.loc[("a", "tpr"), "df"] <= k - 1
    # rows duplicated inside clusters carry no new information: same SE as the single copy
    t2 = rate_table(np.r_[p, p], np.r_[y, y], np.r_[g, g], clusters=np.r_[np.arange(n), np.arange(n)])
    np.testing.assert_allclose(t2["se"], t["se"].to_numpy(), rtol=1e-9)
    # ... while pretending the copies are independent shrinks it by about sqrt(2)
    t3 = rate_table(np.r_[p, p], np.r_[y, y], np.r_[g, g])
    assert np.median(t["se"].to_numpy() / t3["se"].to_numpy()) == pytest.approx(np.sqrt(2), rel=0.02)


def _cr2_of_a_mean(values, clusters) -> float:
    """Bell-McCaffrey CR2 variance of a mean by its matrix definition: residuals of each cluster times
    (I - H_cc)^(-1/2), H = 11'/n the hat matrix of the intercept."""
    n, r, total = values.size, values - values.mean(), 0.0
    for c in np.unique(clusters):
        block = clusters == c
        w, v = np.linalg.eigh(np.eye(block.sum()) - np.full((block.sum(),) * 2, 1.0 / n))
        total += (np.ones(block.sum()) @ (v @ np.diag(w ** -0.5) @ v.T) @ r[block]) ** 2
    return total / n**2


def test_clustered_rates_are_cr2_with_t_at_few_effective_clusters():
    rng = np.random.default_rng(2)
    items = 40
    shows = np.ceil(2 * (1 + rng.pareto(1.2, items))).astype(int)  # a few items hold most rows
    item = np.repeat(np.arange(items), shows)
    g = np.where(item % 3 == 0, "a", "b")
    y = np.repeat(rng.random(items) < 0.5, shows)
    p = np.repeat(rng.random(items), shows)
    t = rate_table(p, y, g, clusters=item).set_index(["group", "metric"])
    cells = {level: (g == level) & y for level in ("a", "b")}
    cr2 = {level: _cr2_of_a_mean(p[cell], item[cell]) for level, cell in cells.items()}
    exchangeable = {level: _exchangeable_of_a_mean(p[cell], item[cell]) for level, cell in cells.items()}
    row = t.loc[("a", "tpr")]
    assert row["se"] ** 2 == pytest.approx(max(cr2["a"], exchangeable["a"]), rel=1e-9)
    assert exchangeable["a"] > cr2["a"]  # here: the popular items' residuals happened to be small
    assert row["clusters"] == np.unique(item[cells["a"]]).size
    assert 1 <= row["df"] <= row["clusters"] - 1
    half = (row["ci_high"] - row["ci_low"]) / 2
    assert half == pytest.approx(stats.t.ppf(0.975, row["df"]) * row["se"], rel=1e-9)
    # a difference is the sum of its two cells' parts (disjoint cells: variances add), the larger of the two sums
    diff = t.loc[("b - a", "tpr")]
    assert diff["se"] ** 2 == pytest.approx(max(cr2["a"] + cr2["b"], exchangeable["a"] + exchangeable["b"]), rel=1e-9)


def _exchangeable_of_a_mean(values, clusters) -> float:
    """The exchangeable-items variance of a mean (audit.stats.exchangeable) from its CR2 cluster totals: each
    cluster's total over its share of the rows is a residual r_c of common variance, Var = mean(r_c²) Σ share²."""
    n, r = values.size, values - values.mean()
    codes, sizes = np.unique(clusters, return_inverse=True)[1], np.bincount(np.unique(clusters, return_inverse=True)[1])
    share = sizes / n
    totals = np.bincount(codes, weights=r) / n / np.sqrt(1 - share)
    return float(((totals / share) ** 2).mean() * (share ** 2).sum())


def test_gap_ci_covers_at_the_nominal_rate():
    # Monte Carlo: held-out samples from a known population; the true expected TPR gap of the fitted rule
    rng = np.random.default_rng(1)

    def draw(n):
        g = np.where(rng.random(n) < 0.4, "a", "b")
        y = rng.random(n) < np.where(g == "a", 0.3, 0.5)
        s = rng.normal(y * 1.2 + (g == "b") * 0.5, 1.0)
        return s, y, g

    s, y, g = draw(4000)
    pp = ThresholdPostProcessor("equal_opportunity").fit(s, y, sensitive_features=g)
    S, Yb, Gb = draw(400_000)
    P = pp.predict_expected(S, sensitive_features=Gb)
    truth = P[(Gb == "b") & Yb].mean() - P[(Gb == "a") & Yb].mean()
    hits = 0
    for _ in range(300):
        s, y, g = draw(1500)
        row = pp.evaluate(s, y, sensitive_features=g).set_index(["group", "metric"]).loc[("b - a", "tpr")]
        hits += row.ci_low <= truth <= row.ci_high
    assert 0.91 <= hits / 300 <= 0.98


def test_evaluate_returns_groups_and_differences():
    s, y, g = _small(2, n=(100, 120))
    pp = ThresholdPostProcessor().fit(s, y, sensitive_features=g)
    t = pp.evaluate(s, y, sensitive_features=g, clusters=np.arange(s.size) // 2)
    assert set(t["group"]) == {"g0", "g1", "all", "g1 - g0"}
    gap = t.set_index(["group", "metric"]).loc[("g1 - g0", "tpr")]
    assert abs(gap.estimate) < 1e-9 and gap.se > 0 and isinstance(t, pd.DataFrame)
