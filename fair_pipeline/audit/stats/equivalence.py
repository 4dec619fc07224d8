"""Effect sizes against a practical margin δ: is a group gap large, significant but small, equivalent to 0, or unknown?

With a million rows almost every group difference is "significant"; a p-value alone cannot tell a gap that
matters from one that does not. Every audit comparison therefore carries its effect size with its CI, a
practical margin δ for its metric, the TOST p-value (two one-sided tests of |θ| >= δ, Schuirmann 1987) and one
verdict among :data:`VERDICTS`. Pure numpy/scipy/pandas (import-linter enforces it).

Margins (``DEFAULT_MARGINS``, all on the metric's own scale; override per call with ``margins={...}``):

* ``partial_auc_normalized`` 0.02: difference of normalized truncated AUCs (I_a(α) - I_b(α)) / α
* ``xauc`` 0.02: ΔxAUC = xAUC(a, b) - xAUC(b, a)
* ``balanced_xauc`` 0.02: difference of balanced xAUC_0 (or xAUC_1) between two groups
* ``pairwise_accuracy`` 0.02: difference of within-query pairwise accuracies (A_{a>b} - A_{b>a}, marginals)
* ``tpr`` 0.02: difference of true-positive rates (equal opportunity) between groups

0.02 on a 0..1 accuracy scale is two percentage points: below what a ranking team would act on, above what a
typical audit sample resolves. It is a policy choice, not a statistical one: set it with the people who own the
decision, before looking at the data.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.small_sample import critical_value, upper_tail

DEFAULT_MARGINS: dict[str, float] = {
    "partial_auc_normalized": 0.02,
    "xauc": 0.02,
    "balanced_xauc": 0.02,
    "pairwise_accuracy": 0.02,
    "tpr": 0.02,
}

LARGER = "gap larger than δ (significant)"
WITHIN = "gap significant but within ±δ"
INCONCLUSIVE = "inconclusive"
NOT_ESTIMABLE = "not estimable"


def equivalent_label(confidence: float = 0.95) -> str:
    """'equivalent within ±δ (TOST, 95%)' for the given confidence."""
    return f"equivalent within ±δ (TOST, {confidence:.0%})"


EQUIVALENT = equivalent_label(0.95)
VERDICTS = (LARGER, WITHIN, EQUIVALENT, INCONCLUSIVE, NOT_ESTIMABLE)  # in the order reports list them
EQUIVALENCE_COLUMNS = ["effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost", "verdict"]


def verdict_kind(verdict: str) -> str:
    """The verdict without its confidence level: one of VERDICTS with 'equivalent ...' at 95% (for counting)."""
    return EQUIVALENT if isinstance(verdict, str) and verdict.startswith("equivalent within") else verdict


def resolve_margins(margins: Mapping[str, float] | None = None) -> dict[str, float]:
    """DEFAULT_MARGINS updated with `margins`; unknown metrics and non-positive or non-finite δ are errors."""
    out = dict(DEFAULT_MARGINS)
    for metric, value in (margins or {}).items():
        if metric not in DEFAULT_MARGINS:
            raise ValueError(f"unknown margin metric {metric!r}; known: {sorted(DEFAULT_MARGINS)}")
        value = float(value)
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"margin for {metric!r} must be a positive number, got {value}")
        out[metric] = value
    return out


def _confidence(confidence: float) -> float:
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
    return float(confidence)


def classify_gaps(estimate, se, margin, *, p_adjusted=None, confidence: float = 0.95, df=np.inf):
    """One verdict per gap, and its TOST p-value. Vectorized over rows (arrays broadcast).

    ``estimate``: the effect (a group difference, 0 = no gap); ``se``: its standard error; ``margin``: δ > 0,
    the smallest gap that matters (scalar or per row); ``df``: degrees of freedom of the t reference (clustered
    SEs, `small_sample`; infinite = normal); ``p_adjusted``: multiplicity-adjusted p-values of "no gap" (Holm),
    used instead of the t test's p where given (NaN rows fall back to it). With α = 1 - confidence and the
    (1 - α) CI = estimate ± t_{1-α/2, df} se, the verdict is decided by where the interval lies:

    * **not estimable** when the estimate or the SE is NaN (or the SE is negative);
    * ``"gap larger than δ (significant)"`` when the (1 - α) CI lies entirely beyond +δ or -δ (a minimum-effect
      test of |θ| <= δ at level α/2 per side; also p < α when ``p_adjusted`` is given);
    * ``"gap significant but within ±δ"`` when p < α and the gap is equivalent (below): real, too small to matter;
    * ``"equivalent within ±δ (TOST, 95%)"`` when the same (1 - α) CI lies strictly inside (-δ, δ): both one-sided
      tests of |θ| >= δ reject at level α/2, p_tost = max(P(T > (estimate + δ) / se), P(T < (estimate - δ) / se))
      < α/2;
    * otherwise ``"inconclusive"`` (the interval reaches across ±δ: the data cannot tell a gap larger than δ from
      a smaller one).

    Why one interval for every verdict (and not TOST's usual (1 - 2α) interval): each wrong verdict is then an
    event in which the (1 - α) CI misses the true gap (at a gap of exactly ±δ, "equivalent" needs the CI to end
    short of δ, "larger" to start beyond it; at a gap of 0, "larger" needs the CI to exclude 0), so every error
    rate is at most the CI's non-coverage, α, however the non-coverage splits between the two tails. Under
    heavy-tailed popularity the clustered t ratio is skewed and one tail carries up to twice its α/2 share:
    TOST at level α per side said "equivalent" at a true gap of δ up to 9.5% of the time, this rule at most the
    non-coverage (Monte Carlo in docs/audit_inference.md). The price is power: equivalence needs a 95% CI inside
    ±δ rather than a 90% one.

    Returns ``(verdicts, p_tost)``: object array of verdict strings, float array (NaN where not estimable).
    An SE of 0 is a gap known exactly: larger when |estimate| > δ, equivalent when |estimate| < δ.
    """
    alpha = 1.0 - _confidence(confidence)
    est = np.asarray(estimate, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    delta = np.asarray(margin, dtype=np.float64)
    if np.any(~np.isfinite(delta)) or np.any(delta <= 0):
        raise ValueError(f"margin must be positive and finite, got {margin!r}")
    est, s, delta, df = np.broadcast_arrays(est, s, delta, np.asarray(df, dtype=np.float64))
    bad = np.isnan(est) | np.isnan(s) | (s < 0) | np.isnan(df)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(est == 0, 0.0, est / s)
        z_low = (est + delta) / s  # H0: θ <= -δ
        z_high = (est - delta) / s  # H0: θ >= +δ
    p_test = 2 * upper_tail(np.abs(z), df)
    if p_adjusted is not None:
        p_adj = np.broadcast_to(np.asarray(p_adjusted, dtype=np.float64), est.shape)
        p = np.where(np.isnan(p_adj), p_test, p_adj)
    else:
        p = p_test
    p_tost = np.maximum(upper_tail(z_low, df), upper_tail(-z_high, df))
    crit = critical_value(confidence, np.where(np.isnan(df), np.inf, df))
    with np.errstate(invalid="ignore"):
        beyond = (est - crit * s > delta) | (est + crit * s < -delta)
        equivalent = (est + crit * s < delta) & (est - crit * s > -delta)  # p_tost < α/2, as the CI shows it
    significant = p < alpha
    verdict = np.full(est.shape, INCONCLUSIVE, dtype=object)
    verdict[~significant & equivalent] = equivalent_label(confidence)
    verdict[significant & equivalent] = WITHIN
    verdict[beyond & (significant if p_adjusted is not None else True)] = LARGER
    verdict[bad] = NOT_ESTIMABLE
    p_tost = np.where(bad, np.nan, p_tost)
    return verdict, p_tost


def equivalence_columns(estimate, se, margin: float, *, p_adjusted=None, confidence: float = 0.95,
                        df=np.inf) -> dict:
    """The columns every comparison table gains: effect, its two-sided CI at `confidence` (t with ``df``), δ, p_tost,
    verdict."""
    est = np.asarray(estimate, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    verdict, p_tost = classify_gaps(est, s, margin, p_adjusted=p_adjusted, confidence=confidence, df=df)
    crit = critical_value(confidence, np.broadcast_to(np.asarray(df, dtype=np.float64), est.shape))
    return {"effect": est, "effect_ci_low": est - crit * s, "effect_ci_high": est + crit * s,
            "margin": np.full(est.shape, float(margin)), "p_tost": p_tost, "verdict": verdict}


def add_equivalence(frame: pd.DataFrame, metric: str, estimate, se, *, margins: Mapping[str, float] | None = None,
                    confidence: float = 0.95, p_adjusted: str | None = "p_holm",
                    estimable: str | None = "estimable", df: str | None = "df") -> pd.DataFrame:
    """`frame` with EQUIVALENCE_COLUMNS appended (a new frame; existing columns untouched).

    ``estimate`` / ``se``: column names or arrays aligned with the rows; ``metric``: a key of DEFAULT_MARGINS;
    ``p_adjusted``: the column of adjusted p-values, used when present; rows whose ``estimable`` column is False
    are not estimable whatever their numbers; ``df``: the column of degrees of freedom (absent: normal theory).
    """
    delta = resolve_margins(margins)[metric]
    out = frame.copy()
    if out.empty:
        for column in EQUIVALENCE_COLUMNS:
            out[column] = pd.Series(dtype=object if column == "verdict" else np.float64)
        return out
    est = np.asarray(out[estimate] if isinstance(estimate, str) else estimate, dtype=np.float64).copy()
    s = np.asarray(out[se] if isinstance(se, str) else se, dtype=np.float64).copy()
    if estimable is not None and estimable in out.columns:
        ok = out[estimable].fillna(False).astype(bool).to_numpy()
        est[~ok], s[~ok] = np.nan, np.nan
    p_adj = out[p_adjusted].to_numpy(dtype=np.float64) if p_adjusted and p_adjusted in out.columns else None
    dof = out[df].to_numpy(dtype=np.float64) if df and df in out.columns else np.inf
    for column, values in equivalence_columns(est, s, delta, p_adjusted=p_adj, confidence=confidence,
                                              df=dof).items():
        out[column] = values
    return out


def verdict_counts(verdicts) -> dict[str, int]:
    """{verdict: count} over VERDICTS (every key present, 'equivalent ...' counted whatever its confidence)."""
    kinds = [verdict_kind(v) for v in verdicts]
    return {v: sum(k == v for k in kinds) for v in VERDICTS}


def counts_sentence(counts: Mapping[str, int]) -> str:
    """'69 comparisons: 3 gaps larger than δ, 40 significant but within ±δ, 20 equivalent within ±δ, 6 inconclusive,
    0 not estimable'."""
    total = sum(counts.get(v, 0) for v in VERDICTS)
    parts = [f"{counts.get(LARGER, 0)} gap{'s' if counts.get(LARGER, 0) != 1 else ''} larger than δ",
             f"{counts.get(WITHIN, 0)} significant but within ±δ",
             f"{counts.get(EQUIVALENT, 0)} equivalent within ±δ",
             f"{counts.get(INCONCLUSIVE, 0)} inconclusive",
             f"{counts.get(NOT_ESTIMABLE, 0)} not estimable"]
    return f"{total} comparison{'s' if total != 1 else ''}: " + ", ".join(parts)
