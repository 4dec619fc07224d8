"""Per-group decision rates on held-out data with cluster-robust (linearization) standard errors.

A rate is a ratio mean A = sum_i u_i p_i / sum_i u_i over the rows u_i of a cell (a group, or a group's
label-1 rows for a TPR), where p_i is the decision or the *probability* of a positive decision (the
expected rate of a randomized rule: the randomization noise is not part of its sampling error). Its
linearization e_i = u_i (p_i - A) / sum u gives var(A) = Q/(Q-1) sum_c (sum_{i in c} e_i)^2 over the
independent units c (rows by default, or `clusters`, e.g. queries or users with repeated rows); a
difference of two rates uses e_a - e_b, so rates sharing clusters keep their covariance.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

RATE_COLUMNS = ["group", "metric", "estimate", "se", "ci_low", "ci_high", "n"]


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(stats.norm.ppf(0.5 + confidence / 2))


def _clusters(clusters, n: int) -> np.ndarray:
    if clusters is None:
        return np.arange(n)
    c = np.asarray(clusters, dtype=object).ravel()
    if c.size != n:
        raise ValueError(f"clusters has {c.size} entries, the scores have {n}")
    return pd.factorize(c)[0]


class _Linearizer:
    def __init__(self, p: np.ndarray, cluster_codes: np.ndarray):
        self.p = p
        self.codes = cluster_codes
        self.Q = int(cluster_codes.max()) + 1 if cluster_codes.size else 0

    def residual(self, mask: np.ndarray):
        n = int(mask.sum())
        if n == 0:
            return np.nan, None, 0
        A = float(self.p[mask].mean())
        e = np.where(mask, self.p - A, 0.0) / n
        return A, np.bincount(self.codes, weights=e, minlength=self.Q), n

    def variance(self, E) -> float:
        if E is None or self.Q < 2:
            return np.nan
        return self.Q / (self.Q - 1) * float((E * E).sum())


def rate_table(p, labels, groups, *, clusters=None, reference=None, confidence: float = 0.95) -> pd.DataFrame:
    """TPR, FPR, selection rate and accuracy per group, and each group's difference from `reference`.

    p: (n,) probability of a positive decision (0/1 for deterministic rules); labels: 0/1;
    groups: group of each row; reference: the group differences are taken against (default: first).
    Rows: group, metric, estimate, se, ci_low, ci_high, n (rows behind the rate).
    """
    p = np.asarray(p, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel().astype(bool)
    g = np.asarray(groups, dtype=object).ravel()
    lin = _Linearizer(p, _clusters(clusters, p.size))
    correct = _Linearizer(np.where(y, p, 1.0 - p), lin.codes)
    levels = sorted(set(g.tolist()), key=str)
    reference = levels[0] if reference is None else reference
    zc = _z(confidence)
    rows, parts = [], {}

    def add(group, metric, A, E, n):
        se = float(np.sqrt(lin.variance(E)))
        rows.append({"group": group, "metric": metric, "estimate": A, "se": se,
                     "ci_low": A - zc * se, "ci_high": A + zc * se, "n": n})

    for level in levels + ["all"]:
        in_g = np.ones(p.size, bool) if level == "all" else (g == level)
        for metric, mask, model in (("tpr", in_g & y, lin), ("fpr", in_g & ~y, lin),
                                    ("selection_rate", in_g, lin), ("accuracy", in_g, correct)):
            A, E, n = model.residual(mask)
            parts[(level, metric)] = (A, E)
            add(level, metric, A, E, n)
    for level in levels:
        if level == reference:
            continue
        for metric in ("tpr", "fpr", "selection_rate", "accuracy"):
            (Aa, Ea), (Ab, Eb) = parts[(level, metric)], parts[(reference, metric)]
            E = None if Ea is None or Eb is None else Ea - Eb
            add(f"{level} - {reference}", metric, Aa - Ab, E, int(np.sum(g == level) + np.sum(g == reference)))
    return pd.DataFrame(rows, columns=RATE_COLUMNS)


def equalized_odds_gap(p, labels, groups) -> float:
    """max over groups pairs of max(|TPR_a - TPR_b|, |FPR_a - FPR_b|) of the (expected) decisions."""
    p = np.asarray(p, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel().astype(bool)
    g = np.asarray(groups, dtype=object).ravel()
    tpr, fpr = [], []
    for level in sorted(set(g.tolist()), key=str):
        m = g == level
        tpr.append(p[m & y].mean())
        fpr.append(p[m & ~y].mean())
    return float(max(np.ptp(tpr), np.ptp(fpr)))
