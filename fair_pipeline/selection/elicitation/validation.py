"""Input checks for rate profiles and group weights (clear errors that say what and where)."""
from __future__ import annotations

import numpy as np


class RateProfileError(ValueError):
    """A rate profile has the wrong shape, is not finite, or leaves [0, 1]."""


def check_rate_profile(rates, n_groups: int, n_classes: int, *, name: str = "rates") -> np.ndarray:
    """Return ``rates`` as a float array of shape (n_groups, n_classes), or raise RateProfileError.

    Entry (g, i) is r_i^g = P(h = i | Y = i, G = g); for k = 2 the columns are (TPR, TNR).
    """
    arr = np.asarray(rates, dtype=float)
    if arr.shape != (n_groups, n_classes):
        raise RateProfileError(
            f"{name} must have shape (n_groups, n_classes) = ({n_groups}, {n_classes}), got {arr.shape}"
        )
    _check_unit_interval(arr, name)
    return arr


def check_rate_batch(rates, n_groups: int, n_classes: int, *, name: str = "rates") -> np.ndarray:
    """Accept one profile (m, k) or a batch (n, m, k); return a batch of shape (n, m, k)."""
    arr = np.asarray(rates, dtype=float)
    if arr.shape == (n_groups, n_classes):
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1:] != (n_groups, n_classes):
        raise RateProfileError(
            f"{name} must have shape ({n_groups}, {n_classes}) or (n, {n_groups}, {n_classes}), got {arr.shape}"
        )
    _check_unit_interval(arr, name)
    return arr


def _check_unit_interval(arr: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        place = f"group {where[-2]}, class {where[-1]}" + (f" of profile {where[0]}" if len(where) == 3 else "")
        raise RateProfileError(
            f"{name} must lie in [0, 1]; {place} is {float(arr[where])!r} ({int(bad.sum())} bad entries)"
        )


def check_group_weights(group_weights, n_groups: int, n_classes: int) -> np.ndarray:
    """tau^g_i = P(G = g | Y = i): shape (n_groups, n_classes), non-negative, each column sums to 1.

    ``None`` means uniform 1/m.
    """
    if group_weights is None:
        return np.full((n_groups, n_classes), 1.0 / n_groups)
    tau = np.asarray(group_weights, dtype=float)
    if tau.shape != (n_groups, n_classes):
        raise ValueError(
            f"group_weights must have shape (n_groups, n_classes) = ({n_groups}, {n_classes}), got {tau.shape}"
        )
    if not np.all(np.isfinite(tau)) or (tau <= 0).any():
        g, i = np.argwhere(~np.isfinite(tau) | (tau <= 0))[0]
        raise ValueError(f"group_weights must be positive; group {g}, class {i} is {tau[g, i]!r}")
    sums = tau.sum(axis=0)
    if not np.allclose(sums, 1.0, atol=1e-6):
        i = int(np.argmax(np.abs(sums - 1.0)))
        raise ValueError(
            f"group_weights[:, {i}] must sum to 1 (prevalence of each group within class {i}), got {sums[i]:.6g}"
        )
    return tau


def check_dimensions(n_groups: int, n_classes: int) -> None:
    if int(n_groups) != n_groups or n_groups < 2:
        raise ValueError(f"n_groups must be an integer >= 2, got {n_groups!r}")
    if int(n_classes) != n_classes or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")


def check_search(n_classes: int, radius: float, tolerance: float, inner_radius: float | None = None) -> None:
    """The search settings of an elicitation (fair_qpme): 0 < radius <= 1/n_classes so queries stay in [0, 1],
    a finite tolerance > 0, and 0 < inner_radius < radius when given."""
    if not 0 < radius <= 1.0 / n_classes:
        raise ValueError(f"radius must be in (0, 1/n_classes] = (0, {1.0 / n_classes:.3g}] so queries stay in [0, 1], "
                         f"got {radius!r}")
    if not (tolerance > 0 and np.isfinite(tolerance)):
        raise ValueError(f"tolerance must be a finite number > 0, got {tolerance!r}")
    if inner_radius is not None and not 0 < inner_radius < radius:
        raise ValueError(f"need 0 < inner_radius < radius, got inner_radius={inner_radius!r}, radius={radius!r}")
