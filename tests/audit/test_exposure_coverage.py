"""exposure_parity's 95% CIs cover the population value, each replication a fresh item pool and fresh requests.

A smaller run of ``benchmarks/exposure_coverage.py`` (docs table: ``python benchmarks/exposure_coverage.py``,
1000 replications, seed 0; this test: 200 replications, seed 2, the two-way clustered variance with the
true examination curve, and with an estimated curve whose covariance enters by the delta method).

Bands (R = 200; binomial SE of a coverage of 0.95 is 0.0154):
* ratio of a group to the reference: coverage in [0.905, 0.99] (0.95 -2.9 / +2.6 SE); mean SE / empirical SD
  in [0.85, 1.15] (the SD of 200 estimates has relative SE 5%, so +-3 SE; an SE 15% too small covers 0.90).
* a group's own exposure/merit on the w_1 = 1 scale: coverage >= 0.87 (items compete for slots: an item's excess
  exposure is taken from every group, the displacement term of `exposure`; without it the benchmark measured
  0.91-0.94 with SE/SD 0.85-0.9).
* unbiasedness: |mean estimate - truth| < 3.5 Monte Carlo SEs (SD / sqrt(R)) plus the truth's own error.
* ignoring the estimated curve's uncertainty must under-cover the per-group values (< 0.8): the test fails
  if the delta-method term were dropped or wrong.
"""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.exposure_coverage import coverage_table, run, true_values, truth

REPS, SEED = 200, 2
VARIANTS = ("two-way (item, request)", "two-way, ŵ with covariance", "two-way, ŵ ignored")


@pytest.fixture(scope="module")
def table():
    return coverage_table(run(REPS, SEED, jobs=2, variants=VARIANTS), true_values(truth()))


def test_ratio_cis_cover_the_population_value(table):
    pairs = table[table["what"].str.contains(" / ") & (table["variant"] != "two-way, ŵ ignored")]
    assert len(pairs) == 4
    assert pairs["coverage"].between(0.905, 0.99).all(), pairs
    assert pairs["se_over_sd"].between(0.85, 1.15).all(), pairs


def test_group_values_cover_and_estimates_are_unbiased(table):
    rows = table[table["variant"] != "two-way, ŵ ignored"]
    groups = rows[rows["what"].str.startswith("log ratio")]
    assert (groups["coverage"] >= 0.87).all(), groups
    assert (rows["bias_in_mc_se"].abs() < 3.5).all(), rows


def test_ignoring_the_examination_uncertainty_undercovers(table):
    ignored = table[(table["variant"] == "two-way, ŵ ignored") & table["what"].str.startswith("log ratio")]
    assert (ignored["coverage"] < 0.8).all(), ignored
