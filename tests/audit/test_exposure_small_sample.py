"""exposure_parity with few, unequal item clusters: the CR2 variance and the t critical value at the effective
number of clusters cover the ratios between groups, where the normal critical value does not.

A smaller run of ``benchmarks/exposure_small_sample_coverage.py`` (docs table: 400 replications, seed 0; here
100 replications with seed 5 of the configuration with 40 items, Pareto(1.1) popularity and a 10% group, each
replication a fresh item pool and fresh requests). Bands (R = 100, binomial SE of 0.95 is 0.022): a ratio's t
interval covers within [0.88, 1.0] (-3 SE) and at least as often as the normal one; SE / SD within [0.75, 1.3]
(the SD of 100 estimates has a relative SE of 7%); the small group's ratio, resting on ~4 items, is the case the
correction is for: its normal interval must cover less than its t interval. Each group's own exposure / merit
(not a ratio) covers within [0.88, 1.0] with SE / SD >= 0.75: without the exposure a group's items take from the
other groups' (zero-sum slots) the largest group's SE / SD is about 0.64 and its coverage below 0.89.
"""
from __future__ import annotations

import pytest

from benchmarks.exposure_small_sample_coverage import CONFIGS, coverage, run, truth

CONFIG = CONFIGS["40 items, Pareto 1.1 popularity, small group 10%"]


@pytest.fixture(scope="module")
def table():
    return coverage(run(CONFIG, 100, seed=5, jobs=2), truth(CONFIG, 400))


def test_ratio_intervals_cover_with_few_dominant_items(table):
    ratios = table[table["what"].str.contains(" / ")]
    assert len(ratios) == 4  # two ratios x two clusterings
    assert ratios["t"].between(0.88, 1.0).all(), ratios
    assert (ratios["t"] >= ratios["normal"]).all(), ratios
    assert ratios["se_over_sd"].between(0.75, 1.3).all(), ratios


def test_the_small_groups_interval_needs_the_t_correction(table):
    small = table[table["what"].str.startswith("small") & table["what"].str.contains(" / ")]
    assert (small["median_df"] < 8).all(), small
    assert (small["normal"] < small["t"]).all(), small


def test_each_groups_own_value_covers(table):
    groups = table[table["what"].str.startswith("group ")]
    assert len(groups) == 6  # three groups x two clusterings
    assert groups["t"].between(0.88, 1.0).all(), groups
    assert (groups["se_over_sd"] >= 0.75).all(), groups
