"""Audit a lambda path on held-out data: per-group partial AUCs with CIs, group gaps with p-values.

Partial AUCs and their Lemma 3 variances come from the audit (``core.audit.truncated_auc``);
this module only arranges them per (lambda, group) and differences two independent groups.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .audit.inference import wald
from .audit.truncated_auc import truncated_auc
from .mi_proxy import encode_groups
from .penalized_path import PathPoint

CUTOFFS = (0.1, 0.2, 0.5, 1.0)
MIN_PER_CLASS = 2  # below this a group's (partial) AUC variance is not estimable

GROUP_COLUMNS = ["group", "cutoff", "n_pos", "n_neg", "estimable", "pauc", "se", "ci_low", "ci_high"]


def group_partial_aucs(scores, labels, groups, cutoffs=CUTOFFS, confidence: float = 0.95) -> pd.DataFrame:
    """Normalized partial AUC I(alpha)/alpha per group and cutoff (alpha = 1: the AUC), with SE, CI.

    A group with fewer than two positives or negatives is reported with ``estimable=False`` and
    NaN estimates, never as 0.
    """
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels).astype(int)
    codes, names = encode_groups(groups)
    rows = []
    for code, name in enumerate(names):
        in_group = codes == code
        y = labels[in_group]
        m, n = int(y.sum()), int(y.size - y.sum())
        if min(m, n) < MIN_PER_CLASS:
            for alpha in cutoffs:
                rows.append([name, float(alpha), m, n, False, np.nan, np.nan, np.nan, np.nan])
            continue
        table = truncated_auc(scores[in_group], y, cutoffs, confidence=confidence)
        for rec in table.itertuples():
            rows.append(
                [name, rec.cutoff, m, n, True, rec.auc_normalized, rec.se_normalized,
                 rec.ci_low / rec.cutoff, rec.ci_high / rec.cutoff]
            )
    return pd.DataFrame(rows, columns=GROUP_COLUMNS)


def group_gap(table: pd.DataFrame, group_a, group_b, confidence: float = 0.95) -> pd.DataFrame:
    """pauc(a) - pauc(b) per cutoff for two disjoint (hence independent) groups: SE, CI, z, p."""
    a = table[table["group"] == group_a].set_index("cutoff")
    b = table[table["group"] == group_b].set_index("cutoff")
    if a.empty or b.empty:
        raise ValueError(f"groups {group_a!r} and {group_b!r} must both be in the table; have {table['group'].unique().tolist()}")
    diff = a["pauc"] - b["pauc"]
    test = wald(diff.to_numpy(), (a["se"] ** 2 + b["se"] ** 2).to_numpy(), confidence)
    return pd.DataFrame(
        {
            "cutoff": diff.index.to_numpy(),
            "group_a": group_a,
            "group_b": group_b,
            "gap": diff.to_numpy(),
            "se": test["se"],
            "ci_low": test["ci_low"],
            "ci_high": test["ci_high"],
            "z": test["z"],
            "p_value": test["p_value"],
            "n_a": (a["n_pos"] + a["n_neg"]).to_numpy(),
            "n_b": (b["n_pos"] + b["n_neg"]).to_numpy(),
        }
    )


def audit_path(points: list[PathPoint], X_test, y_test, groups_test, group_a, group_b, cutoffs=CUTOFFS):
    """Audit every model of a lambda path on held-out data.

    Returns ``(per_group, gaps, overall)``: per-group partial AUCs, the a-minus-b gaps, and one row
    per lambda with the held-out AUC (SE), its drop from the first point, and the training Î.
    """
    per_group, gaps, overall = [], [], []
    everyone = np.zeros(len(y_test), dtype=int)
    for point in points:
        s = point.model.decision_function(X_test)
        table = group_partial_aucs(s, y_test, groups_test, cutoffs)
        per_group.append(table.assign(lam=point.lam))
        gaps.append(group_gap(table, group_a, group_b).assign(lam=point.lam))
        pooled = group_partial_aucs(s, y_test, everyone, (1.0,)).iloc[0]
        overall.append(
            {"lam": point.lam, "auc": pooled["pauc"], "auc_se": pooled["se"], "n_test": len(y_test),
             "mi_proxy_train": point.mi_proxy, "n_iter": point.n_iter, "converged": point.converged,
             "fit_seconds": point.fit_seconds}
        )
    overall = pd.DataFrame(overall)
    overall["auc_drop"] = overall["auc"].iloc[0] - overall["auc"]
    return pd.concat(per_group, ignore_index=True), pd.concat(gaps, ignore_index=True), overall
