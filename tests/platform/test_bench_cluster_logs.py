"""The cluster benchmark's `--from-logs` counts each measurement's own Dagster runs only.

A home's Dagster event log holds the main job's runs and those of every later `--steps` run on it. Real Dagster runs
(tiny ops named like the pipeline's step keys, in a Dagster home of the test's own) stand for them, with the
`run.json` files the benchmark writes: the main job's figures must not count a later run's steps (their wall time
and their number, which decides whether a step's growth ratio is printed), and a `--steps` run still going must not
count the main job's.
"""
from __future__ import annotations

import json
import os
import time

import dagster as dg
import pytest

from benchmarks.spark_cluster_logs import analyse, measured_interval

STEP_S = 0.05


def _job(*step_keys: str) -> dg.JobDefinition:
    def make(key):
        @dg.op(name=key)
        def _step() -> None:
            time.sleep(STEP_S)
        return _step

    ops = [make(key) for key in step_keys]

    @dg.job(name="steps_" + "_".join(step_keys))
    def _run():
        for op in ops:
            op()

    return _run


def _run_in(dagster_home, job) -> tuple[float, float]:
    """Runs `job` in the Dagster home; returns when its process would have started and ended."""
    before = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    try:
        since = time.time()
        with dg.DagsterInstance.get() as instance:
            assert job.execute_in_process(instance=instance).success
        return since, time.time()
    finally:
        if before is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = before


def _logs(folder, run: dict) -> None:
    (folder / "event_log").mkdir(parents=True, exist_ok=True)
    (folder / "driver_memory.json").write_text(json.dumps([[run["since"], 400.0, 700.0]]))
    (folder / "run.json").write_text(json.dumps({"load_before": [1.0] * 3, "load_after": [1.0] * 3, **run}))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A home whose main job ran EO and the audit, then a `--steps eo` run on it."""
    home = tmp_path_factory.mktemp("home_1e+06")
    (home / "dagster_home").mkdir()
    main = _run_in(home / "dagster_home", _job("marts__eo_transforms", "marts__fairness_audit"))
    time.sleep(0.2)
    later = _run_in(home / "dagster_home", _job("marts__eo_transforms"))
    return home, main, later


@pytest.mark.parametrize("recorded", ["start and end", "start and wall (earlier benchmark)"])
def test_the_main_jobs_steps_are_its_own_runs_not_a_later_steps_run(measured, recorded):
    home, (since, until), later = measured
    main_run = {"since": since, "until": until, "wall_s": until - since}
    if recorded != "start and end":
        del main_run["until"]
    _logs(home, main_run)
    _logs(home / "steps_eo", {"since": later[0], "until": later[1], "wall_s": later[1] - later[0]})

    rows = analyse(home)
    assert rows["eo"]["dagster_steps"] == 1 and rows["audit"]["dagster_steps"] == 1, rows
    assert STEP_S <= rows["eo"]["wall_s"] < until - since, rows["eo"]
    again = analyse(home, home / "steps_eo")
    assert again["eo"]["dagster_steps"] == 1 and "audit" not in again, again


def test_a_steps_run_still_going_counts_only_its_own_runs(measured):
    """The benchmark writes a run's start before the run: read while it goes, a `--steps` run has no end yet."""
    home, (since, until), later = measured
    _logs(home, {"since": since, "until": until, "wall_s": until - since})
    _logs(home / "steps_eo", {"since": later[0]})
    assert measured_interval(home, home / "steps_eo") == (later[0], float("inf"))
    again = analyse(home, home / "steps_eo")
    assert again["eo"]["dagster_steps"] == 1 and "audit" not in again, again


def test_a_main_job_that_never_ended_under_the_benchmark_ends_where_the_next_measurement_began(measured):
    """A main job stopped before the benchmark recorded its end, then a `--steps` run on the same home."""
    home, (since, _), later = measured
    _logs(home, {"since": since})
    _logs(home / "steps_eo", {"since": later[0], "until": later[1], "wall_s": later[1] - later[0]})
    assert measured_interval(home, home) == (since, later[0])
    rows = analyse(home)
    assert rows["eo"]["dagster_steps"] == 1 and rows["audit"]["dagster_steps"] == 1, rows
