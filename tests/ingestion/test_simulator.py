"""The simulator matches Nandy et al. 2.2 within stated tolerances (about 4 standard errors)."""
from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pytest

from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_items, simulate_requests

DAY = dt.date(2026, 3, 1)
DEFAULT = SimulationConfig()


@pytest.fixture(scope="module")
def items():
    return simulate_items(DEFAULT)


def test_population_rates(items):
    n = len(items)
    assert n == 50_000
    group1 = items.group_id == "1"
    # Bernoulli(0.7): SE = sqrt(0.21 / 50000) = 0.0020
    assert abs(group1.mean() - 0.7) < 0.009
    # Y(1) | C: SE about 0.0027 (C=1) and 0.0039 (C=0)
    assert abs(items.relevance[group1].mean() - 0.45) < 0.012
    assert abs(items.relevance[~group1].mean() - 0.35) < 0.016


@pytest.mark.parametrize("group,relevant", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_merit_distribution_per_cell(items, group, relevant):
    """R = N(0.6Y + 2C, sd 0.5) + U[0, (1-C)(1+Y)]: mean and variance per (C, Y) cell."""
    cell = items[(items.group_id == str(group)) & (items.relevance == relevant)].merit_score.to_numpy()
    width = (1 - group) * (1 + relevant)
    mean = 0.6 * relevant + 2 * group + width / 2
    var = 0.25 + width**2 / 12
    se_mean = np.sqrt(var / len(cell))
    assert abs(cell.mean() - mean) < 4 * se_mean
    assert abs(cell.var() / var - 1) < 4 * np.sqrt(2 / len(cell)) * 1.5  # kurtosis of the uniform part: loose factor
    # R = f0 + f1 exactly: the production ranker is linear in the features.
    both = items[(items.group_id == str(group)) & (items.relevance == relevant)]
    np.testing.assert_allclose(both.f0 + both.f1, both.merit_score)


def test_score_noise_is_sd_0_2_and_production_order(items):
    sim = simulate_requests(DEFAULT, items, DAY, "production", 2_000, stream=1)
    noise = sim["score"] - items.merit_score.to_numpy()[sim["item_index"]]
    assert abs(noise.mean()) < 4 * 0.2 / np.sqrt(noise.size)
    assert abs(noise.std() - 0.2) < 0.002
    scores = sim["score"].reshape(2_000, DEFAULT.slots)
    assert np.all(np.diff(scores, axis=1) <= 0), "production shows items by descending score"
    np.testing.assert_array_equal(sim["position"], sim["original_position"])
    per_request = sim["item_index"].reshape(2_000, DEFAULT.slots)
    assert all(len(set(row)) == DEFAULT.slots for row in per_request), "K distinct items per request"


def _click_rate_given_relevant(config, items, policy, n_requests):
    sim = simulate_requests(config, items, DAY, policy, n_requests, stream=9)
    relevant = items.relevance.to_numpy()[sim["item_index"]] == 1
    positions = sim["position"][relevant]
    clicks = sim["click"][relevant]
    shown = np.bincount(positions, minlength=config.slots + 1)[1:]
    clicked = np.bincount(positions, weights=clicks, minlength=config.slots + 1)[1:]
    assert clicks.sum() == sim["click"].sum(), "only relevant items are ever clicked (Y(j) = Y(1) * Bernoulli(w_j))"
    return clicked / shown, shown


@pytest.mark.parametrize(
    "config",
    [DEFAULT, SimulationConfig(slots=20, bias_curve="power", power_eta=0.8, n_items=5_000)],
    ids=["log2-K50", "power0.8-K20"],
)
def test_click_probability_is_relevance_times_bias(items, config):
    population = items if config == DEFAULT else simulate_items(config)
    rate, shown = _click_rate_given_relevant(config, population, "shuffle", 4_000)
    w = bias_curve(config)
    se = np.sqrt(w * (1 - w) / shown)
    assert np.all(np.abs(rate - w) <= 4.5 * se)  # position 1: w = 1, so every relevant item is clicked


def test_randomized_policies(items):
    k = DEFAULT.slots
    shuffled = simulate_requests(DEFAULT, items, DAY, "shuffle", 500, stream=2)
    original = shuffled["original_position"].reshape(500, k)
    assert np.all(np.sort(original, axis=1) == np.arange(1, k + 1)), "shuffle shows a permutation of the ranking"
    assert (original != np.arange(1, k + 1)).any(axis=1).mean() > 0.99
    swapped = simulate_requests(DEFAULT, items, DAY, "adjacent_swap", 2_000, stream=3)
    original = swapped["original_position"].reshape(2_000, k)
    moved = original != np.arange(1, k + 1)
    assert np.all(moved.sum(axis=1) == 2), "exactly one pair moves"
    left = moved.argmax(axis=1)
    rows = np.arange(2_000)
    assert np.all(moved[rows, left + 1]) and np.all(original[rows, left] == left + 2)
    # The swapped pair is uniform over the K-1 adjacent pairs.
    counts = np.bincount(left, minlength=k - 1)
    expected = 2_000 / (k - 1)
    assert ((counts - expected) ** 2 / expected).sum() < 90  # chi2(48) 0.999 quantile is about 84


def _digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.parquet"))}


def test_same_seed_gives_byte_identical_files(tmp_path):
    config = SimulationConfig(n_items=1_000, requests_per_day=40, slots=10, seed=3)
    simulate_to_landing(config, tmp_path / "a", DAY, 2)
    simulate_to_landing(config, tmp_path / "b", DAY, 2)
    simulate_to_landing(config, tmp_path / "c", DAY + dt.timedelta(days=1), 1)
    a, b, c = _digest(tmp_path / "a"), _digest(tmp_path / "b"), _digest(tmp_path / "c")
    assert a == b
    second_day = {k: v for k, v in a.items() if "2026-03-02" in k}
    assert second_day and all(a[k] == c[k] for k in second_day), "a day depends only on (seed, date)"
    simulate_to_landing(SimulationConfig(n_items=1_000, requests_per_day=40, slots=10, seed=4), tmp_path / "d", DAY, 1)
    assert _digest(tmp_path / "d") != {k: v for k, v in a.items() if "2026-03-02" not in k}


def test_invalid_config_names_the_knob():
    with pytest.raises(ValueError, match="p_group"):
        SimulationConfig(p_group=1.5)
    with pytest.raises(ValueError, match="slots"):
        SimulationConfig(n_items=10, slots=50)


def test_k_groups_follow_their_shares_relevance_and_effects():
    config = SimulationConfig(n_items=60_000, groups=3, group_shares="0.5;0.3;0.2", group_relevance="0.2;0.5;0.8",
                              group_effects="0;1;3", group_labels='Nord "Küste";south+east;東京')
    items = simulate_items(config)
    by = items.groupby("group_id")
    share = by.size() / len(items)
    for label, p, rel, effect in zip(['Nord "Küste"', "south+east", "東京"], (0.5, 0.3, 0.2), (0.2, 0.5, 0.8), (0, 1, 3)):
        n = share[label] * len(items)
        assert share[label] == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / len(items)))
        assert by["relevance"].mean()[label] == pytest.approx(rel, abs=4 * np.sqrt(rel * (1 - rel) / n))
        g = items[items["group_id"] == label]
        gaussian = g["f0"] - config.relevance_effect * g["relevance"]  # effect + N(0, relevance_sd)
        assert gaussian.mean() == pytest.approx(effect, abs=4 * config.relevance_sd / np.sqrt(n))
        assert (g["f1"] == 0).all() == (label != 'Nord "Küste"')  # the uniform part: first group only


def test_two_groups_default_draws_are_unchanged():
    items = simulate_items(SimulationConfig(n_items=2000))
    assert sorted(items["group_id"].unique()) == ["0", "1"]
    assert items["group_id"].value_counts().to_dict() == {"1": 1394, "0": 606}
    assert items["merit_score"].sum() == pytest.approx(3698.6129317673094, rel=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    ({"groups": 1}, "groups=1 must be >= 2"),
    ({"groups": 3, "group_shares": "0.5;0.5"}, "must list 3 values"),
    ({"groups": 3, "group_shares": "0.5;0.4;0.4"}, "sum to 1"),
    ({"groups": 3, "group_relevance": "0.5;1.4;0.4"}, r"must lie in \[0, 1\]"),
    ({"groups": 2, "group_labels": "a;a"}, "distinct"),
    ({"groups": 2, "group_effects": "x;1"}, "must be numbers"),
])
def test_invalid_group_lists_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SimulationConfig(**kwargs)
