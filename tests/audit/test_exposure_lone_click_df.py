"""`benchmarks/exposure_lone_click_df.py`, the coverage benchmark's rebuild of the reported df from the rows: its
lone-click fourth sums by brute force, its dfs by known answers, and its bounded df equal to `exposure_parity`'s."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.exposure_lone_click_df import bounded_df, contrast_dfs, lone_click_fourth
from benchmarks.exposure_small_sample_coverage import CONFIGS, GROUPS, draw, one_replication

CONFIG = CONFIGS["hidden 2: 500 items, log-normal σ=1, 12 slots, small group 4%"]


def test_lone_click_fourth_is_each_clicks_merit_share_to_the_fourth():
    d = draw(np.random.default_rng(2), CONFIG)
    w = 1.0 / np.log2(1.0 + np.arange(1, CONFIG.slots + 1))
    got = lone_click_fourth(d, w, GROUPS)
    for g, label in enumerate(GROUPS):
        clicked = d[(d["group"] == label) & (d["click"] == 1)]
        inverse = 1.0 / w[clicked["position"].to_numpy() - 1]
        assert got[g] == pytest.approx(np.sum((inverse / inverse.sum()) ** 4), rel=1e-12)


def test_contrast_df_known_answers():
    rng = np.random.default_rng(0)
    t = pd.DataFrame(rng.standard_t(3, size=(30, 3))).to_numpy()
    lam = np.array([1.0, 0.0, -1.0])
    u = t @ lam
    s2, s4 = u @ u, np.sum(u**4)
    cap = 29.0
    reported, lone_out = contrast_dfs([t], [cap], lam, np.array([s4 / 4, 5.0, s4 / 4]))  # half of Σ U⁴ removed
    assert reported == pytest.approx(min(s2 * s2 / s4, cap), rel=1e-12)
    assert lone_out == pytest.approx(min(2 * s2 * s2 / s4, cap), rel=1e-12)
    assert contrast_dfs([t], [cap], lam, np.array([s4, 0.0, 0.0]))[1] == cap  # all of it: the cap
    assert contrast_dfs([t], [cap], lam, np.zeros(3)) == (reported, reported)
    # two dimensions: the smaller one's df
    assert contrast_dfs([t, t[:5]], [cap, 4.0], lam, np.zeros(3))[0] == pytest.approx(
        min(reported, max(min((u[:5] @ u[:5]) ** 2 / np.sum(u[:5] ** 4), 4.0), 1.0)))


def test_bounded_df_rises_only_up_to_the_smallest_groups_clusters():
    assert bounded_df(3.0, 27.0, 3.0) == 3.0  # a 4-item group: no rise
    assert bounded_df(3.0, 27.0, 18.0) == 18.0
    assert bounded_df(3.0, 6.0, 18.0) == 6.0
    assert bounded_df(5.0, 5.0, 2.0) == 5.0  # never below the reported df


def test_rebuilt_reported_df_equals_the_estimators_and_is_not_below_the_whole_fourth_one():
    """`one_replication` raises when the rebuilt df differs from `exposure_parity`'s (both clusterings)."""
    rows = pd.DataFrame([row for seed in range(4)
                         for row in one_replication(seed, CONFIG, clusterings=("two-way (item, request)", "item"))])
    done = rows.dropna(subset=["df"])
    assert len(done) >= 30
    assert (done["df"] >= done["df_whole_fourth"] - 1e-9).all()
    assert (done["df"] <= done["df_lone_unbounded"] + 1e-9).all()
    small = done[done["what"].str.contains("small")]
    assert (small["df"] > small["df_whole_fourth"] * 1.1).any()  # the 4% group's clicks do move it
