"""Normal-theory intervals, tests and Holm's step-down adjustment."""
from __future__ import annotations

import numpy as np
# The normal CDF and its inverse from scipy.special (what scipy.stats.norm evaluates, bit for bit): importing
# scipy.stats costs about half a second, paid by every `fair-pipeline audit --help`.
from scipy.special import ndtr, ndtri


def z_critical(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(ndtri(0.5 + confidence / 2))


def wald(estimate, variance, confidence: float = 0.95, null: float = 0.0) -> dict:
    """SE, CI, z and two-sided p-value of an asymptotically normal estimate."""
    estimate = np.asarray(estimate, dtype=np.float64)
    se = np.sqrt(np.asarray(variance, dtype=np.float64))
    zc = z_critical(confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (estimate - null) / se
    return {
        "se": se,
        "ci_low": estimate - zc * se,
        "ci_high": estimate + zc * se,
        "z": z,
        "p_value": 2 * ndtr(-np.abs(z)),
    }


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values (NaN entries are left out of the family and stay NaN)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    k = order.size
    adj = np.maximum.accumulate((k - np.arange(k)) * p[order])
    out[order] = np.minimum(adj, 1.0)
    return out
