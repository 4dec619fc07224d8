"""exposure_parity on the project's simulator (`ingestion.simulator`, three groups, fresh item pools and requests
per replication) against the simulator's ground truth, which no estimator reads: each item's relevance Y(1) and the
true examination curve. The truth of a log is log(Σ w / Σ relevance) over a group's impressions (the exposure per
unit of true merit of that log's impressions); the estimator reads only positions and clicks. Over 60 logs the
mean error of each group's value and each ratio is within 3.5 Monte Carlo SEs of 0 (unbiased), and the 95% CIs,
which are for new items and requests and so also carry the pool's variation, cover each log's own truth at least
90% of the time."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from fair_pipeline.audit import exposure_parity
from fair_pipeline.ingestion.simulation_config import SimulationConfig
from fair_pipeline.ingestion.simulator import bias_curve, simulate_items, simulate_requests

REPS = 60


def _replication(seed: int) -> list[tuple[str, float, float, bool]]:
    config = SimulationConfig(n_items=400, slots=8, groups=3, seed=seed, group_labels='north;"south+";東-west')
    items = simulate_items(config)
    log = simulate_requests(config, items, dt.date(2026, 1, 5), "production", 1500, stream=1)
    w = bias_curve(config)
    group = items["group_id"].to_numpy()[log["item_index"]]
    relevance = items["relevance"].to_numpy()[log["item_index"]]
    res = exposure_parity(log["position"], log["click"], group, w,
                          clusters={"item": log["item_index"], "request": log["request_index"]}, reference="north")
    exposure = pd.Series(w[log["position"] - 1]).groupby(group).sum()
    truth = np.log(exposure / pd.Series(relevance).groupby(group).sum())
    rows = [(f"group {r.group}", np.log(r.exposure_over_merit) - truth[r.group],
             r.se_log, r.ci_low <= np.exp(truth[r.group]) <= r.ci_high) for r in res.per_group.itertuples()]
    rows += [(f"{r.group} / {r.reference}", r.log_ratio - (truth[r.group] - truth[r.reference]), r.se_log,
              r.ci_low <= np.exp(truth[r.group] - truth[r.reference]) <= r.ci_high) for r in res.pairs.itertuples()]
    return rows


def test_estimates_are_unbiased_for_the_simulators_truth():
    frame = pd.DataFrame([row for seed in range(REPS) for row in _replication(seed)],
                         columns=["what", "error", "se", "covered"])
    table = frame.groupby("what").agg(bias=("error", "mean"), sd=("error", "std"), covered=("covered", "mean"),
                                      n=("error", "size"))
    assert len(table) == 5 and (table["n"] == REPS).all(), table
    assert (table["bias"].abs() < 3.5 * table["sd"] / np.sqrt(REPS)).all(), table
    assert (table["covered"] >= 0.9).all(), table
