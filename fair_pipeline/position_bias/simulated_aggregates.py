"""Simulated impressions and their position-bias aggregates, straight from the core simulator (no files).

For tests, the accuracy script and the benchmark: 7 days x 25,000 requests x 50 slots is 8.75M production
impressions, so days are aggregated one at a time and only the aggregates are kept.
The policy streams match `fair_pipeline.ingestion.simulated_landing`, so the same seed gives the same clicks as the landing files."""
from __future__ import annotations

import datetime as dt

import pandas as pd

from fair_pipeline.ingestion.simulation_config import SimulationConfig
from fair_pipeline.ingestion.simulator import simulate_items, simulate_requests
from fair_pipeline.position_bias.aggregates import aggregate_score_bins, aggregate_swap_cells

START = dt.date(2024, 1, 1)
STREAMS = {"production": 1, "shuffle": 2, "adjacent_swap": 3}


def impressions_frame(config: SimulationConfig, items: pd.DataFrame, day: dt.date, policy: str, n_requests: int) -> pd.DataFrame:
    """request_id (int), policy, position, original_position, score, click for one policy on one day."""
    sim = simulate_requests(config, items, day, policy, n_requests, stream=STREAMS[policy])
    frame = pd.DataFrame({k: sim[k] for k in ("position", "original_position", "score", "click")})
    frame.insert(0, "request_id", sim["request_index"] + day.toordinal() * 10_000_000)
    frame.insert(1, "policy", policy)
    return frame


def day_frames(config: SimulationConfig, items: pd.DataFrame, day: dt.date) -> list[pd.DataFrame]:
    """One frame per policy with traffic that day (production, shuffle, adjacent_swap)."""
    counts = {
        "production": config.requests_per_day,
        "shuffle": config.shuffle_requests_per_day,
        "adjacent_swap": config.adjacent_swap_requests_per_day,
    }
    return [impressions_frame(config, items, day, p, n) for p, n in counts.items() if n > 0]


def simulated_aggregates(
    config: SimulationConfig, days: int, start: dt.date = START
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score-bin and swap-cell aggregates of `days` simulated days, aggregated day by day (bounded memory)."""
    items = simulate_items(config)
    bins, swaps = [], []
    for offset in range(days):
        frame = pd.concat(day_frames(config, items, start + dt.timedelta(days=offset)), ignore_index=True)
        bins.append(aggregate_score_bins(frame))
        swaps.append(aggregate_swap_cells(frame))
    return pd.concat(bins, ignore_index=True), pd.concat(swaps, ignore_index=True)
