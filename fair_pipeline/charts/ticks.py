"""Axis scales: data limits with a margin, 'nice' tick positions (1, 2, 2.5, 5 x 10^k) and their labels."""
from __future__ import annotations

import math

import numpy as np

NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
MARGIN = 0.05  # share of the data range added on each side, so points and caps do not sit on the frame


def limits(values: np.ndarray, margin: float = MARGIN) -> tuple[float, float]:
    """The finite range of `values` widened by `margin` of its length on each side; (0, 1) with no finite value,
    a unit range around a single value."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 1.0
    low, high = float(finite.min()), float(finite.max())
    if low == high:
        return low - 0.5, high + 0.5
    pad = (high - low) * margin
    return low - pad, high + pad


def step_for(low: float, high: float, target: int = 5) -> float:
    """The smallest nice step giving at most `target` + 1 ticks between low and high."""
    raw = (high - low) / max(target, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(s * magnitude for s in NICE_STEPS if s * magnitude >= raw * (1 - 1e-9))


def ticks(low: float, high: float, target: int = 5, integer: bool = False) -> np.ndarray:
    """Tick positions inside [low, high] at a nice step (whole numbers only when `integer`)."""
    step = step_for(low, high, target)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(low / step - 1e-9) * step
    positions = np.arange(first, high + step * 1e-9, step)
    return np.round(np.round(positions / step) * step, 12)  # 0.6, not 0.6000000000000001


def labels(positions: np.ndarray) -> list[str]:
    """Labels with the decimals the step needs (0, 0.2, 0.4; 2.5, 5, 7.5) and thousands separators (25,000)."""
    if len(positions) == 0:
        return []
    step = float(np.min(np.diff(positions))) if len(positions) > 1 else abs(float(positions[0])) or 1.0
    decimals = 0
    while decimals < 6 and abs(round(step, decimals) - step) > 1e-9 * max(1.0, abs(step)):
        decimals += 1
    return [f"{0.0 if abs(p) < step * 1e-9 else p:,.{decimals}f}" for p in positions]
