"""The grid distribution of a weighted Bernoulli sum against brute-force enumeration of every outcome: exact where
the weights are multiples of the grid's step, close where they are split between grid points."""
import itertools

import numpy as np
import pytest

from fair_pipeline.audit.stats.bernoulli_sum import BernoulliSum


def _enumerated_mid_cdf(weights, x, pi):
    bits = np.array(list(itertools.product([0, 1], repeat=weights.size)), dtype=float)
    sums, prob = bits @ weights, np.prod(np.where(bits == 1, pi, 1 - pi), axis=1)
    return prob @ ((sums < x - 1e-12) + 0.5 * (np.abs(sums - x) <= 1e-12))


def _outcomes(weights, rng, count=6):
    """Points to read the distribution at: sums of random outcomes (atoms), 0, midpoints and beyond the range."""
    atoms = [weights @ (rng.random(weights.size) < q) for q in np.linspace(0.05, 0.9, count)]
    return np.array(atoms + [0.0, weights.sum() * 0.37, weights.sum(), -0.1, weights.sum() + 0.1])


@pytest.mark.parametrize("pi", [0.015, 0.3, 0.8, 0.99])
def test_integer_proportional_weights_are_exact(pi):
    """Pareto(1.3) sizes (integers, so every share is a multiple of the grid's step): the mid-distribution at the
    sums of random outcomes (atoms, where mid-p halves the atom) is the enumerated one to 1e-10."""
    rng = np.random.default_rng(3)
    sizes = np.ceil(2.0 * (1.0 + rng.pareto(1.3, 13)))
    weights = sizes / sizes.sum()
    dist = BernoulliSum(weights)
    x = _outcomes(weights, rng)
    np.testing.assert_allclose(dist.mid_cdf(x, pi), [_enumerated_mid_cdf(weights, v, pi) for v in x], atol=1e-10)


@pytest.mark.parametrize("pi", [0.02, 0.5, 0.9])
def test_weights_off_the_grid_are_split_with_their_mean_kept(pi):
    """Continuous weights (no common step): each is split between two grid points; at the default 4096 points over the range
    the mid-distribution at atoms and between them is within 0.005 of the enumerated one (the split moves each atom
    by less than a step; the linear reading between grid points recovers a split atom's half)."""
    rng = np.random.default_rng(8)
    weights = rng.pareto(1.3, 12) + 0.2
    dist = BernoulliSum(weights)
    x = _outcomes(weights, rng)
    got = dist.mid_cdf(x, pi)
    want = np.array([_enumerated_mid_cdf(weights, v, pi) for v in x])
    np.testing.assert_allclose(got, want, atol=0.005)
    assert dist.step < weights.min() and dist.size >= dist.top


def test_the_whole_distribution_has_the_right_mean_and_no_wrap_around():
    rng = np.random.default_rng(1)
    weights = rng.random(400) + 0.01
    dist = BernoulliSum(weights)
    for pi in (0.001, 0.4, 0.999):
        prob = dist.probabilities(pi)
        grid = np.arange(dist.size) * dist.step
        assert prob.sum() == pytest.approx(1.0, abs=1e-9)
        assert prob @ grid == pytest.approx(pi * weights.sum(), rel=1e-9)
    with pytest.raises(ValueError, match="positive weight"):
        BernoulliSum(np.zeros(3))


def _convolved_probabilities(sizes, pi):
    """P(Σ sizes_c b_c = j) for every j, by adding one item at a time (brute force on the integer lattice)."""
    prob = np.zeros(int(sizes.sum()) + 1)
    prob[0] = 1.0
    for m in sizes.astype(int):
        shifted = np.zeros_like(prob)
        shifted[m:] = prob[:-m]
        prob = (1.0 - pi) * prob + pi * shifted
    return prob


@pytest.mark.parametrize("pi", [0.04, 0.5, 0.97])
def test_thousands_of_small_items_stay_on_the_lattice_of_one_count(pi):
    """3,000 items of 1-12 rows (shares of integer counts, a range of ~15,000 counts: far more than the grid's 4,096
    points): the windowed lattice is exact, the mid-distribution equals the item-by-item convolution to 1e-10 at
    atoms inside and beyond the window, and the variance is the weighted binomial's π(1 − π) Σ s², where splitting
    every share between grid points a step apart would add π Σ f(1 − f) δ² (here several times that variance)."""
    rng = np.random.default_rng(5)
    sizes = 1 + rng.poisson(4, 3000).clip(max=11)
    weights = sizes / sizes.sum()
    dist = BernoulliSum(weights)
    assert dist.exact and dist.step == pytest.approx(1 / sizes.sum(), rel=1e-12)
    exact = _convolved_probabilities(sizes, pi)
    mid = np.cumsum(exact) - 0.5 * exact
    mean = int(pi * sizes.sum())
    counts = np.array([0, mean - 400, mean - 37, mean, mean + 53, mean + 400, sizes.sum()]).clip(0, sizes.sum())
    np.testing.assert_allclose(dist.mid_cdf(counts / sizes.sum(), pi), mid[counts], atol=1e-10)
    grid = np.arange(dist.size) * dist.step
    prob = dist.probabilities(pi)
    variance = prob @ grid ** 2 - (prob @ grid) ** 2
    assert variance == pytest.approx(pi * (1 - pi) * (weights ** 2).sum(), rel=1e-8)
