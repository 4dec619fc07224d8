"""Per-group decision rates on held-out data with small-sample cluster-robust (linearization) standard errors.

A rate is a ratio mean A = sum_i u_i p_i / sum_i u_i over the rows u_i of a cell (a group, or a group's
label-1 rows for a TPR), where p_i is the decision or the *probability* of a positive decision (the
expected rate of a randomized rule: the randomization noise is not part of its sampling error). Its
linearization e_i = u_i (p_i - A) / sum u, summed per independent unit c (rows by default, or `clusters`, e.g.
items, queries or users with repeated rows), gives the totals E_c. The variance is CR2's (Bell & McCaffrey 2002;
`audit.stats.small_sample`): each total divided by sqrt(1 - h_c), h_c the cluster's share of the cell's rows (the
cell's own finite-cluster factor; with one row per cluster the usual s^2 / n), or where larger the
exchangeable-items variance (`audit.stats.exchangeable`), reported as ``se`` with ``df``: the smaller of the totals'
effective clusters and the design df of the shares (a few items holding most of a cell's rows leave few degrees of
freedom). A difference of two rates is a sum of two such parts (each with its own shares), so rates sharing
clusters keep their covariance.

The CI: where every cluster of the cell decides all-or-nothing (a deterministic rule, one decision per item), the
rate is a binomial count with unequal item sizes and its CI inverts that distribution given the sizes
(`audit.stats.item_binomial`; column ``interval`` = "weighted binomial"; a difference of two such cells on
disjoint clusters by MOVER): a symmetric interval around a sum of a few large jumps was either one-sided (CR2) or
conservative (the exchangeable variance). Otherwise ("t") it is Student's t at ``df`` with ``se``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.small_sample import adjusted_parts, cluster_robust_interval, t_wald
from fair_pipeline.audit.stats.exchangeable import exchangeable_parts_variance
from fair_pipeline.audit.stats.item_binomial import mover_difference, weighted_binomial_interval

RATE_COLUMNS = ["group", "metric", "estimate", "se", "ci_low", "ci_high", "n", "clusters", "df", "interval"]
WEIGHTED_BINOMIAL, T_INTERVAL = "weighted binomial", "t"


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
        """(rate, its part: (per-cluster totals, per-cluster shares of the cell's rows, the rate, whether every
        cluster's rows in the cell share one decision 0 or 1), rows in the cell)."""
        n = int(mask.sum())
        if n == 0:
            return np.nan, None, 0
        A = float(self.p[mask].mean())
        e = np.where(mask, self.p - A, 0.0) / n
        totals = np.bincount(self.codes, weights=e, minlength=self.Q)
        rows = np.bincount(self.codes, weights=mask.astype(np.float64), minlength=self.Q)
        held = rows > 0
        mean = np.bincount(self.codes, weights=np.where(mask, self.p, 0.0), minlength=self.Q)[held] / rows[held]
        all_or_nothing = bool(np.all((np.abs(mean) <= 1e-12) | (np.abs(mean - 1.0) <= 1e-12)))
        return A, (totals, rows / n, A, all_or_nothing), n


def _interval(estimate: float, parts: list, signs: list, confidence: float) -> dict:
    """se, CI, clusters holding the cell(s) and df of ``estimate`` = sum of signs x parts (NaN without two clusters)."""
    nan = {"se": np.nan, "ci_low": np.nan, "ci_high": np.nan, "clusters": 0, "df": np.nan, "interval": T_INTERVAL}
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
        out = {"se": float(t["se"]), "ci_low": float(t["ci_low"]), "ci_high": float(t["ci_high"]), "clusters": held,
               "df": float(df), "interval": T_INTERVAL}
    else:
        out = {"se": ci.se, "ci_low": ci.ci_low, "ci_high": ci.ci_high, "clusters": held, "df": ci.df,
               "interval": T_INTERVAL}
    exact = _weighted_binomial(parts, signs, confidence)
    if exact is not None and np.isfinite(out["se"]):
        out.update(ci_low=exact[0], ci_high=exact[1], interval=WEIGHTED_BINOMIAL)
    return out


def _weighted_binomial(parts: list, signs: list, confidence: float):
    """(low, high) of a cell's rate, or of a difference of two cells on disjoint clusters, when every cluster of
    the cells decides all-or-nothing (`audit.stats.item_binomial`); None otherwise."""
    if not all(part[3] for part in parts):
        return None
    if len(parts) == 1 and signs[0] == 1.0:
        return weighted_binomial_interval(parts[0][1], parts[0][2], confidence)
    if len(parts) == 2 and sorted(signs) == [-1.0, 1.0] and not np.any((parts[0][1] > 0) & (parts[1][1] > 0)):
        (a, b) = parts if signs[0] == 1.0 else parts[::-1]
        return mover_difference(a[2], weighted_binomial_interval(a[1], a[2], confidence),
                                b[2], weighted_binomial_interval(b[1], b[2], confidence))
    return None


def rate_table(p, labels, groups, *, clusters=None, reference=None, confidence: float = 0.95) -> pd.DataFrame:
    """TPR, FPR, selection rate and accuracy per group, and each group's difference from `reference`.

    p: (n,) probability of a positive decision (0/1 for deterministic rules); labels: 0/1;
    groups: group of each row; reference: the group differences are taken against (default: first).
    Rows: group, metric, estimate, se, ci_low, ci_high, n (rows behind the rate), clusters (clusters holding those
    rows), df (the t reference's degrees of freedom: the effective number of clusters) and interval (how the CI was
    formed: "weighted binomial" where every cluster decides all-or-nothing, else "t" at df with se; module doc).
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
