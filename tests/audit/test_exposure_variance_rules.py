"""The per-item totals behind `exposure_parity`'s item-clustered SE and df, rebuilt from the items' shares of each
group's exposure and merit (`benchmarks/exposure_variance_rules.py`), and the jackknife totals that benchmark
compares them with, against brute force: the log ratio recomputed without each item's impressions."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks import exposure_variance_rules as rules
from benchmarks.exposure_df_rules import DEVELOPMENT
from benchmarks.exposure_small_sample_coverage import CONFIGS, GROUPS, draw
from fair_pipeline.audit.stats.exposure import exposure_parity

CONFIG = CONFIGS["40 items, Pareto 1.1 popularity, small group 10%"]


@pytest.fixture(scope="module")
def log():
    d = draw(np.random.default_rng(3), CONFIG)
    return d, 1.0 / np.log2(1.0 + np.arange(1, CONFIG.slots + 1))


def test_rebuilt_cr2_totals_give_the_estimators_se_and_df_for_every_contrast():
    """`one_replication` raises when the rebuilt CR2 totals' Σ U² or reported df (lone clicks out, bounded) differ
    from `exposure_parity`'s SE or df; over a few fresh pools of every development configuration."""
    for name in DEVELOPMENT:
        for seed in range(3):
            rows = rules.one_replication(seed, CONFIGS[name])
            assert rows and all(np.isfinite(r["se CR2"]) and r["df CR2"] >= 1.0 for r in rows)


def test_jackknife_totals_are_the_log_ratio_minus_the_log_ratio_without_the_item(log):
    d, w = log
    totals, present, _ = rules.item_totals(d, w)
    a, h = _shares(d, w)
    # every variant subtracts the same displaced exposure: the jackknife's own part is its total plus that
    own = totals["jackknife"] - totals["CR2"] + rules.OWN_PARTS["CR2"](a, h)
    full = exposure_parity(d["position"], d["click"], d["group"], w, min_clicks=1)
    theta = np.log(full.per_group.set_index("group")["exposure_over_merit"]).reindex(GROUPS).to_numpy()
    checked = 0
    for i, item in enumerate(np.unique(d["item"])):
        c = int(np.flatnonzero(present[i])[0])  # an item belongs to one group
        rest = d[d["item"] != item]
        if max(a[i, c], h[i, c]) >= 0.99 or rest.loc[rest["group"] == GROUPS[c], "click"].sum() == 0:
            continue  # the estimator caps a share at 0.99; a group without clicks has no log ratio
        without = exposure_parity(rest["position"], rest["click"], rest["group"], w, min_clicks=1)
        value = np.log(without.per_group.set_index("group").loc[GROUPS[c], "exposure_over_merit"])
        assert own[i, c] == pytest.approx(theta[c] - value, abs=1e-9)
        checked += 1
    assert checked >= 30


def _shares(d: pd.DataFrame, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each item's shares (items × groups) of its group's Σ w and Σ click / w, by a per-group groupby."""
    frame = d.assign(e=w[d["position"] - 1], m=d["click"] / w[d["position"] - 1])
    sums = frame.groupby(["item", "group"])[["e", "m"]].sum().unstack("group").fillna(0.0)
    a = (sums["e"] / sums["e"].sum()).reindex(columns=GROUPS).fillna(0.0).to_numpy()
    h = (sums["m"] / sums["m"].sum()).reindex(columns=GROUPS).fillna(0.0).to_numpy()
    return a, h
