"""`evaluate_rerankings`: the pure function behind the `eo_evaluation` asset (a SIMULATION study).

Re-ranks held-out simulated requests under raw scores, the unweighted CDF transform (Lemma 1), the
weighted CDF transform (Theorem 1) and an alpha grid of the weighted transform (appendix A.1), draws new
clicks from the simulator's ground truth and returns per-group tables plus figures 1 and 3.
"""
from __future__ import annotations

import dataclasses
import datetime as dt

import pandas as pd

from fair_pipeline.eo.figures import SIMULATION_LABEL, figure_1, figure_3
from fair_pipeline.eo.reranking import evaluate_methods, held_out_chunks
from fair_pipeline.eo.transform import WeightedCDFTransformer, with_alpha
from fair_pipeline.ingestion.simulation_config import SimulationConfig

DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
# At most this many held-out requests unless asked for more: the study's precision is set by the requests it
# simulates, not by a day's traffic (50,000 requests of 20-50 candidates resolve the exposure-over-merit ratio to
# an SE of about 0.005), and the driver's memory and time then stop growing with a simulated day's size.
MAX_DEFAULT_REQUESTS = 50_000
ALPHA_PREFIX = "weighted_alpha="


@dataclasses.dataclass
class RerankingReport:
    """per_group: method x group (merit, exposure, exposure/merit with SEs, CTR, counts);
    summary: method x (group vs the largest group) (exposure-over-merit ratio with SE, KS distance and p-value, CTR with SE);
    positions: method x group x position (Y(1)=1 items shown there); figures: "figure_1", "figure_3"."""

    label: str
    per_group: pd.DataFrame
    summary: pd.DataFrame
    positions: pd.DataFrame
    figures: dict


def default_requests(config: SimulationConfig) -> int:
    """The held-out requests evaluated when none are asked for: a simulated day's, at most MAX_DEFAULT_REQUESTS."""
    return min(config.requests_per_day, MAX_DEFAULT_REQUESTS)


def evaluate_rerankings(
    config: SimulationConfig,
    items: pd.DataFrame,
    weighted: WeightedCDFTransformer,
    unweighted: WeightedCDFTransformer,
    *,
    day: dt.date,
    n_requests: int | None = None,
    alphas: tuple[float, ...] = DEFAULT_ALPHAS,
    make_figures: bool = True,
) -> RerankingReport:
    """`day` must lie outside the training window; `n_requests` defaults to `default_requests(config)`."""
    requests = held_out_chunks(config, items, day, n_requests or default_requests(config))  # drawn as evaluated
    methods = {
        "raw": (None, None),
        "unweighted": (with_alpha(unweighted, 1.0).transform, 1.0),
        "weighted": (with_alpha(weighted, 1.0).transform, 1.0),
    }
    for alpha in alphas:
        methods[f"{ALPHA_PREFIX}{alpha:g}"] = (with_alpha(weighted, alpha).transform, float(alpha))
    per_group, summary, positions, figure_data = evaluate_methods(requests, methods)
    figures = {}
    if make_figures:
        figures = {"figure_1": figure_1(figure_data, per_group), "figure_3": figure_3(summary, ALPHA_PREFIX)}
    return RerankingReport(SIMULATION_LABEL, per_group, summary, positions, figures)
