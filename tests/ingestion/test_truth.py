"""The simulator's ground truth is dated: each simulated day keeps the truth it was simulated with, so a later
simulation of other days (another requests_per_day, another seed) never changes what an earlier day is evaluated
against; homes simulated before truth was dated keep their one truth for the days without their own."""
from __future__ import annotations

import datetime as dt
import json

import numpy as np

from fair_pipeline.eo.report import load_simulation_truth
from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import truth_dir
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.position_bias.report import load_truth_curve

NOVEMBER = SimulationConfig(n_items=300, requests_per_day=40, slots=10, seed=5)
JANUARY = SimulationConfig(n_items=300, requests_per_day=25, slots=8, seed=5)


def test_a_later_simulation_of_other_days_never_changes_an_earlier_days_truth(tmp_path):
    landing = tmp_path / "landing"
    simulate_to_landing(NOVEMBER, landing, dt.date(2026, 11, 20), 2)
    before = {name: (truth_dir(landing, "2026-11-21") / name).read_bytes()
              for name in ("config.json", "items.parquet", "bias_curve.parquet")}
    simulate_to_landing(JANUARY, landing, dt.date(2026, 1, 1), 3)  # the README's backfill of older days
    after = {name: (truth_dir(landing, "2026-11-21") / name).read_bytes() for name in before}
    assert after == before
    assert load_simulation_truth(landing, "2026-11-21").config == NOVEMBER
    assert load_simulation_truth(landing, dt.date(2026, 1, 2)).config == JANUARY
    assert len(load_truth_curve(landing, "2026-11-20")) == 10 and len(load_truth_curve(landing, "2026-01-03")) == 8
    # no undated truth is written any more, so nothing can read "whichever simulation ran last"
    assert not (landing / contract.TRUTH_DIR / "config.json").exists()
    assert load_simulation_truth(landing, "2026-02-01") is None  # a day without truth is not a simulation


def test_a_home_with_one_undated_truth_keeps_it_for_its_days(tmp_path):
    landing = tmp_path / "landing"
    simulate_to_landing(NOVEMBER, landing, dt.date(2026, 11, 20), 1)
    legacy = landing / contract.TRUTH_DIR
    dated = truth_dir(landing, "2026-11-20")
    for path in dated.iterdir():  # the layout of a home simulated before truth was dated
        path.replace(legacy / path.name)
    dated.rmdir()
    assert truth_dir(landing, "2026-11-20") == legacy
    assert load_simulation_truth(landing, "2026-11-20").config == NOVEMBER
    simulate_to_landing(JANUARY, landing, dt.date(2026, 1, 1), 1)
    assert load_simulation_truth(landing, "2026-11-20").config == NOVEMBER
    assert load_simulation_truth(landing, "2026-01-01").config == JANUARY
    assert json.loads((legacy / "config.json").read_text())["requests_per_day"] == 40
    np.testing.assert_array_equal(load_truth_curve(landing, "2026-11-20"), load_truth_curve(landing, "2026-11-20"))
