"""Weighted quantiles and monotone piecewise-linear maps: the numerical kernel of the EO transform.

Quantile convention (weighted Hazen): sort the distinct values v_1 < ... < v_m with weights
omega_i > 0 and cumulative shares P_i = sum_{r<=i} omega_r / sum omega. The CDF is the piecewise-linear
curve through the mid-points (v_i, (P_{i-1} + P_i) / 2); the quantile Q(p) is its inverse, clamped to
v_1 below the first mid-point and to v_m above the last one. With unit weights this is numpy's
`quantile(method="hazen")`; a heavy value is a point whose mass is spread evenly around it (the
mid-distribution function), which for score bins is their centre, as uniform mass within a bin implies.
"""
from __future__ import annotations

import numpy as np


def distinct_weighted(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and the summed weight of each (a GROUP BY value)."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, np.bincount(inverse, weights=weights, minlength=len(distinct))


def weighted_quantiles(distinct: np.ndarray, weights: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Hazen quantiles of a weighted sample given as sorted distinct values with positive weights."""
    cumulative = np.cumsum(weights)
    total = cumulative[-1]
    midpoints = (cumulative - 0.5 * weights) / total
    # Mid-points are strictly increasing (all weights > 0), so np.interp's precondition holds.
    return np.interp(probs, midpoints, distinct)


def collapse_ties(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Strictly increasing knots: a run of equal x (a jump of the map) keeps the mid-point of its y range.

    y is non-decreasing, so the mid-point of a run is (first + last) / 2."""
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    ends = np.r_[starts[1:], len(x)] - 1
    return x[starts], 0.5 * (y[starts] + y[ends])

