"""The examination curve an exposure audit reads: fixed weights, or an estimate whose uncertainty enters the CI.

`examination[k-1]` is the probability that a user examines position k relative to position 1 (the position-bias
curve w_k of Nandy et al.; only ratios matter, so its scale is free). Three inputs:

* an array of weights: taken as known, no uncertainty added;
* the position-bias stage's result (a DataFrame with `position`, `weight` and `se`, the SE of ŵ): its uncertainty
  enters by the delta method. That table holds marginal SEs only; the correlations of the chained estimators are
  unknown, so the variance uses the worst case over every correlation, (Σ_j |g_j| sd_j)² by Cauchy-Schwarz: a
  conservative bound;
* either of them plus `covariance=`, the covariance matrix of log ŵ: the exact delta-method term g' Σ g.

The ŵ are taken as independent of the audited clicks (estimated on randomized traffic or another window).

Degrees of freedom: the examination term is an estimate too, resting on the clicks the curve was estimated from.
Its df (`Examination.df`) is those clicks less the J - 1 free weights (w_1 = 1), read from the table's `clicks`
column or `attrs["clicks"]` (the position-bias stage's chosen curve carries it) or given as `df=`; unknown, it is taken to be no larger than the
audit's own (None here: the caller uses the clustered part's df). `exposure` combines it with the clustered part's
effective clusters by Welch-Satterthwaite, which never exceeds the sum of the two.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.validation import AuditInputError

FIXED = "examination weights taken as known"
COVARIANCE = "position-bias uncertainty by the delta method (covariance of log ŵ given)"
BOUND = ("position-bias uncertainty by the delta method, worst case over the unknown correlations of ŵ "
         "(marginal SEs only; conservative)")


@dataclass(frozen=True)
class Examination:
    """Weights w_1..w_J, and the uncertainty of log ŵ: a covariance matrix, marginal SDs, or neither."""

    weights: np.ndarray
    log_cov: np.ndarray | None = None
    log_sd: np.ndarray | None = None
    df: float | None = None  # of the uncertainty term; None: unknown

    @property
    def description(self) -> str:
        if self.log_cov is not None:
            return COVARIANCE
        return BOUND if self.log_sd is not None else FIXED

    def variance(self, gradient: np.ndarray) -> np.ndarray:
        """Delta-method variance of contrasts whose gradients w.r.t. log ŵ are the rows of `gradient`."""
        g = np.atleast_2d(gradient)
        if self.log_cov is not None:
            return np.einsum("rj,jk,rk->r", g, self.log_cov, g)
        if self.log_sd is not None:
            return (np.abs(g) @ self.log_sd) ** 2
        return np.zeros(g.shape[0])


def _clicks_df(frame: pd.DataFrame) -> float | None:
    """Clicks behind the curve (its `clicks` column, or ``attrs["clicks"]``: the total) less its J - 1 free weights
    (at least 1); None when the table does not say."""
    if "clicks" in frame.columns:
        clicks = pd.to_numeric(frame["clicks"], errors="coerce")
        if clicks.isna().any() or (clicks < 0).any():
            raise AuditInputError("examination table's clicks must be non-negative counts")
        total = float(clicks.sum())
    elif frame.attrs.get("clicks") is not None:
        total = float(frame.attrs["clicks"])
    else:
        return None
    return max(total - (len(frame) - 1), 1.0)


def _curve_from_frame(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray | None]:
    missing = {"position", "weight"} - set(frame.columns)
    if missing:
        raise AuditInputError(f"examination table lacks column(s) {sorted(missing)}; it needs position, weight (and se)")
    table = frame.sort_values("position")
    positions = table["position"].to_numpy()
    if positions.size == 0 or not np.array_equal(positions, np.arange(1, positions.size + 1)):
        raise AuditInputError(f"examination table positions must be 1..J without gaps or repeats, got {positions.tolist()[:12]}")
    weights = table["weight"].to_numpy(dtype=np.float64)
    if "se" not in table.columns:
        return weights, None
    se = table["se"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return weights, se / weights  # SE of log ŵ


def as_examination(examination, covariance=None, df=None) -> Examination:
    """Validated examination curve; NaN weights are allowed only where no impression sits (checked later).
    ``df``: of the curve's uncertainty (default: from a table's `clicks`, else unknown)."""
    if isinstance(examination, Examination):
        return examination
    if df is not None and not (np.isfinite(df) and df >= 1):
        raise AuditInputError(f"examination df must be a finite number >= 1, got {df!r}")
    if isinstance(examination, pd.DataFrame):
        weights, log_sd = _curve_from_frame(examination)
        df = _clicks_df(examination) if df is None else df
    else:
        weights, log_sd = np.asarray(examination, dtype=np.float64), None
        if weights.ndim != 1 or weights.size == 0:
            raise AuditInputError(f"examination must be a 1-d array of weights (examination[k-1] for position k), "
                                  f"got shape {weights.shape}")
    known = ~np.isnan(weights)
    if np.any(~np.isfinite(weights[known])) or np.any(weights[known] <= 0):
        bad = np.flatnonzero(known & ~(np.isfinite(weights) & (weights > 0))) + 1
        raise AuditInputError(f"examination weights must be positive and finite; positions {bad.tolist()[:10]} are not")
    log_cov = None
    if covariance is not None:
        log_cov = np.asarray(covariance, dtype=np.float64)
        if log_cov.shape != (weights.size, weights.size):
            raise AuditInputError(f"covariance of log ŵ must be {weights.size}x{weights.size}, got {log_cov.shape}")
        if not np.allclose(log_cov, log_cov.T, equal_nan=True):
            raise AuditInputError("covariance of log ŵ must be symmetric")
        log_sd = None
    elif log_sd is not None and np.any(log_sd[known] < 0):
        raise AuditInputError("examination table has negative standard errors")
    return Examination(weights, log_cov, log_sd, float(df) if df is not None else None)


def check_positions(examination: Examination, used: np.ndarray) -> None:
    """Every position that holds an impression needs a weight (and, when given, a finite uncertainty)."""
    j = examination.weights.size
    if used.size and (used.min() < 1 or used.max() > j):
        outside = used[(used < 1) | (used > j)]
        raise AuditInputError(f"positions {outside.tolist()[:10]} lie outside the examination curve's 1..{j}")
    idx = used - 1
    bad = idx[np.isnan(examination.weights[idx])]
    if examination.log_sd is not None:
        bad = np.union1d(bad, idx[np.isnan(examination.log_sd[idx])])
    if examination.log_cov is not None:
        sub = examination.log_cov[np.ix_(idx, idx)]
        bad = np.union1d(bad, idx[np.isnan(sub).any(axis=1)])
    if bad.size:
        raise AuditInputError(f"the examination curve is not estimable (NaN) at positions {(bad + 1).tolist()[:10]}, "
                              "where impressions sit; truncate the curve or audit fewer positions")
