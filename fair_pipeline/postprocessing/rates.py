"""Per-group decision rates on held-out data with small-sample cluster-robust (linearization) standard errors.

A rate is a ratio mean A = sum_i u_i p_i / sum_i u_i over the rows u_i of a cell (a group, or a group's
label-1 rows for a TPR), where p_i is the decision or the *probability* of a positive decision (the
expected rate of a randomized rule: the randomization noise is not part of its sampling error). Its
linearization e_i = u_i (p_i - A) / sum u, summed per independent unit c (rows by default, or `clusters`, e.g.
items, queries or users with repeated rows), gives the totals E_c. The variance is CR2's (Bell & McCaffrey 2002;
`audit.stats.small_sample`): each total divided by sqrt(1 - h_c), h_c the cluster's share of the cell's rows (the
cell's own finite-cluster factor; with one row per cluster the usual s^2 / n), and the CI uses Student's t with
the smaller of the totals' effective clusters and the design df of the shares: a few items holding most of a
cell's rows leave few degrees of freedom. A difference of two rates is a sum of two such parts (each with its own
shares), so rates sharing clusters keep their covariance.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.small_sample import adjusted_parts, cluster_robust_interval, t_wald
from fair_pipeline.audit.stats.exchangeable import exchangeable_parts_variance

RATE_COLUMNS = ["group", "metric", "estimate", "se", "ci_low", "ci_high", "n", "clusters", "df"]


def _check_confidence(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(confidence)


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
        """(rate, its part: (per-cluster totals, per-cluster shares of the cell's rows), rows in the cell)."""
        n = int(mask.sum())
        if n == 0:
            return np.nan, None, 0
        A = float(self.p[mask].mean())
        e = np.where(mask, self.p - A, 0.0) / n
        totals = np.bincount(self.codes, weights=e, minlength=self.Q)
        shares = np.bincount(self.codes, weights=mask.astype(np.float64), minlength=self.Q) / n
        return A, (totals, shares), n


def _interval(estimate: float, parts: list, signs: list, confidence: float) -> dict:
    """se, CI, clusters holding the cell(s) and df of ``estimate`` = sum of signs x parts (NaN without two clusters)."""
    nan = {"se": np.nan, "ci_low": np.nan, "ci_high": np.nan, "clusters": 0, "df": np.nan}
    if any(part is None for part in parts):
        return nan
    totals = np.stack([sign * part[0] for sign, part in zip(signs, parts)])
    shares = np.stack([part[1] for part in parts])
    held = int(np.count_nonzero(shares.sum(axis=0)))
    if held < 2:
        return {**nan, "clusters": held}
    shares = np.minimum(shares, 1.0)
    ci = cluster_robust_interval(estimate, totals, shares, confidence=confidence)
    variance, df = exchangeable_parts_variance(adjusted_parts(totals, shares), shares)
    if variance > ci.se ** 2 * (1 + 1e-9):  # ties (equal clusters) and NaN (too few clusters) keep CR2's
        t = t_wald(estimate, variance, df, confidence)
        return {"se": float(t["se"]), "ci_low": float(t["ci_low"]), "ci_high": float(t["ci_high"]), "clusters": held,
                "df": float(df)}
    return {"se": ci.se, "ci_low": ci.ci_low, "ci_high": ci.ci_high, "clusters": held, "df": ci.df}


def rate_table(p, labels, groups, *, clusters=None, reference=None, confidence: float = 0.95) -> pd.DataFrame:
    """TPR, FPR, selection rate and accuracy per group, and each group's difference from `reference`.

    p: (n,) probability of a positive decision (0/1 for deterministic rules); labels: 0/1;
    groups: group of each row; reference: the group differences are taken against (default: first).
    Rows: group, metric, estimate, se, ci_low, ci_high (t interval), n (rows behind the rate), clusters (clusters
    holding those rows) and df (the t reference's degrees of freedom: the effective number of clusters).
    """
    confidence = _check_confidence(confidence)
    p = np.asarray(p, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel().astype(bool)
    g = np.asarray(groups, dtype=object).ravel()
    lin = _Linearizer(p, _clusters(clusters, p.size))
    correct = _Linearizer(np.where(y, p, 1.0 - p), lin.codes)
    levels = sorted(set(g.tolist()), key=str)
    reference = levels[0] if reference is None else reference
    rows, parts = [], {}

    def add(group, metric, A, terms, n):
        rows.append({"group": group, "metric": metric, "estimate": A, "n": n,
                     **_interval(A, [part for _, part in terms], [sign for sign, _ in terms], confidence)})

    for level in levels + ["all"]:
        in_g = np.ones(p.size, bool) if level == "all" else (g == level)
        for metric, mask, model in (("tpr", in_g & y, lin), ("fpr", in_g & ~y, lin),
                                    ("selection_rate", in_g, lin), ("accuracy", in_g, correct)):
            A, part, n = model.residual(mask)
            parts[(level, metric)] = (A, part)
            add(level, metric, A, [(1.0, part)], n)
    for level in levels:
        if level == reference:
            continue
        for metric in ("tpr", "fpr", "selection_rate", "accuracy"):
            (Aa, Ea), (Ab, Eb) = parts[(level, metric)], parts[(reference, metric)]
            add(f"{level} - {reference}", metric, Aa - Ab, [(1.0, Ea), (-1.0, Eb)],
                int(np.sum(g == level) + np.sum(g == reference)))
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
