"""Evidence on the simulator of Nandy et al. 2.2 (ground truth w_j known; estimators never read it)."""
from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_items
from fair_pipeline.position_bias import compare_estimates, estimate_from_aggregates
from fair_pipeline.position_bias.aggregates import aggregate_score_bins
from fair_pipeline.position_bias.simulated_aggregates import day_frames, simulated_aggregates

DAYS = 7
DEFAULT = SimulationConfig()  # K = 50, w_j = 1/log2(1+j), 25,000 production + 5,000 shuffled requests a day
POWER = SimulationConfig(slots=20, bias_curve="power", power_eta=0.8, seed=1)


def _estimates(config):
    bins, swaps = simulated_aggregates(config, DAYS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # direct_is loses far positions by design
        return {m: estimate_from_aggregates(m, bins=bins, swaps=swaps) for m in
                ("randomized", "naive", "adjacent_pairwise", "adjacent_swap", "direct_is")}, bins


@pytest.fixture(scope="module", params=[DEFAULT, POWER], ids=["log2-K50", "power0.8-K20"])
def simulated(request):
    estimates, bins = _estimates(request.param)
    return request.param, estimates, bins


def test_adjacent_pairwise_within_002_and_3x_better_than_naive(simulated):
    config, estimates, _ = simulated
    w = bias_curve(config)
    top = min(30, config.slots)
    error = np.abs(estimates["adjacent_pairwise"]["weight"].to_numpy() - w)[:top]
    naive = np.abs(estimates["naive"]["weight"].to_numpy() - w)[:top]
    assert error.max() <= 0.02, error.max()
    assert naive.max() >= 3 * error.max(), (naive.max(), error.max())


def test_randomized_within_002_at_every_position(simulated):
    config, estimates, bins = simulated
    shuffled = bins.loc[(bins["policy"] == "shuffle") & (bins["position"] == 1), "impressions"].sum()
    assert shuffled == DAYS * config.shuffle_requests_per_day >= 35_000
    error = np.abs(estimates["randomized"]["weight"].to_numpy() - bias_curve(config))
    assert error.max() <= 0.02, error.max()


def test_observational_agrees_with_randomized_and_naive_does_not(simulated):
    config, estimates, _ = simulated
    _, good = compare_estimates(estimates["adjacent_pairwise"], estimates["randomized"], max_position=30)
    _, bad = compare_estimates(estimates["naive"], estimates["randomized"], max_position=30)
    assert good["agrees"] and len(good["disagreeing_positions"]) <= max(2, 0.1 * good["positions_compared"])
    assert not bad["agrees"] and len(bad["disagreeing_positions_bonferroni"]) >= 0.5 * bad["positions_compared"]


def test_adjacent_swap_is_unbiased_within_its_wide_intervals(simulated):
    config, estimates, _ = simulated
    curve = estimates["adjacent_swap"]
    top = min(30, config.slots)
    w, estimate = bias_curve(config)[1:top], curve["weight"].to_numpy()[1:top]
    z = np.abs(np.log(estimate) - np.log(w)) / (curve["se"] / curve["weight"]).to_numpy()[1:top]
    assert np.isfinite(z).all() and z.max() < 3.5, z


def test_direct_importance_sampling_loses_far_positions():
    """f_1/f_j: the scores at position 1 and at far positions barely overlap (why adjacent ratios are used)."""
    config = SimulationConfig(requests_per_day=5_000, shuffle_share=0, adjacent_swap_share=0)
    bins, _ = simulated_aggregates(config, 1)
    with pytest.warns(UserWarning, match="no score bin in common with position 1"):
        direct = estimate_from_aggregates("direct_is", bins=bins)
    assert direct["weight"].isna().sum() >= 10


def test_95_percent_cis_cover_the_truth_90_to_99_percent_of_the_time():
    """60 replications (one simulated day of 2,000 production + 2,000 shuffled requests each):
    randomized over positions 2-50 and adjacent_pairwise over 2-30 (T = 30), i.e. 2,940 + 1,740 intervals."""
    config = SimulationConfig(requests_per_day=2_000, shuffle_share=1.0, adjacent_swap_share=0, seed=3)
    items = simulate_items(config)
    w = bias_curve(config)
    covered = {"randomized": [], "adjacent_pairwise": []}
    for rep in range(60):
        frame = pd.concat(day_frames(config, items, dt.date(2023, 1, 1) + dt.timedelta(days=rep)), ignore_index=True)
        bins = aggregate_score_bins(frame)
        for method, top in (("randomized", 50), ("adjacent_pairwise", 30)):
            curve = estimate_from_aggregates(method, bins=bins)
            inside = (curve["ci_low"] <= w) & (w <= curve["ci_high"])
            covered[method].append(inside.to_numpy()[1:top])
    for method, hits in covered.items():
        rate = np.mean(hits)
        assert 0.90 <= rate <= 0.99, (method, rate)
