"""benchmarks/skewness_corrected_coverage.py: Hall's skewness-corrected t against its defining cubic and the
exponential mean's known miscoverage, the design skewness and the residual bootstrap against brute force, and
the documented command at a tiny size."""
import itertools

import numpy as np
import pandas as pd
import pytest

from benchmarks.skewness_corrected_coverage import (coverage, design_skewness, hall_bounds, main, own_skewness,
                                                    residual_bootstrap_t)
from fair_pipeline.audit.stats.small_sample import critical_value


def _hall(t, gamma):
    return t + gamma * t * t / 3 + gamma * gamma * t ** 3 / 27 + gamma / 6


def test_hall_bounds_solve_the_cubic_and_reduce_to_t_without_skew():
    crit = np.array([1.96, 2.57, 4.3])
    for gamma in (-1.3, -0.2, 0.4, 2.0):
        low, high = hall_bounds(crit, gamma)
        np.testing.assert_allclose(_hall(low, gamma), -crit, atol=1e-12)
        np.testing.assert_allclose(_hall(high, gamma), crit, atol=1e-12)
        # right-skewed totals: the t ratio's left tail is the long one, so the lower bound moves out
        assert np.all((low < -crit) == (gamma > 0)) and np.all((high < crit) == (gamma > 0))
    low, high = hall_bounds(crit, 0.0)
    np.testing.assert_array_equal(low, -crit)
    np.testing.assert_array_equal(high, crit)


def test_hall_interval_corrects_the_exponential_means_one_sided_misses():
    """Mean of 20 exponentials: the t interval misses below ~7.7% and covers ~0.917; Hall's, with the sample's own
    skewness, ~0.94 (20,000 draws: 0.941, misses 4.3% / 1.6%)."""
    rng = np.random.default_rng(1)
    n, reps = 20, 4000
    x = rng.exponential(size=(reps, n))
    totals = (x - x.mean(axis=1, keepdims=True)) / n
    t = (x.mean(axis=1) - 1.0) / np.sqrt((totals ** 2).sum(axis=1) * n / (n - 1))
    crit = critical_value(0.95, n - 1)
    low, high = hall_bounds(crit, np.array([own_skewness(u) for u in totals]))
    assert np.mean(np.abs(t) <= crit) < 0.93 and np.mean(t < -crit) > 0.06
    assert 0.93 <= np.mean((t >= low) & (t <= high)) <= 0.955
    assert np.mean(t < low) < 0.055


def test_design_skewness_is_the_skewness_of_the_weighted_sum_of_iid_residuals():
    """Brute force: every assignment of a centred pool's values to the items of each part (iid uniform draws)."""
    h = np.array([0.5, 0.3, 0.2, 0.7, 0.3])
    parts = np.array([0, 0, 0, 1, 1])
    r = np.array([-1.0, -0.4, 2.1, -2.0, 0.7])
    r -= np.bincount(parts, weights=r)[parts] / np.bincount(parts)[parts]  # each part's residuals centred
    pools = {p: r[parts == p] for p in (0, 1)}  # an item's residual is a draw from its part's residuals
    sums = [sum(h[c] * v for c, v in enumerate(combo))
            for combo in itertools.product(*(pools[p] for p in parts))]
    sums = np.array(sums)
    expected = np.mean((sums - sums.mean()) ** 3) / np.var(sums) ** 1.5
    assert design_skewness(h * r, h, parts) == pytest.approx(expected, rel=1e-12)
    assert own_skewness(h * r) == pytest.approx(np.sum((h * r) ** 3) / np.sum((h * r) ** 2) ** 1.5)


def test_residual_bootstrap_re_estimates_each_part_on_resampled_residuals():
    rng = np.random.default_rng(3)
    parts = np.repeat([0, 1], [5, 4])
    rows = rng.integers(1, 9, parts.size).astype(float)
    h = rows / np.bincount(parts, weights=rows)[parts]
    sign = np.where(parts == 0, 1.0, -1.0)
    x = rng.exponential(size=parts.size)
    means = np.bincount(parts, weights=h * x)
    adjusted = sign * h * (x - means[parts])
    star = residual_bootstrap_t(adjusted, h, parts, np.random.default_rng(9), draws=50)
    replay = np.random.default_rng(9)
    picks = {p: replay.integers(0, np.sum(parts == p), (50, np.sum(parts == p))) for p in (0, 1)}
    for b in range(50):
        error = variance = 0.0
        for p in (0, 1):
            i = np.flatnonzero(parts == p)
            r = adjusted[i] / h[i]
            draw = (r - r.mean())[picks[p][b]]  # the part's resampled residuals (signed as the contrast)
            est = np.sum(h[i] * draw)
            error += est
            variance += np.sum((h[i] * (draw - est)) ** 2 / (1 - h[i]))
        assert star[b] == pytest.approx(error / np.sqrt(variance), rel=1e-10)


def test_coverage_counts_an_interval_above_the_truth_as_missing_above():
    """Estimates 5 SE above the truth: every interval lies above it; at 0.5 SE every rule covers."""
    raw = pd.DataFrame({"config": "c", "statistic": "s", "estimable": True, "se": 0.1, "df": 30.0,
                        "error": [0.5, 0.5, 0.05, 0.05], "gamma_own": 0.0, "gamma_design": 0.0,
                        "boot_low": -2.0, "boot_high": 2.0})
    row = coverage(raw).iloc[0]
    assert row["miss_above"] == 0.5 and row["miss_below"] == 0.0
    assert row["cr2_t"] == row["hall_own"] == row["hall_design_2df"] == row["resid_boot"] == 0.5


def test_documented_command_runs_small(capsys):
    main(["--rows", "pareto1.3", "--reps", "2", "--seed", "3"])
    out = capsys.readouterr().out
    assert "resid_boot" in out and "hall_design_2df" in out and "max_err" in out
