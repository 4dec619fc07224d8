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
