"""Audit a lambda path on held-out data: per-group partial AUCs with CIs, group gaps with p-values.

All estimates, variances and group differences come from the audit (``audit.stats.compare_groups``,
Lemma 3 variances, independent groups); this module only runs it per lambda and reshapes its tables
to the normalized scale of figure 2 (I(alpha) / alpha, so alpha = 1 is the AUC).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.compare import compare_groups
from fair_pipeline.training.penalized.path import PathPoint

CUTOFFS = (0.1, 0.2, 0.5, 1.0)


def group_table(comparison) -> pd.DataFrame:
    """Per-group rows of a GroupComparison on the normalized scale (NaN where not estimable)."""
    g = comparison.groups
    return pd.DataFrame(
        {
            "group": g["group"], "cutoff": g["cutoff"], "n_pos": g["n_pos"], "n_neg": g["n_neg"],
            "estimable": g["estimable"], "pauc": g["auc_normalized"], "se": g["se_normalized"],
            "ci_low": g["ci_low"] / g["cutoff"], "ci_high": g["ci_high"] / g["cutoff"], "note": g["note"],
        }
    )


def gap_table(comparison, group_a, group_b) -> pd.DataFrame:
    """pauc(a) - pauc(b) per cutoff, normalized, from the audit's pairwise table (sign follows a - b)."""
    pairs = comparison.pairs
    forward = pairs[(pairs["group_a"] == group_a) & (pairs["group_b"] == group_b)]
    backward = pairs[(pairs["group_a"] == group_b) & (pairs["group_b"] == group_a)]
    if forward.empty and backward.empty:
        present = comparison.groups["group"].unique().tolist()
        raise ValueError(f"groups {group_a!r} and {group_b!r} must both be audited; have {present}")
    rows, sign = (forward, 1.0) if not forward.empty else (backward, -1.0)
    alpha = rows["cutoff"].to_numpy()
    low, high = sign * rows["ci_low"].to_numpy(), sign * rows["ci_high"].to_numpy()
    sizes = comparison.groups.assign(n=comparison.groups["n_pos"] + comparison.groups["n_neg"]).groupby("group")["n"].first()
    return pd.DataFrame(
        {
            "cutoff": alpha, "group_a": group_a, "group_b": group_b,
            "gap": sign * rows["diff"].to_numpy() / alpha, "se": rows["se"].to_numpy() / alpha,
            "ci_low": np.minimum(low, high) / alpha, "ci_high": np.maximum(low, high) / alpha,
            "z": sign * rows["z"].to_numpy(), "p_value": rows["p_value"].to_numpy(),
            "estimable": rows["estimable"].to_numpy(), "n_a": int(sizes[group_a]), "n_b": int(sizes[group_b]),
        }
    )


def audit_path(points: list[PathPoint], X_test, y_test, groups_test, group_a, group_b, cutoffs=CUTOFFS):
    """Audit every model of a lambda path on held-out data.

    Returns ``(per_group, gaps, overall)``: per-group partial AUCs, the a-minus-b gaps, and one row
    per lambda with the held-out AUC (SE), its drop from the first point, and the training Î.
    """
    cutoffs = sorted(set(float(c) for c in cutoffs) | {1.0})  # alpha = 1 gives the pooled AUC
    per_group, gaps, overall = [], [], []
    for point in points:
        comparison = compare_groups(point.model.decision_function(X_test), y_test, groups_test, cutoffs)
        per_group.append(group_table(comparison).assign(lam=point.lam))
        gaps.append(gap_table(comparison, group_a, group_b).assign(lam=point.lam))
        pooled = comparison.overall.set_index("cutoff").loc[1.0]
        overall.append(
            {"lam": point.lam, "auc": pooled["auc"], "auc_se": pooled["se"], "n_test": len(y_test),
             "mi_proxy_train": point.mi_proxy, "n_iter": point.n_iter, "converged": point.converged,
             "fit_seconds": point.fit_seconds}
        )
    overall = pd.DataFrame(overall)
    overall["auc_drop"] = overall["auc"].iloc[0] - overall["auc"]
    return pd.concat(per_group, ignore_index=True), pd.concat(gaps, ignore_index=True), overall
