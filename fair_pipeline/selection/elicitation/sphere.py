"""Hyperspherical parametrisation of the boundary of a query sphere (paper, appendix A).

A unit direction u in R^k is described by k-1 angles theta: u_i = prod_{j<i} sin(theta_j) cos(theta_i)
for i < k-1 (0-based: i <= k-2) and u_{k-1} = prod_{j<k-1} sin(theta_j).  All angles lie in [0, pi]
except the last ("primary") one, which lies in [0, 2 pi].  Knowing the sign of every coordinate of u
restricts each angle to a quarter interval, which is the search orthant of LPME.
"""
from __future__ import annotations

import numpy as np


def direction_from_angles(theta: np.ndarray) -> np.ndarray:
    """Unit vector in R^{len(theta)+1} for the angles ``theta``."""
    theta = np.asarray(theta, dtype=float)
    k = theta.size + 1
    u = np.empty(k)
    sin_prod = 1.0
    for i in range(k - 1):
        u[i] = sin_prod * np.cos(theta[i])
        sin_prod *= np.sin(theta[i])
    u[k - 1] = sin_prod
    return u


def angle_ranges_for_signs(signs: np.ndarray) -> np.ndarray:
    """Per-angle search interval, shape (k-1, 2), of the orthant with the given coordinate signs (+1/-1)."""
    signs = np.asarray(signs)
    k = signs.size
    if k < 2:
        raise ValueError(f"need at least 2 classes for an angle parametrisation, got {k}")
    ranges = np.empty((k - 1, 2))
    half = np.pi / 2
    for j in range(k - 2):  # non-primary angles in [0, pi]: the sign of cos(theta_j) is the sign of u_j
        ranges[j] = (0.0, half) if signs[j] > 0 else (half, np.pi)
    # primary angle in [0, 2 pi]: its quadrant is fixed by the signs of the last two coordinates
    quadrant = {(1, 1): 0, (-1, 1): 1, (-1, -1): 2, (1, -1): 3}[(int(signs[k - 2]), int(signs[k - 1]))]
    ranges[k - 2] = (quadrant * half, (quadrant + 1) * half)
    return ranges
