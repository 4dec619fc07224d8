"""The paired cost difference of two fixed-threshold candidates as a combination of weighted binomials.

Two rules with fixed thresholds (or fixed 0/1 decision rules) decide once per item, and they decide differently only
on the items between their thresholds. In each cell (group g, class y) the paired change of the rate,
r_A − r_B = Σ_c s_c (d^A_c − d^B_c) (s_c the item's share of the cell's positives or negatives), is then a
one-signed count: ± the share of the cell's items that fall between the thresholds, a weighted binomial
(`audit.stats.item_binomial`: given the items' sizes, which items fall there does not depend on their size). The
cost φ is quadratic in the rates, so its difference is exactly linear in those changes:
    D = φ(r_A) − φ(r_B) = Σ_cells ∇φ((r_A + r_B) / 2)_cell (r_A − r_B)_cell,
and the CI combines the cells' weighted-binomial intervals by MOVER for a linear combination (Zou & Donner 2008),
with the gradient at the midpoint as the known coefficients. Cells without a changed item contribute nothing.

Why: the difference is a sum of a few same-sign jumps whose sizes follow the items' (heavy-tailed) popularity; a
Wald interval around it was either one-sided (CR2: a draw with no popular item between the thresholds has a small
difference and a small SE) or conservative (the exchangeable variance: right, but the sum is far from normal). It
applies when every cluster decides all-or-nothing in every cell, each cell's changes have one sign, no cluster holds
changed rows of two cells (an item with positives and negatives would tie two cells' counts); None otherwise.

Thresholds estimated from a selection rate (each candidate selects the top share q of the same rows) move with the
sample too. The cells' intervals are then taken at the estimated thresholds, and both half-widths are multiplied by
how much the thresholds' influence changes the difference's SE: SE(rates' and thresholds' influence) / SE(rates'
influence alone), both CR2 over the same clusters (in docs/audit_inference.md's Pareto(1.3) draws: median 1.13,
5%-95% 0.84-3.7, the largest where a popular item sits near a threshold).
Pure numpy / scipy / pandas.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from fair_pipeline.audit.stats.item_binomial import WeightedBinomial
from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric


def _cells(rows: pd.DataFrame, codes: np.ndarray, decision_a, decision_b, clusters, n_groups: int):
    """Per cell with a changed cluster: (the weighted binomial of its clusters' shares, the changed share, sign of
    the rate change, (group, column)); None when a condition of the module doc fails."""
    a, b = np.asarray(decision_a, dtype=np.float64), np.asarray(decision_b, dtype=np.float64)
    if not (np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1))):
        return None
    cluster = (np.arange(len(rows)) if clusters is None
               else pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), use_na_sentinel=False)[0])
    size = int(cluster.max()) + 1 if cluster.size else 0
    counts = (rows["n_pos"].to_numpy(dtype=np.float64), rows["n_neg"].to_numpy(dtype=np.float64))
    cells, owner = [], np.full(size, -1)
    for g in range(n_groups):
        for column, count in enumerate(counts):
            weight = count * (codes == g)
            rows_of = np.bincount(cluster, weights=weight, minlength=size)
            if rows_of.sum() <= 0:
                continue
            mean = [np.bincount(cluster, weights=weight * d, minlength=size) for d in (a, b)]
            held = rows_of > 0
            decided = [m[held] / rows_of[held] for m in mean]
            if not all(np.all((np.abs(d) < 1e-12) | (np.abs(d - 1) < 1e-12)) for d in decided):
                return None
            change = np.rint(decided[0] - decided[1]) * (1.0 if column == 0 else -1.0)  # TNR moves against decisions
            if not change.any():
                continue
            if np.any(change > 0) and np.any(change < 0):
                return None
            ids = np.flatnonzero(held)[change != 0]
            if np.any(owner[ids] >= 0):
                return None
            owner[ids] = len(cells)
            shares = rows_of[held] / rows_of.sum()
            cells.append((WeightedBinomial(shares), float(shares @ (change != 0)), float(np.sign(change.sum())),
                          (g, column)))
    return cells


def _mover(cells, gradient: np.ndarray, confidence: float, slope=(0.0, np.inf),
           scale: float = 1.0) -> tuple[float, float, float]:
    """(estimate, low, high) of Σ coefficient_j θ_j from each cell's weighted-binomial interval of θ_j, plus the
    coefficients' own sampling error ``slope`` = (variance, df) added in quadrature to both sides at t; both
    half-widths multiplied by ``scale`` (estimated thresholds, `paired_binomial_interval`)."""
    from fair_pipeline.audit.stats.small_sample import critical_value
    estimate = 0.0
    below = above = float(critical_value(confidence, slope[1])) ** 2 * slope[0] if slope[0] > 0 else 0.0
    for distribution, theta, sign, (g, column) in cells:
        low, high = distribution.interval(theta, confidence)
        k = sign * gradient[g, column]
        ends = (k * low, k * high)
        estimate += k * theta
        below += (k * theta - min(ends)) ** 2
        above += (max(ends) - k * theta) ** 2
    return estimate, estimate - scale * np.sqrt(below), estimate + scale * np.sqrt(above)


def _rates(rows: pd.DataFrame, codes: np.ndarray, decision, n_groups: int) -> np.ndarray:
    """(groups, 2) TPR and TNR of 0/1 ``decision`` on the held-out rows (n_pos / n_neg per row)."""
    p, n = rows["n_pos"].to_numpy(dtype=np.float64), rows["n_neg"].to_numpy(dtype=np.float64)
    d = np.asarray(decision, dtype=np.float64)

    def total(w):
        return np.bincount(codes, weights=w, minlength=n_groups)

    return np.column_stack([total(p * d) / total(p), total(n * (1 - d)) / total(n)])


def _slope_variance(metric, rows, codes, rates_a, rates_b, decision_a, decision_b, clusters) -> tuple[float, float]:
    """(variance, df) of the gradient's own error: with φ quadratic, the influence of D is
    ∇φ(mid)·IF(r_A − r_B) + (∇φ(r_A) − ∇φ(r_B))·IF(mid); the first term is the cells' counts above, the second is
    every rate's (all cells', changed or not) sampling error weighted by the gradients' difference, CR2-clustered
    with t at its df (`paired.clustered_interval`). It matters when many items change (a large difference)."""
    from fair_pipeline.selection.elicitation.paired import clustered_interval, rate_influence
    slope = metric.gradient(rates_a) - metric.gradient(rates_b)
    p, n = rows["n_pos"], rows["n_neg"]
    own = [rate_influence(codes, p, n, None, np.nan, metric.n_groups, decision=np.asarray(d, dtype=np.float64),
                          split=True)[1] for d in (decision_a, decision_b)]
    mid = (own[0] + own[1]) / 2
    parts = np.column_stack([mid[:, :, 0] @ slope[:, 0], mid[:, :, 1] @ slope[:, 1], np.zeros(len(rows))])
    labels = [str(i) for i in range(metric.n_groups)]
    ci = clustered_interval(0.0, parts, rows.assign(group=codes.astype(str)), labels, clusters)
    return (float(ci.se) ** 2, float(ci.df)) if np.isfinite(ci.se) else (0.0, np.inf)


def paired_binomial_interval(metric: FairQuadraticMetric, rows: pd.DataFrame, codes: np.ndarray, decision_a,
                             decision_b, clusters=None, confidence: float = 0.95, scale: float = 1.0):
    """(low, high, p) of cost(A) − cost(B) (module doc) from each row's 0/1 decisions of the two candidates (group
    ``codes`` in the metric's order), p the two-sided p-value of a difference of 0 (the largest 1 − confidence at
    which the interval excludes 0); None where the construction does not apply. ``scale`` multiplies both
    half-widths: for thresholds estimated from a selection rate, the ratio of the difference's SE with the
    thresholds' influence to its SE without (`paired.threshold_scale`)."""
    cells = _cells(rows, codes, decision_a, decision_b, clusters, metric.n_groups)
    if not cells:
        return None
    rates_a, rates_b = (_rates(rows, codes, d, metric.n_groups) for d in (decision_a, decision_b))
    gradient = metric.gradient((rates_a + rates_b) / 2)
    slope = _slope_variance(metric, rows, codes, rates_a, rates_b, decision_a, decision_b, clusters)
    if not (np.isfinite(scale) and scale > 0):
        return None
    _, low, high = _mover(cells, gradient, confidence, slope, scale)

    def margin(level: float) -> float:  # > 0 while the interval at this level excludes 0
        _, lo, hi = _mover(cells, gradient, level, slope, scale)
        return max(lo, -hi)

    if margin(1e-6) <= 0:
        p = 1.0
    elif margin(1 - 1e-9) > 0:
        p = 1e-9
    else:
        p = 1.0 - brentq(margin, 1e-6, 1 - 1e-9, xtol=1e-4)
    return float(low), float(high), float(p)
