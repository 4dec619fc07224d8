"""Figures 1 and 3 of Nandy et al. from an EO re-ranking evaluation (SVG, `fair_pipeline.charts`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.charts import Panel, render
from fair_pipeline.eo.reranking import FIGURE_METHODS, FigureData

SIMULATION_LABEL = "SIMULATION: held-out simulated requests, clicks drawn from the simulator's ground truth"
HISTOGRAM_BINS = 60


def figure_1(
    outcomes: dict[str, FigureData],
    per_group: pd.DataFrame,
    methods: tuple[str, ...] = FIGURE_METHODS,
) -> bytes:
    """Per method (columns): fair-score densities of online positive responses per group (top) and the
    distribution of positions of Y(1)=1 items per group (bottom), titled with exposure / merit."""
    groups = sorted(outcomes[methods[0]].clicked)
    densities, positions = [], []
    for name in methods:
        outcome = outcomes[name]
        rows = per_group[per_group["method"] == name].set_index("group")
        ratios = ", ".join(
            f"{g}: {rows.loc[g, 'exposure_over_merit']:.3f}±{rows.loc[g, 'exposure_over_merit_se']:.3f}" for g in groups)
        density = Panel(f"{name}; exposure/merit {ratios}", "score of clicked items",
                        "density" if not densities else "")
        at = Panel("", "position of Y(1)=1 items", "share of the group's Y(1)=1 items" if not positions else "",
                   integer_x=True)
        for group in groups:
            clicked = np.asarray(outcome.clicked[group], dtype=float)
            if clicked.size:
                heights, edges = np.histogram(clicked, bins=HISTOGRAM_BINS, density=True)
                density.line(edges, np.append(heights, heights[-1]), series=f"group {group}", step=True, width=1.2)
            share = np.asarray(outcome.position_share[group], dtype=float)
            slots = np.arange(1, len(share) + 2) - 0.5  # each position's bar spans position ± 0.5
            at.line(slots, np.append(share, share[-1]), series=f"group {group}", step=True, width=1.2)
        densities.append(density)
        positions.append(at)
    return render(densities + positions, len(methods), panel_size=(330.0, 230.0),
                  title=f"Score and position distributions of online positive responses. {SIMULATION_LABEL}")


def figure_3(summary: pd.DataFrame, alpha_method_prefix: str = "weighted_alpha=") -> bytes:
    """EO (KS distance between groups' clicked-score distributions) and CTR (±1.96 SE) against alpha, side by
    side on one alpha axis each."""
    grid = summary[summary["method"].str.startswith(alpha_method_prefix)].sort_values("alpha")
    n = int(grid["n_requests"].iloc[0]) if len(grid) else 0
    ks = Panel("EO: KS distance between groups' clicked scores", "alpha", "KS distance")
    ks.line(grid["alpha"], grid["ks_distance"], series="KS distance", markers=True)
    ctr = Panel("performance: CTR", "alpha", "CTR (±1.96 SE)")
    ctr.points(grid["alpha"], grid["ctr"], grid["ctr"] - 1.96 * grid["ctr_se"], grid["ctr"] + 1.96 * grid["ctr_se"],
               series="CTR", connect=True)
    return render([ks, ctr], 2, panel_size=(300.0, 230.0),
                  title=f"EO vs performance over alpha (n = {n:,} requests). {SIMULATION_LABEL}")
