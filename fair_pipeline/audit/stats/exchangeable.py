"""The exchangeable-items variance of a sum of cluster totals: the floor under CR2 when popularity is heavy-tailed.

A cluster's (an item's) total in a rate or a cost is its share s_c of the part's denominator times a residual r_c
(its decision minus the rate, its positives' share, ...). Read the r_c as independent with a common variance τ²
whatever the item's size, and Var(Σ_c U_c) = τ² Σ_c s_c²: estimated with τ̂² = Σ r_c² / C over the C clusters
holding the part, r_c from the CR2-adjusted totals (already unbiased for equal clusters, so that with equal
clusters this is CR2's variance exactly), and Satterthwaite's df for τ̂², 2 C m₂² / (m₄ - m₂²) (m_k the mean of
r_c^k), within [1, C - 1]. Parts whose clusters are disjoint (two groups' rates) add, their df by Welch-Satterthwaite.

Why: under heavy-tailed popularity a rate near 0 or 1, or a difference that lives on the few items near a
threshold, is decided by whether a popular item falls there. A sample in which none does has a small error in one
direction AND a small sandwich SE (correlation of error and SE -0.87 to -0.98 in the Monte Carlo of
docs/audit_inference.md), so the CR2 interval misses on one side. Here every item's size enters, including
popular items whose residual happened to be small, so the variance does not shrink with the luck of the draw. It
is used where it exceeds CR2 (the sandwich stays the floor where an item's residual does depend on its size).
Pure numpy.
"""
from __future__ import annotations

import numpy as np


def exchangeable_variance(totals, weights) -> tuple[float, float]:
    """(variance, df) of Σ_c totals[c] when totals[c] = weights[c] r_c with exchangeable r_c (module doc); clusters
    of weight 0 hold nothing of the part; NaN with fewer than two clusters of positive weight."""
    u = np.asarray(totals, dtype=np.float64)
    s = np.asarray(weights, dtype=np.float64)
    held = s > 0
    c = int(np.count_nonzero(held))
    if c < 2:
        return float("nan"), float("nan")
    r2 = (u[held] / s[held]) ** 2
    m2, m4 = float(r2.mean()), float((r2 * r2).mean())
    variance = m2 * float((s * s).sum())
    spread = m4 - m2 * m2
    df = c - 1.0 if not spread > 0 else float(np.clip(2.0 * c * m2 * m2 / spread, 1.0, c - 1.0))
    return variance, df


def exchangeable_parts_variance(parts, shares) -> tuple[float, float]:
    """(variance, df) of the sum of (P, C) ``parts`` whose clusters hold one part each (``shares``: each cluster's
    share of its part's denominator): the parts' `exchangeable_variance` added, Welch-Satterthwaite df; NaN when a
    part has fewer than two clusters."""
    found = [exchangeable_variance(u, s) for u, s in zip(np.atleast_2d(parts), np.atleast_2d(shares))]
    variances = np.array([v for v, _ in found])
    dfs = np.array([d for _, d in found])
    if not np.all(np.isfinite(variances)):
        return float("nan"), float("nan")
    total = float(variances.sum())
    df = total ** 2 / float(np.sum(variances ** 2 / dfs)) if total > 0 else float("nan")
    return total, df
