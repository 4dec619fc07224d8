"""Figures 1 and 3 of Nandy et al. from an EO re-ranking evaluation (matplotlib, Agg backend)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fair_pipeline.eo.reranking import FIGURE_METHODS, FigureData  # noqa: E402

SIMULATION_LABEL = "SIMULATION: held-out simulated requests, clicks drawn from the simulator's ground truth"
_GROUP_COLORS = ("tab:orange", "tab:blue", "tab:green", "tab:red")


def figure_1(
    outcomes: dict[str, FigureData],
    per_group: pd.DataFrame,
    methods: tuple[str, ...] = FIGURE_METHODS,
):
    """Per method (columns): fair-score densities of online positive responses per group (top) and the
    distribution of positions of Y(1)=1 items per group (bottom), titled with exposure / merit."""
    groups = sorted(outcomes[methods[0]].clicked)
    fig, axes = plt.subplots(2, len(methods), figsize=(4.6 * len(methods), 7.2), squeeze=False)
    k = len(outcomes[methods[0]].position_share[groups[0]])
    for col, name in enumerate(methods):
        outcome = outcomes[name]
        rows = per_group[per_group["method"] == name].set_index("group")
        for i, group in enumerate(groups):
            color = _GROUP_COLORS[i % len(_GROUP_COLORS)]
            axes[0, col].hist(outcome.clicked[group], bins=60, density=True, histtype="step", color=color,
                              label=f"group {group}")
            axes[1, col].step(np.arange(1, k + 1), outcome.position_share[group], where="mid", color=color,
                              label=f"group {group}")
        ratios = ", ".join(
            f"{g}: {rows.loc[g, 'exposure_over_merit']:.3f}±{rows.loc[g, 'exposure_over_merit_se']:.3f}" for g in groups
        )
        axes[0, col].set_title(f"{name}\nexposure/merit {ratios}", fontsize=9)
        axes[0, col].set_xlabel("score of clicked items")
        axes[1, col].set_xlabel("position of Y(1)=1 items")
        axes[1, col].set_ylim(bottom=0)
    axes[0, 0].set_ylabel("density")
    axes[1, 0].set_ylabel("share of the group's Y(1)=1 items")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Score and position distributions of online positive responses\n{SIMULATION_LABEL}", fontsize=9)
    fig.tight_layout()
    return fig


def figure_3(summary: pd.DataFrame, alpha_method_prefix: str = "weighted_alpha="):
    """EO (KS distance between groups' clicked-score distributions) and CTR (±1.96 SE) against alpha."""
    grid = summary[summary["method"].str.startswith(alpha_method_prefix)].sort_values("alpha")
    fig, left = plt.subplots(figsize=(6.0, 4.0))
    left.plot(grid["alpha"], grid["ks_distance"], "o-", color="tab:purple", label="KS distance")
    left.set_xlabel("alpha")
    left.set_ylabel("KS distance (clicked scores, group vs group)", color="tab:purple")
    right = left.twinx()
    right.errorbar(grid["alpha"], grid["ctr"], yerr=1.96 * grid["ctr_se"], fmt="s--", color="tab:gray", capsize=3)
    right.set_ylabel("CTR (±1.96 SE)", color="tab:gray")
    n = int(grid["n_requests"].iloc[0]) if len(grid) else 0
    left.set_title(f"EO vs performance over alpha (n = {n:,} requests)\n{SIMULATION_LABEL}", fontsize=8)
    fig.tight_layout()
    return fig
