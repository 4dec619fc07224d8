"""The paired difference of two fixed-threshold candidates as a combination of weighted binomials
(selection/elicitation/paired_binomial.py): the linear identity of the quadratic cost, which differences it takes,
its p-value against its own interval, and Monte Carlo coverage with fresh items under Pareto(1.3) popularity."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit.stats.item_binomial import weighted_binomial_interval
from fair_pipeline.selection.elicitation import FairQuadraticMetric
from fair_pipeline.selection.elicitation.paired import differences_vs_winner, group_codes, paired_cost_difference
from fair_pipeline.selection.elicitation.paired_binomial import _mover, paired_binomial_interval

METRIC = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], lam=0.5)
LABELS = ["a", "b"]


def _draw(rng, items=600, tail=1.3, shift=0.3):
    """Fresh items (group, relevance, a merit), Pareto(tail) impressions; candidate A decides merit >= 1,
    W merit + shift in group "b" >= 1; one row per impression with the item's label."""
    group = np.where(rng.random(items) < 0.4, "a", "b")
    relevant = rng.random(items) < 0.4
    merit = rng.normal(0.8 * relevant + 0.2 * (group == "b"), 0.6)
    shows = np.ceil(2.0 * (1.0 + rng.pareto(tail, items))).astype(int)
    item = np.repeat(np.arange(items), shows)
    rows = pd.DataFrame({"group": group[item], "n_pos": relevant[item].astype(int),
                         "n_neg": (~relevant[item]).astype(int)})
    return rows, merit[item], merit[item] + shift * (group[item] == "b"), item


def _population_difference(shift=0.3, n=2_000_000, seed=99):
    """cost(A) - cost(W) of the population of items (rates are per impression; sizes are independent of merit, so
    the impression-weighted rates equal the item rates)."""
    rng = np.random.default_rng(seed)
    group = np.where(rng.random(n) < 0.4, "a", "b")
    relevant = rng.random(n) < 0.4
    merit = rng.normal(0.8 * relevant + 0.2 * (group == "b"), 0.6)

    def rates(score):
        return np.array([[np.mean(score[(group == g) & relevant] >= 1), np.mean(score[(group == g) & ~relevant] < 1)]
                         for g in LABELS])

    return float(METRIC(rates(merit)) - METRIC(rates(merit + shift * (group == "b"))))


def test_the_quadratic_costs_difference_is_the_cells_combination_exactly():
    rows, a, w, item = _draw(np.random.default_rng(1))
    out = paired_cost_difference(METRIC, rows, a, w, LABELS, threshold_a=1.0, threshold_b=1.0, clusters=item)
    low, high, p = paired_binomial_interval(METRIC, rows, group_codes(rows["group"], LABELS), a >= 1, w >= 1, item)
    assert (out.ci_low, out.ci_high, out.p_value) == pytest.approx((low, high, p), rel=1e-12)
    assert low < out.estimate < high
    # the MOVER centre is the cost difference (phi quadratic: the gradient at the midpoint is exact)
    from fair_pipeline.selection.elicitation.paired_binomial import _cells, _rates
    codes = group_codes(rows["group"], LABELS)
    cells = _cells(rows, codes, (a >= 1).astype(float), (w >= 1).astype(float), item, 2)
    mid = (_rates(rows, codes, (a >= 1).astype(float), 2) + _rates(rows, codes, (w >= 1).astype(float), 2)) / 2
    assert _mover(cells, METRIC.gradient(mid), 0.95)[0] == pytest.approx(out.estimate, abs=1e-14)
    # one changed cell: the interval is that cell's weighted binomial scaled by its coefficient
    assert [c[3] for c in cells] == [(1, 0), (1, 1)]


def test_p_value_is_the_level_at_which_the_interval_reaches_zero():
    for seed, shift in ((2, 0.1), (3, 0.1), (2, 0.5)):
        rows, a, w, item = _draw(np.random.default_rng(seed), items=1500, shift=shift)
        codes = group_codes(rows["group"], LABELS)
        low, high, p = paired_binomial_interval(METRIC, rows, codes, a >= 1, w >= 1, item)
        assert (p < 0.05) == (low > 0 or high < 0)
        if 1e-6 < p < 1:
            at_p = paired_binomial_interval(METRIC, rows, codes, a >= 1, w >= 1, item, confidence=1 - p)
            assert min(abs(at_p[0]), abs(at_p[1])) < 5e-3 * (high - low), (seed, shift, p, at_p)  # p to ~1e-4


def test_it_steps_aside_where_its_model_does_not_hold():
    rows, a, w, item = _draw(np.random.default_rng(3))
    codes = group_codes(rows["group"], LABELS)
    # a scale that is not a positive number (no rates' variance to compare the thresholds' with)
    assert paired_binomial_interval(METRIC, rows, codes, a >= 1, w >= 1, item, scale=np.nan) is None
    # a randomized (fractional) decision
    assert paired_binomial_interval(METRIC, rows, codes, (a >= 1) * 0.5, w >= 1, item) is None
    # an item whose rows decide both ways (per-impression scores)
    noisy = a + np.random.default_rng(0).normal(0, 0.05, a.size)
    assert paired_binomial_interval(METRIC, rows, codes, noisy >= 1, w >= 1, item) is None
    # changes of both signs in one cell (W accepts some items A rejects and rejects others A accepts)
    other = a + np.where(np.arange(a.size) % 2 == 0, 0.3, -0.3)[item % 2]
    assert paired_binomial_interval(METRIC, rows, codes, a >= 1, other >= 1, item) is None
    # one cluster holding changed rows of two cells (an item with positives and negatives)
    merged = np.zeros(item.size, dtype=int)
    assert paired_binomial_interval(METRIC, rows, codes, a >= 1, w >= 1, merged) is None


def test_the_ranking_reports_it_for_fixed_thresholds():
    rows, a, w, item = _draw(np.random.default_rng(4), items=1500)
    frame = differences_vs_winner(METRIC, rows, {"A": a, "W": w}, LABELS, "W", thresholds={"A": 1.0, "W": 1.0},
                                  clusters=item, min_disagreeing=1)
    low, high, p = paired_binomial_interval(METRIC, rows, group_codes(rows["group"], LABELS), a >= 1, w >= 1, item)
    assert (frame.loc["A", "diff_ci_low"], frame.loc["A", "diff_ci_high"], frame.loc["A", "diff_p"]) == pytest.approx(
        (low, high, p), rel=1e-12)


def test_estimated_thresholds_scale_it_by_the_thresholds_share_of_the_se():
    """Selection-rate candidates: the cells' interval at the estimated thresholds, both half-widths times
    SE(rates' + thresholds' influence) / SE(rates' influence), each CR2 over the items; fixed thresholds: times 1."""
    from fair_pipeline.audit.stats.small_sample import cluster_robust_interval
    from fair_pipeline.selection.elicitation.paired import candidate_parts, clustered_parts, threshold_scale
    rows, a, w, item = _draw(np.random.default_rng(6), items=1500)
    codes = group_codes(rows["group"], LABELS)
    out = paired_cost_difference(METRIC, rows, a, w, LABELS, selection_rate=0.4, clusters=item)
    (_, parts_a, ta), (_, parts_w, tw) = (candidate_parts(METRIC, rows, s, LABELS, selection_rate=0.4,
                                                          n_clusters=np.unique(item).size) for s in (a, w))
    # the same candidates with their thresholds fixed: the rates' influence alone, computed apart
    (_, fixed_a, _), (_, fixed_w, _) = (candidate_parts(METRIC, rows, s, LABELS, threshold=t) for s, t in ((a, ta), (w, tw)))
    assert not (fixed_a - fixed_w)[:, 2].any() and (parts_a - parts_w)[:, 2].any()
    se = [cluster_robust_interval(0.0, *clustered_parts(p, rows, LABELS, item)).se
          for p in (parts_a - parts_w, fixed_a - fixed_w)]
    scale = threshold_scale(parts_a - parts_w, rows, LABELS, item)
    assert scale == pytest.approx(se[0] / se[1], rel=1e-12) and threshold_scale(fixed_a - fixed_w, rows, LABELS, item) == 1
    low, high, _ = paired_binomial_interval(METRIC, rows, codes, a >= ta, w >= tw, item)
    assert out.ci_low == pytest.approx(out.estimate - scale * (out.estimate - low), rel=1e-9)
    assert out.ci_high == pytest.approx(out.estimate + scale * (high - out.estimate), rel=1e-9)
    assert abs(scale - 1) > 0.01 and (out.p_value < 0.05) == (out.ci_low > 0 or out.ci_high < 0)
    ranked = differences_vs_winner(METRIC, rows, {"A": a, "W": w}, LABELS, "W", selection_rate=0.4, clusters=item)
    assert (ranked.loc["A", "diff_ci_low"], ranked.loc["A", "diff_ci_high"]) == pytest.approx((out.ci_low, out.ci_high))



def test_with_many_equal_sized_items_it_is_about_two_ses_wide():
    """The large-sample regime (20,000 items shown 1 + Poisson(4) times, one label per item, ~860 items between the
    estimated thresholds, each cell thousands of items and over 4,096 rows): every cell's weighted binomial is a
    near-normal binomial, so the interval is about 1.96 of the difference's own SE on each side, as any interval
    must be at hundreds of df (cells whose shares were split between grid points a step apart gave 3.3-3.6 SEs)."""
    rng = np.random.default_rng(4)
    items = 20000
    group = np.where(rng.random(items) < 0.6, "b", "a")
    relevant = rng.random(items) < np.where(group == "b", 0.45, 0.35)
    merit = relevant + 0.3 * (group == "b") + rng.normal(0, 1, items)
    shows = 1 + rng.poisson(4, items)
    rows = pd.DataFrame({"group": group, "n_pos": shows * relevant, "n_neg": shows * ~relevant})
    out = paired_cost_difference(METRIC, rows, merit, merit + 0.3 * (group == "b"), LABELS, selection_rate=0.4,
                                 clusters=np.arange(items))
    assert out.disagreeing > 500 and out.df > 500
    sides = np.array([out.estimate - out.ci_low, out.ci_high - out.estimate]) / out.se
    assert np.all((sides > 1.75) & (sides < 2.15)), sides
    assert sides[0] != pytest.approx(sides[1], rel=1e-3)  # the cells' interval, not the symmetric t one

@pytest.mark.slow
@pytest.mark.parametrize("shift", [0.1, 0.3])
def test_monte_carlo_coverage_with_fresh_items_and_pareto_popularity(shift):
    """100 replications of 1,500 fresh items: the interval covers the population difference at least 92% of the
    time and neither side misses more than 5%. With W's shift 0.3 ~20% of group "b"'s items change and the
    gradient's own error dominates: without its term (`_slope_variance`) this covered 0.63."""
    truth = _population_difference(shift)
    rng = np.random.default_rng(5)
    below = above = 0
    reps = 100
    for _ in range(reps):
        rows, a, w, item = _draw(rng, items=1500, shift=shift)
        low, high, _ = paired_binomial_interval(METRIC, rows, group_codes(rows["group"], LABELS), a >= 1, w >= 1, item)
        below += truth < low
        above += truth > high
    assert 1 - (below + above) / reps >= 0.92 and max(below, above) / reps <= 0.05, (truth, below, above)
