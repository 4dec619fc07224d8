"""The weighted-binomial interval of a rate whose items decide all-or-nothing: its distribution against brute-force
enumeration, the binomial with equal items, exact conditional coverage given heavy-tailed sizes, and Monte Carlo
coverage with fresh item pools (where a symmetric interval with the right variance over-covers)."""
import itertools

import numpy as np
import pytest
from scipy import stats

from fair_pipeline.audit.stats.item_binomial import WeightedBinomial, mover_difference, weighted_binomial_interval


def _pareto_shares(rng, items, tail=1.3):
    sizes = np.ceil(2.0 * (1.0 + rng.pareto(tail, items)))
    return sizes / sizes.sum()


def _enumerated(shares):
    """Every outcome of the items' decisions: (0/1 matrix, the rate of each)."""
    bits = np.array(list(itertools.product([0, 1], repeat=shares.size)), dtype=float)
    return bits, bits @ shares


def _probabilities(bits, pi):
    return np.prod(np.where(bits == 1, pi, 1 - pi), axis=1)


def test_mid_cdf_is_the_enumerated_mid_distribution_when_every_item_is_in_the_head():
    shares = _pareto_shares(np.random.default_rng(0), 9)
    bits, sums = _enumerated(shares)
    dist = WeightedBinomial(shares, head=9)
    for pi in (0.03, 0.4, 0.77, 0.98):
        prob = _probabilities(bits, pi)
        for x in (0.0, shares.max(), 0.5, sums[137], 1.0):
            want = prob @ ((sums < x - 1e-12) + 0.5 * (np.abs(sums - x) <= 1e-12))
            assert dist.mid_cdf(x, pi) == pytest.approx(want, abs=1e-12), (pi, x)


def test_items_beyond_the_head_are_exact_for_integer_sizes():
    """16 items, 4 enumerated as the head and 12 as the rest's grid distribution: with integer sizes (shares of row
    counts) the mid-distribution is the enumerated one to 1e-9, at rare, middling and common decisions."""
    rng = np.random.default_rng(2)
    shares = _pareto_shares(rng, 16)
    bits, sums = _enumerated(shares)
    dist = WeightedBinomial(shares, head=4)
    for pi in (0.02, 0.5, 0.93):
        prob = _probabilities(bits, pi)
        for x in (0.0, sums[9], sums[4000], sums[33333], 0.61, 1.0):
            want = prob @ ((sums < x - 1e-12) + 0.5 * (np.abs(sums - x) <= 1e-12))
            assert dist.mid_cdf(x, pi) == pytest.approx(want, abs=1e-9), (pi, x)


def test_with_equal_items_it_is_the_mid_p_binomial():
    n = 60
    dist = WeightedBinomial(np.full(n, 1.0 / n))  # 8 items enumerated, 52 as the Jeffreys-smoothed binomial
    for k, pi in ((3, 0.05), (30, 0.45), (57, 0.9)):  # (at 0 Jeffreys' ½ atom is not mid-p's)
        mid = stats.binom.cdf(k - 1, n, pi) + 0.5 * stats.binom.pmf(k, n, pi)
        assert dist.mid_cdf(k / n, pi) == pytest.approx(mid, abs=0.015), (k, pi)
    # the mid-p binomial interval (inverted from scipy's binomial) for 9 of 60
    k = 9
    lo = stats.beta.ppf(0.025, k + 0.5, n - k + 0.5)  # Jeffreys, which mid-p tracks
    hi = stats.beta.ppf(0.975, k + 0.5, n - k + 0.5)
    low, high = weighted_binomial_interval(np.full(n, 1.0 / n), k / n)
    assert low == pytest.approx(lo, abs=0.006) and high == pytest.approx(hi, abs=0.006)



def test_with_thousands_of_equal_items_it_is_scipys_mid_p_binomial():
    """7,000 equal items (beyond the 4,096-point grid): the mid-p binomial interval exactly, i.e. ~1.96 binomial
    SEs on each side, not the twice as wide interval of shares split between grid points."""
    n, k = 7000, 560
    dist = WeightedBinomial(np.full(n, 1.0 / n))
    for pi in (0.07, 0.08, 0.09):
        mid = stats.binom.cdf(k - 1, n, pi) + 0.5 * stats.binom.pmf(k, n, pi)
        assert dist.mid_cdf(k / n, pi) == pytest.approx(mid, abs=1e-9), pi
    low, high = dist.interval(k / n)
    for limit, tail in ((low, 0.975), (high, 0.025)):
        assert stats.binom.cdf(k - 1, n, limit) + 0.5 * stats.binom.pmf(k, n, limit) == pytest.approx(tail, abs=1e-7)
    assert (high - low) / 2 == pytest.approx(1.96 * np.sqrt(0.08 * 0.92 / n), rel=0.03)

def test_exact_coverage_given_heavy_tailed_sizes_is_nominal_on_each_side():
    """All 2^9 outcomes of 9 items with Pareto(1.3) sizes: the probability that the interval misses π from below
    and from above, exactly, at π on a grid (the largest item holds 41% of the rows)."""
    shares = _pareto_shares(np.random.default_rng(4), 9)
    assert shares.max() > 0.4
    bits, sums = _enumerated(shares)
    intervals = np.array([weighted_binomial_interval(shares, x) for x in sums])
    covered, worst_tail = [], 0.0
    for pi in np.linspace(0.05, 0.95, 19):
        prob = _probabilities(bits, pi)
        below, above = prob @ (intervals[:, 0] > pi), prob @ (intervals[:, 1] < pi)
        covered.append(1 - below - above)
        worst_tail = max(worst_tail, below, above)
    assert 0.94 <= np.mean(covered) <= 0.97 and min(covered) >= 0.92, covered
    assert worst_tail <= 0.045


def test_monte_carlo_coverage_with_fresh_items_is_nominal_for_a_rate_and_a_difference():
    """300 replications, each a fresh pool of items with Pareto(1.3) impressions and one decision per item
    (probability 0.77 in a 150-item cell, 0.55 in an 80-item one): the rate and the difference of the two
    (MOVER) cover 93-97%, neither side missing more than 4.5%."""
    rng = np.random.default_rng(11)
    a_pi, b_pi = 0.77, 0.55
    miss = np.zeros((2, 2))
    reps = 300
    for _ in range(reps):
        sa, sb = _pareto_shares(rng, 150), _pareto_shares(rng, 80)
        a, b = sa @ (rng.random(150) < a_pi), sb @ (rng.random(80) < b_pi)
        ia, ib = weighted_binomial_interval(sa, a), weighted_binomial_interval(sb, b)
        for row, (low, high), truth in ((0, ia, a_pi), (1, mover_difference(a, ia, b, ib), a_pi - b_pi)):
            miss[row] += (truth < low, truth > high)
    miss /= reps
    assert np.all(1 - miss.sum(axis=1) >= 0.93) and np.all(1 - miss.sum(axis=1) <= 0.975), miss
    assert miss.max() <= 0.045, miss


def test_a_rare_decision_misses_on_both_sides():
    """400 replications, each a fresh pool of 300 items with Pareto(1.3) impressions deciding with probability 0.02
    (a handful of items of very unequal size decide): 93-97% coverage with each side missing 1.2-4%. (A binomial
    of the rest's effective size, two moments matched, had too little skew: its upper limits too high, the truth
    above the interval in 0.8-1.0% of such draws.)"""
    rng = np.random.default_rng(21)
    pi, reps = 0.02, 400
    miss = np.zeros(2)
    for _ in range(reps):
        shares = _pareto_shares(rng, 300)
        low, high = weighted_binomial_interval(shares, shares @ (rng.random(300) < pi))
        miss += (pi < low, pi > high)
    miss /= reps
    assert 0.93 <= 1 - miss.sum() <= 0.97 and np.all((miss >= 0.012) & (miss <= 0.04)), miss


def test_mover_is_the_sum_in_quadrature_of_each_sides_distance():
    low, high = mover_difference(0.6, (0.5, 0.75), 0.2, (0.1, 0.26))
    assert low == pytest.approx(0.4 - np.hypot(0.1, 0.06)) and high == pytest.approx(0.4 + np.hypot(0.15, 0.1))


def test_rates_of_zero_and_one_get_one_sided_intervals():
    shares = _pareto_shares(np.random.default_rng(5), 40)
    low, high = weighted_binomial_interval(shares, 0.0)
    assert low == 0.0 and 0 < high < 1
    low, high = weighted_binomial_interval(shares, 1.0)
    assert high == 1.0 and 0 < low < 1
    with pytest.raises(ValueError, match="positive share"):
        WeightedBinomial(np.zeros(3))
