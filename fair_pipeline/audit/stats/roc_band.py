"""Pointwise confidence band of an empirical ROC curve at fixed false positive rates.

At a fixed FPR t the empirical TPR has two sources of noise: the positives (binomial, given the
threshold) and the threshold itself, which is set by the negatives (its FPR has variance
t(1 - t)/n and moves the TPR by the slope of the curve). Hsieh & Turnbull (1996, Ann. Statist.,
Theorem 2.2):

    var ROC^(t) ~ ROC(t)(1 - ROC(t)) / m + ROC'(t)^2 t(1 - t) / n

The slope is estimated from the curve itself by a central difference over +-h (one-sided at the
ends), which is consistent for h -> 0 slower than 1/n; the band is clipped to [0, 1].
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.inference import z_critical

DEFAULT_SLOPE_HALF_WIDTH = 0.05


def roc_slope(fpr: np.ndarray, tpr: np.ndarray, half_width: float = DEFAULT_SLOPE_HALF_WIDTH) -> np.ndarray:
    """Central-difference slope of a (non-decreasing) ROC curve given on an increasing FPR grid."""
    fpr = np.asarray(fpr, dtype=np.float64)
    tpr = np.asarray(tpr, dtype=np.float64)
    lo = np.clip(fpr - half_width, fpr[0], fpr[-1])
    hi = np.clip(fpr + half_width, fpr[0], fpr[-1])
    rise = np.interp(hi, fpr, tpr) - np.interp(lo, fpr, tpr)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(np.where(hi > lo, rise / (hi - lo), 0.0), 0.0)


def roc_band(fpr, tpr, n_pos: float, n_neg: float, confidence: float = 0.95,
             half_width: float = DEFAULT_SLOPE_HALF_WIDTH) -> dict[str, np.ndarray]:
    """SE and pointwise CI of the TPR at each FPR of the grid (Hsieh & Turnbull variance).

    ``n_pos``/``n_neg``: the positives and negatives behind the curve. Returns ``se``,
    ``tpr_ci_low`` and ``tpr_ci_high`` (clipped to [0, 1]); all NaN when a class is empty.
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    tpr = np.asarray(tpr, dtype=np.float64)
    if n_pos < 1 or n_neg < 1:
        nan = np.full(fpr.shape, np.nan)
        return {"se": nan, "tpr_ci_low": nan, "tpr_ci_high": nan}
    slope = roc_slope(fpr, tpr, half_width)
    var = tpr * (1.0 - tpr) / n_pos + slope**2 * fpr * (1.0 - fpr) / n_neg
    se = np.sqrt(np.maximum(var, 0.0))
    z = z_critical(confidence)
    return {"se": se, "tpr_ci_low": np.clip(tpr - z * se, 0.0, 1.0), "tpr_ci_high": np.clip(tpr + z * se, 0.0, 1.0)}
