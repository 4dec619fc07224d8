"""Binomial proportions: Wilson intervals and the two-proportion z-test (report-level statistics)."""
from __future__ import annotations

import numpy as np
from scipy import stats


def wilson_interval(successes, trials, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval per element; NaN where trials == 0 (a rate of nothing is not estimable)."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("successes must lie in 0..trials")
    z = stats.norm.ppf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z**2 / n
        centre = (p + z**2 / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    low, high = centre - half, centre + half
    empty = n == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def two_proportion_test(k1: float, n1: float, k2: float, n2: float) -> tuple[float, float]:
    """(difference p1 - p2, two-sided p-value) of the pooled z-test; NaN p-value when not estimable
    (an empty arm, or no variation at all)."""
    if n1 <= 0 or n2 <= 0:
        return float("nan"), float("nan")
    p1, p2 = k1 / n1, k2 / n2
    pooled = (k1 + k2) / (n1 + n2)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return float(p1 - p2), float("nan")
    z = (p1 - p2) / se
    return float(p1 - p2), float(2 * stats.norm.sf(abs(z)))
