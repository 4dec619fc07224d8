"""Figure 2 of Nandy et al. from audit tables (``training.penalized.gaps.audit_path`` output), as SVG.

(a) per-group partial AUC with 95% CIs at each cutoff for one model; (b) per-group partial AUC with 95% CIs
against lambda, one panel per cutoff. MLflow logs them (``log_figure``) and Dagster metadata links to them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.charts import Panel, dodge, render

PAUC_LABEL = "partial AUC / alpha (95% CI)"


def plot_group_comparison(per_group: pd.DataFrame, title: str = "") -> bytes:
    """Figure 2a: partial AUC (normalized, I(alpha)/alpha) by cutoff, one marker series per group."""
    groups = list(dict.fromkeys(per_group["group"]))
    cutoffs = sorted(per_group["cutoff"].unique())
    panel = Panel(title, "FPR cutoff alpha", PAUC_LABEL, x_labels=[f"{c:g}" for c in cutoffs])
    for offset, group in zip(dodge(len(groups)), groups):
        rows = per_group[per_group["group"] == group].set_index("cutoff").loc[cutoffs]
        panel.points(np.arange(len(cutoffs)) + offset, rows["pauc"], rows["ci_low"], rows["ci_high"],
                     series=f"{group} (n={int(rows['n_pos'].iloc[0] + rows['n_neg'].iloc[0])})")
    return render([panel], panel_size=(420.0, 260.0))


def plot_partial_auc_path(per_group: pd.DataFrame, cutoffs=None, title: str = "") -> bytes:
    """Figure 2b: per-group partial AUC with 95% CIs against lambda, a panel per cutoff. The lambda grid is
    spaced evenly (0, 0.1, 1, 10, ... are categories), as the paper's symlog axis shows it."""
    cutoffs = sorted(per_group["cutoff"].unique()) if cutoffs is None else list(cutoffs)
    lams = sorted(per_group["lam"].unique())
    at = {lam: i for i, lam in enumerate(lams)}
    drawn = []
    for cutoff in cutoffs:
        panel = Panel(f"cutoff {cutoff:g}", "lambda", PAUC_LABEL if not drawn else "", x_labels=[f"{lam:g}" for lam in lams])
        at_cutoff = per_group[per_group["cutoff"] == cutoff]
        groups = list(at_cutoff.groupby("group", sort=False))
        for offset, (group, rows) in zip(dodge(len(groups), 0.4), groups):
            rows = rows.sort_values("lam")
            panel.points(rows["lam"].map(at).to_numpy(dtype=float) + offset, rows["pauc"], rows["ci_low"], rows["ci_high"],
                         series=str(group), connect=True)
        drawn.append(panel)
    return render(drawn, len(drawn), panel_size=(260.0, 220.0), title=title, legend_title="group")


def group_paucs(audit: pd.DataFrame) -> pd.DataFrame:
    """The per-group rows of an audit table, with the column name the figures read."""
    return audit[audit["row_type"] == "group"].rename(columns={"auc": "pauc"})
