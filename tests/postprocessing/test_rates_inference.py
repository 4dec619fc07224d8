"""Held-out rates' t reference rebuilt from the matrices: the smaller of the cells' totals' effective clusters and
the Bell-McCaffrey design df of their shares (Welch-combined over a difference's two cells)."""
import numpy as np
import pytest
from scipy import stats

from fair_pipeline.audit.stats.exchangeable import exchangeable_variance
from fair_pipeline.audit.stats.item_binomial import mover_difference, weighted_binomial_interval
from fair_pipeline.audit.stats.small_sample import satterthwaite_df
from fair_pipeline.postprocessing.rates import rate_table


def _design_matrix_df(h):
    """tr(B)^2 / tr(B^2) of the CR2 quadratic form B = M' A M (M = I - 1h', A = diag(h^2 / (1 - h)))."""
    C = h.size
    M = np.eye(C) - np.outer(np.ones(C), h)
    B = M.T @ np.diag(h * h / (1 - h)) @ M
    return np.trace(B) ** 2 / np.trace(B @ B)


def _cell(p, item, mask):
    """(CR2-adjusted residual totals, shares) of a cell mean clustered by item, by the definitions."""
    ids, codes = np.unique(item[mask], return_inverse=True)
    n_c = np.bincount(codes).astype(float)
    h = n_c / n_c.sum()
    totals = np.bincount(codes, weights=p[mask] - p[mask].mean()) / mask.sum()
    return totals / np.sqrt(1 - h), h


def test_rate_df_is_the_smaller_of_the_totals_count_and_the_welch_design_df():
    rng = np.random.default_rng(4)
    items = 60
    shows = np.ceil(2 * (1 + rng.pareto(1.3, items))).astype(int)
    item = np.repeat(np.arange(items), shows)
    g = np.where(item % 4 == 0, "a", "b")
    y = np.repeat(rng.random(items) < 0.5, shows)
    p = np.repeat((rng.random(items) < 0.7).astype(float), shows)  # one 0/1 decision per item
    t = rate_table(p, y, g, clusters=item).set_index(["group", "metric"])
    cells = {group: _cell(p, item, (g == group) & y) for group in ("a", "b")}
    # where the exchangeable-items variance (audit.stats.exchangeable, tested by hand there) exceeds CR2's, it and
    # its df are used instead; the CR2 rows take the df rule under test
    exchangeable = {group: exchangeable_variance(a, h) for group, (a, h) in cells.items()}
    for group, (adjusted, h) in cells.items():
        cr2 = (adjusted @ adjusted, min(float(satterthwaite_df(adjusted)), _design_matrix_df(h)))
        want = exchangeable[group] if exchangeable[group][0] > cr2[0] else cr2
        assert t.loc[(group, "tpr"), "df"] == pytest.approx(want[1], rel=1e-9)
        assert t.loc[(group, "tpr"), "se"] ** 2 == pytest.approx(want[0], rel=1e-9)
    v = {k: a @ a for k, (a, _) in cells.items()}
    welch = sum(v.values()) ** 2 / sum(v[k] ** 2 / _design_matrix_df(cells[k][1]) for k in v)
    totals_count = float(satterthwaite_df(np.r_[cells["a"][0], cells["b"][0]]))  # disjoint items: concatenated
    diff = t.loc[("b - a", "tpr")]
    pooled = sum(e[0] for e in exchangeable.values())
    if pooled > sum(v.values()):
        welch_ex = pooled ** 2 / sum(e[0] ** 2 / e[1] for e in exchangeable.values())
        assert diff["se"] ** 2 == pytest.approx(pooled, rel=1e-9) and diff["df"] == pytest.approx(welch_ex, rel=1e-9)
    else:
        assert diff["df"] == pytest.approx(min(welch, totals_count), rel=1e-9)
    # one decision per item: the CI is the weighted binomial's (MOVER over the two cells), not t x se
    assert diff["interval"] == "weighted binomial"
    rate = {k: float(p[(g == k) & y].mean()) for k in ("a", "b")}
    want = mover_difference(rate["b"], weighted_binomial_interval(cells["b"][1], rate["b"]),
                            rate["a"], weighted_binomial_interval(cells["a"][1], rate["a"]))
    assert (diff["ci_low"], diff["ci_high"]) == pytest.approx(want, rel=1e-9)


def test_equal_clusters_with_few_dissenting_items_take_the_totals_count():
    # 20 items shown 5 times each, 3 decided 0: the design df is 19, the totals' count ~5 (the smaller is used;
    # docs/audit_inference.md measures what that costs: over-coverage of a 45-item group's rates)
    item = np.repeat(np.arange(20), 5)
    p = np.repeat(np.r_[np.zeros(3), np.ones(17)], 5)
    row = rate_table(p, np.ones(p.size, bool), np.full(p.size, "a"), clusters=item).set_index(
        ["group", "metric"]).loc[("a", "tpr")]
    adjusted, h = _cell(p, item, np.ones(p.size, bool))
    assert _design_matrix_df(h) == pytest.approx(19.0)
    assert row["df"] == pytest.approx(float(satterthwaite_df(adjusted))) and row["df"] < 7.0


def test_the_ci_is_the_weighted_binomial_only_where_every_cluster_decides_all_or_nothing():
    rng = np.random.default_rng(8)
    shows = np.ceil(2 * (1 + rng.pareto(1.3, 50))).astype(int)
    item = np.repeat(np.arange(50), shows)
    y, g = np.ones(item.size, bool), np.full(item.size, "a")
    p = np.repeat((rng.random(50) < 0.8).astype(float), shows)
    row = rate_table(p, y, g, clusters=item).set_index(["group", "metric"]).loc[("a", "tpr")]
    shares = np.bincount(item) / item.size
    assert row["interval"] == "weighted binomial"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(weighted_binomial_interval(shares, p.mean()), rel=1e-9)
    mixed = p.copy()
    mixed[np.flatnonzero(shows > 2)[0]] = 1 - mixed[np.flatnonzero(shows > 2)[0]]  # one item decides both ways
    row = rate_table(mixed, y, g, clusters=item).set_index(["group", "metric"]).loc[("a", "tpr")]
    assert row["interval"] == "t"
    assert (row["ci_high"] - row["ci_low"]) / 2 == pytest.approx(stats.t.ppf(0.975, row["df"]) * row["se"], rel=1e-9)
    # every rule accepted every item: SE 0, but the rate still has an interval (one-sided, below 1)
    row = rate_table(np.ones(item.size), y, g, clusters=item).set_index(["group", "metric"]).loc[("a", "tpr")]
    assert row["se"] == 0 and row["ci_high"] == 1.0 and 0.8 < row["ci_low"] < 1.0
    # rows as clusters, 9 of 12 accepted: the mid-p binomial interval (8 rows enumerated, 4 as a smoothed binomial)
    p12 = np.r_[np.ones(9), np.zeros(3)]
    row = rate_table(p12, np.ones(12, bool), np.full(12, "a")).set_index(["group", "metric"]).loc[("a", "tpr")]
    assert row["interval"] == "weighted binomial" and row["ci_low"] < 0.75 < row["ci_high"]
    midp = lambda pi: stats.binom.cdf(8, 12, pi) + 0.5 * stats.binom.pmf(9, 12, pi)  # P(X < 9) + P(X = 9) / 2
    assert midp(row["ci_high"]) == pytest.approx(0.025, abs=0.01) and 1 - midp(row["ci_low"]) == pytest.approx(0.025, abs=0.01)
