"""Figure 2 of Nandy et al. from audit tables (``training.penalized.gaps.audit_path`` output).

(a) per-group partial AUC with 95% CIs at each cutoff for one model; (b) per-group partial AUC
with 95% CIs against lambda, one panel per cutoff. Returns matplotlib Figures (Agg backend) for
MLflow ``log_figure`` / Dagster metadata.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def plot_group_comparison(per_group: pd.DataFrame, title: str = ""):
    """Figure 2a: partial AUC (normalized, I(alpha)/alpha) by cutoff, one marker series per group."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    groups = list(dict.fromkeys(per_group["group"]))
    offsets = np.linspace(-0.15, 0.15, len(groups))
    cutoffs = sorted(per_group["cutoff"].unique())
    for offset, group in zip(offsets, groups):
        rows = per_group[per_group["group"] == group].set_index("cutoff").loc[cutoffs]
        x = np.arange(len(cutoffs)) + offset
        ax.errorbar(x, rows["pauc"], yerr=[rows["pauc"] - rows["ci_low"], rows["ci_high"] - rows["pauc"]],
                    fmt="o", capsize=3, label=f"{group} (n={int(rows['n_pos'].iloc[0] + rows['n_neg'].iloc[0])})")
    ax.set_xticks(np.arange(len(cutoffs)), [f"{c:g}" for c in cutoffs])
    ax.set_xlabel("FPR cutoff alpha")
    ax.set_ylabel("partial AUC / alpha (95% CI)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_partial_auc_path(per_group: pd.DataFrame, cutoffs=None, title: str = ""):
    """Figure 2b: per-group partial AUC with 95% CIs against lambda (symlog axis), a panel per cutoff."""
    cutoffs = sorted(per_group["cutoff"].unique()) if cutoffs is None else list(cutoffs)
    fig, axes = plt.subplots(1, len(cutoffs), figsize=(3.4 * len(cutoffs), 3.2), squeeze=False)
    lams = sorted(per_group["lam"].unique())
    positive = [lam for lam in lams if lam > 0]
    for ax, cutoff in zip(axes[0], cutoffs):
        at_cutoff = per_group[per_group["cutoff"] == cutoff]
        for group, rows in at_cutoff.groupby("group", sort=False):
            rows = rows.sort_values("lam")
            ax.errorbar(rows["lam"], rows["pauc"], yerr=[rows["pauc"] - rows["ci_low"], rows["ci_high"] - rows["pauc"]],
                        fmt="o-", capsize=2, ms=3, label=str(group))
        ax.set_xscale("symlog", linthresh=min(positive) if positive else 1.0)
        ax.set_xlabel("lambda")
        ax.set_title(f"cutoff {cutoff:g}")
    axes[0][0].set_ylabel("partial AUC / alpha (95% CI)")
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
