"""`benchmarks/exposure_df_diagnosis.py`'s working-model rules: known answers (equal items give Student's t with
items - 1 df exactly) and its per-item model against the estimator's own totals."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student

from benchmarks.exposure_df_diagnosis import exact_rule, satterthwaite_rule, working_model
from benchmarks.exposure_small_sample_coverage import CONFIGS, GROUPS, draw
from fair_pipeline.audit.stats.exposure import exposure_parity


def _equal_items(per_group: int):
    g = np.repeat(np.arange(3), per_group)
    h = np.full(g.size, 1.0 / per_group)
    return g, np.ones(g.size), h, np.zeros(g.size), np.zeros(3)


def test_equal_items_give_t_with_items_minus_one_df():
    # equal σ and merit shares 1/G: the CR2-studentized mean is exactly t_{G-1}; 2,000 draws pin its 97.5% point
    # within about 0.1
    model = _equal_items(6)
    assert exact_rule(model, np.eye(3)[2]) == pytest.approx(student.ppf(0.975, 5), abs=0.15)
    assert satterthwaite_rule(model, np.eye(3)[2]) == 5.0  # (Σσ²)² / Σσ⁴ = 6, capped at 6 - 1
    # a contrast of two groups of 6: Satterthwaite 12, capped at 11
    assert satterthwaite_rule(model, np.eye(3)[2] - np.eye(3)[0]) == 11.0


def test_one_dominant_item_leaves_about_one_df():
    g, sigma2, h, excess, disp = _equal_items(6)
    sigma2[0] = 1e6
    assert satterthwaite_rule((g, sigma2, h, excess, disp), np.eye(3)[0]) == pytest.approx(1.0, abs=1e-4)


def test_working_model_reads_the_estimators_item_totals():
    config = CONFIGS["25 items, uniform popularity"]
    d = draw(np.random.default_rng(4), config)
    w = 1.0 / np.log2(1.0 + np.arange(1, config.slots + 1))
    res = exposure_parity(d["position"], d["click"], d["group"], w, clusters={"item": d["item"], "request": d["request"]},
                          reference=GROUPS[0], keep_totals=True)
    totals = res.cluster_totals["item"].reindex(columns=GROUPS).fillna(0.0).to_numpy()
    g, sigma2, h, excess, disp = working_model(d, totals)
    # an item's total on another group's log ratio is only the exposure it displaces, -X_i d_c
    other = (np.arange(3)[None, :] != g[:, None])
    assert np.allclose(totals[other], (-excess[:, None] * disp[None, :])[other], atol=1e-12)
    # merit shares sum to 1 per group; the model's variances add up to the group's sum of squared own totals
    # (moments: α_g is fitted so; here every group's items differ in relevance, so the between part is positive)
    for k in range(3):
        assert h[g == k].sum() == pytest.approx(1.0)
        own = totals[g == k, k] + excess[g == k] * disp[k]
        assert sigma2[g == k].sum() == pytest.approx(float(own @ own), rel=1e-9)
