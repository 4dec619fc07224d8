"""The elicited metric's exposure weight: each candidate's exposure disparity on the logs enters the cost, and the
selected candidate changes when the weight does (the ratios come from `exposure_parity` of two re-rankings of one
simulated log: one ranking shows the groups by merit, the other puts one group on top whatever its merit)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import exposure_parity
from fair_pipeline.selection.elicitation import FairQuadraticMetric, metric_from_dict, metric_to_dict
from fair_pipeline.selection.exposure import RATES_ONLY, exposure_disparity, weigh_exposure
from fair_pipeline.selection.report import metric_table

W = 1.0 / np.log2(1.0 + np.arange(1, 7))
GROUPS = np.array(["ženy «F»", "men+", "東京"], dtype=object)


def _log(seed=0, requests=1500):
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 3, (requests, 6))
    rel = 0.5 * rng.random((requests, 6))
    position = np.argsort(np.argsort(-rel, axis=1), axis=1) + 1  # logged: by relevance
    click = rng.random((requests, 6)) < W[position - 1] * rel
    boosted = np.argsort(np.argsort(-(rel + (group == 1)), axis=1), axis=1) + 1  # group 1 first
    return pd.DataFrame({"request": np.repeat(np.arange(requests), 6), "item": rng.integers(0, 400, requests * 6),
                         "group": GROUPS[group.ravel()], "position": position.ravel(), "click": click.ravel().astype(int),
                         "boosted": boosted.ravel()})


@pytest.fixture(scope="module")
def exposure():
    d = _log()
    frames = []
    for name, ranked in (("by merit", d["position"]), ("one group on top", d["boosted"])):
        res = exposure_parity(d["position"], d["click"], d["group"], W, ranked_positions=ranked,
                              clusters={"item": d["item"], "request": d["request"]})
        frames.append(res.pairs.assign(candidate=name))
    return pd.concat(frames, ignore_index=True)


def _ranking():
    """Rates' costs: the boosted ranking is a little better on the rates; a third candidate has no exposure."""
    return pd.DataFrame({"rank": [1.0, 2.0, 3.0], "model": ["one group on top", "by merit", "no logs"],
                         "cost": [0.100, 0.104, 0.090], "cost_se": [0.002, 0.002, 0.002],
                         "ci_low": np.nan, "ci_high": np.nan, "diff_vs_winner": [0.0, 0.004, -0.01],
                         "diff_se": [np.nan, 0.001, 0.001], "diff_ci_low": np.nan, "diff_ci_high": np.nan,
                         "diff_p": np.nan, "diff_df": [np.nan, 7.0, 7.0], "estimable": [True, True, True],
                         "reason": ""}).iloc[[2, 0, 1]]


def test_disparity_is_half_the_sum_of_squared_pair_differences_and_its_se_bounds_the_delta_method():
    l, se = np.log([0.5, 1.5]), np.array([0.1, 0.2])
    value, value_se = exposure_disparity(l, se)
    full = np.append(l, 0.0)
    assert value == pytest.approx(0.5 * sum((full[u] - full[v]) ** 2 for u in range(3) for v in range(u + 1, 3)))
    grad = [(exposure_disparity(l + 1e-7 * np.eye(2)[g], se)[0] - value) / 1e-7 for g in range(2)]
    assert value_se == pytest.approx(np.abs(grad) @ se, rel=1e-5)
    assert exposure_disparity([0.0, 0.0], se) == (0.0, 0.0)
    assert np.isnan(exposure_disparity([np.nan, 0.1], se)[0])


def test_the_winner_changes_with_the_weight_on_exposure(exposure):
    d = {n: exposure_disparity(p["log_ratio"], p["se_log"]) for n, p in exposure.groupby("candidate")}
    assert d["one group on top"][0] > 10 * d["by merit"][0]  # the boosted ranking over-exposes group 1
    gap = 0.104 - 0.100
    switch = gap / (d["one group on top"][0] - d["by merit"][0])  # weight at which the totals tie
    rates_only = weigh_exposure(_ranking(), exposure, 0.0)
    assert rates_only["model"].tolist() == ["no logs", "one group on top", "by merit"]  # order untouched
    assert (rates_only["selected_by"] == RATES_ONLY).all() and rates_only["estimable"].all()
    low = weigh_exposure(_ranking(), exposure, 0.5 * switch)
    high = weigh_exposure(_ranking(), exposure, 2.0 * switch)
    assert low.loc[low["rank"] == 1, "model"].item() == "one group on top"
    assert high.loc[high["rank"] == 1, "model"].item() == "by merit"
    for table, weight in ((low, 0.5 * switch), (high, 2.0 * switch)):
        row = table.set_index("model").loc["by merit"]
        assert row["cost"] == pytest.approx(0.104 + weight * d["by merit"][0])
        assert row["cost_se"] == pytest.approx(np.hypot(0.002, weight * d["by merit"][1]))
        assert str(weight)[:4] in row["selected_by"] or f"{weight:g}" in row["selected_by"]
        missing = table.set_index("model").loc["no logs"]
        assert not missing["estimable"] and "no exposure parity" in missing["reason"] and np.isnan(missing["rank"])
        assert table[["diff_se", "diff_df"]].isna().all().all()  # the paired differences cover the rates' part only
        assert table["rank"].dropna().tolist() == [1.0, 2.0]


def test_the_metric_carries_its_exposure_weight_and_the_report_says_it():
    metric = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2)], 0.3, exposure_weight=2.5)
    back = metric_from_dict(metric_to_dict(metric))
    assert back.exposure_weight == 2.5
    assert metric_from_dict({k: v for k, v in metric_to_dict(metric).items() if k != "exposure_weight"}
                            ).exposure_weight == 0.0  # metrics stored before the weight existed rank by rates
    table = metric_table(back, None, ["a", "b"], "recorded", 12)
    assert table.loc[table["parameter"].str.startswith("exposure weight"), "elicited"].item() == 2.5
    with pytest.raises(ValueError, match="exposure_weight"):
        FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2)], 0.3, exposure_weight=-1.0)
