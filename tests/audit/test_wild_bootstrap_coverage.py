"""benchmarks/wild_bootstrap_coverage.py: its restricted wild cluster bootstrap against a brute-force re-estimation
on wild data, its coverage where the answer is known, and the documented command at a tiny size."""
import itertools

import numpy as np
import pytest

from benchmarks.wild_bootstrap_coverage import WildTotals, main


def _two_parts(rng, sizes=(4, 5)):
    """A contrast of two share-weighted means (signs +1 and -1) with its clusters' values, shares and CR2 totals."""
    part = np.repeat([0, 1], sizes)
    x = rng.normal(size=part.size) + rng.exponential(size=part.size)
    rows = rng.integers(1, 9, part.size).astype(float)
    h = rows / np.bincount(part, weights=rows)[part]
    sign = np.where(part == 0, 1.0, -1.0)
    means = np.bincount(part, weights=h * x)
    adjusted = sign * h * (x - means[part]) / np.sqrt(1 - h)
    return part, x, h, sign, means, adjusted


def _brute_force_t(part, x, h, sign, means, theta0, w):
    """T* from re-estimating each part's weighted mean on wild data drawn around the means restricted to θ0."""
    v = np.bincount(part, weights=(h * (x - means[part])) ** 2 / (1 - h))
    theta_hat = float(np.sum(sign[[0, -1]] * means))
    restricted = means + sign[[0, -1]] * v / v.sum() * (theta0 - theta_hat)
    wild = restricted[part] + w * (x - restricted[part])
    star = np.bincount(part, weights=h * wild)
    resid = h * (wild - star[part])
    return (float(np.sum(sign[[0, -1]] * star)) - theta0) / np.sqrt(np.sum(resid ** 2 / (1 - h)))


def test_restricted_bootstrap_equals_re_estimating_the_parts_on_wild_data():
    rng = np.random.default_rng(4)
    part, x, h, sign, means, adjusted = _two_parts(rng)
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=part.size)))  # every Rademacher draw: exact
    wild = WildTotals(adjusted, h, part, signs)
    theta_hat = means[0] - means[1]
    assert wild.se == pytest.approx(np.sqrt(np.sum(adjusted ** 2)))
    for distance in (0.0, 0.7, -1.9, 3.2):
        theta0 = theta_hat + distance * wild.se
        restricted = wild.u - wild.h * wild.alloc * distance * wild.se
        expected = np.array([_brute_force_t(part, x, h, sign, means, theta0, w) for w in signs])
        np.testing.assert_allclose(wild.bootstrap_t(restricted), expected, rtol=1e-10, atol=1e-12)
        assert wild.p_value(distance) == pytest.approx(np.mean(np.abs(expected) >= abs(distance) * (1 - 1e-9)))
    # unrestricted: the draws around the estimates themselves
    expected = np.array([_brute_force_t(part, x, h, sign, means, theta_hat, w) for w in signs])
    assert wild.unrestricted_quantile() == pytest.approx(np.quantile(np.abs(expected), 0.95))


def test_restricted_interval_ends_where_the_p_value_crosses_five_percent():
    rng = np.random.default_rng(8)
    part, x, h, sign, means, adjusted = _two_parts(rng, (12, 15))
    wild = WildTotals(adjusted, h, part, rng.choice([-1.0, 1.0], (999, part.size)))
    below, above = wild.restricted_interval()
    assert wild.p_value(0.0) == 1.0
    for side, end in ((-1, below), (1, above)):
        assert 0.5 < end < 8
        assert wild.p_value(side * (end - 0.01)) > 0.05 >= wild.p_value(side * (end + 0.01))


def test_restricted_interval_covers_a_clustered_mean_of_unequal_clusters():
    """Monte Carlo: the clustered mean of 20 clusters of 1-30 rows (a cluster effect and row noise): 95% coverage."""
    rng = np.random.default_rng(11)
    covered = []
    for _ in range(300):
        rows = rng.integers(1, 31, 20).astype(float)
        values = rng.normal(size=20) + rng.normal(size=20) / np.sqrt(rows)  # each cluster's mean of its rows
        h = rows / rows.sum()
        mean = float(h @ values)
        adjusted = h * (values - mean) / np.sqrt(1 - h)
        wild = WildTotals(adjusted, h, np.zeros(20, dtype=int), rng.choice([-1.0, 1.0], (399, 20)))
        below, above = wild.restricted_interval()
        covered.append(mean - below * wild.se <= 0.0 <= mean + above * wild.se)
    assert 0.92 <= np.mean(covered) <= 0.98


def test_shares_outside_the_open_unit_interval_are_refused():
    with pytest.raises(ValueError, match="share"):
        WildTotals([0.1, -0.1], [1.0, 0.5], [0, 0], np.ones((3, 2)))


def test_the_documented_command_runs(capsys):
    main(["--rows", "pareto1.3", "--reps", "1", "--seed", "3"])
    printed = capsys.readouterr().out
    assert "wcr" in printed and "miss_below" in printed and "larger|gap=0" in printed
