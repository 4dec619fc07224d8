"""Shared fixtures: every test that touches files gets its own FAIR_PIPELINE_HOME."""
from __future__ import annotations

import os

# Multi-threaded BLAS on a small shared machine makes sklearn fits ~10x slower; set before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# The JVMs the tests start in subprocesses (drivers, a standalone master, worker and executors, a Connect server)
# inherit this: each lives for a few small jobs, so C2's optimizing compiles cost it more than they save (with C1
# alone the cluster tests took 13-38% less time, docs/development.md). The shared SparkSession, which runs every
# Spark test's queries for many minutes, keeps C2 (tests/platform/spark/conftest.py).
from tests.platform.spark.cluster import SHORT_LIVED_JVM_OPTIONS  # noqa: E402

os.environ.setdefault("JAVA_TOOL_OPTIONS", SHORT_LIVED_JVM_OPTIONS)
# fair_pipeline.platform.tracking.store sets this on import, for the whole process (not a leak of one test).
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# Tests of one process use homes with different first days; the partitions (fixed when the definitions load) must
# hold all of them (tests/platform/test_partition_start.py checks the start that follows the landing zone).
os.environ.setdefault("FAIR_PIPELINE_START_DATE", "2019-11-01")

import datetime as dt  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from fair_pipeline.ingestion.simulator import SimulationConfig  # noqa: E402

SMALL = SimulationConfig(n_items=2_000, requests_per_day=60, shuffle_share=0.5, adjacent_swap_share=0.5, slots=20, seed=7)
START = dt.date(2026, 1, 1)


# Modules that take minutes (worker-seconds: the last full run's `--durations` for the seven slowest tests it
# listed, on a loaded machine; earlier full runs' `--durations=0` at load ~10 for the others). xdist (`--dist loadfile`, `--no-loadscope-reorder`) hands work units to
# the workers in collection order, so these go first, longest first, and the short ones fill the gaps: a long
# module drawn last by the random order leaves the other worker idle until it ends. (Without
# `--no-loadscope-reorder`, xdist >= 3.8 sorts the units by their number of tests, which put these last.) A stale
# figure only costs time; the order among the remaining modules and within every module stays pytest-randomly's.
LONG_MODULES = {
    "tests/e2e/test_readme.py": 465,
    "tests/e2e/test_main_job.py": 375, "tests/platform/spark/test_engine_run.py": 611,
    "tests/platform/test_disk_full.py": 309, "tests/e2e/test_browser.py": 240, "tests/e2e/test_partitions.py": 175,
    "tests/audit/test_assets.py": 220, "tests/reporting/test_assets.py": 235, "tests/platform/spark/test_ingestion_parity.py": 200,
    "tests/e2e/test_group_labels.py": 150, "tests/e2e/test_three_groups.py": 150, "tests/audit/test_coverage.py": 167,
    "tests/audit/test_cluster_inference_coverage.py": 150, "tests/audit/test_exposure_coverage.py": 120,
    "tests/selection/test_assets.py": 131, "tests/training/test_assets.py": 123, "tests/position_bias/test_assets.py": 115,
    "tests/platform/test_concurrent_runs.py": 110, "tests/platform/spark/test_parity.py": 98,
    "tests/platform/spark/test_spark_engine.py": 92, "tests/platform/spark/test_connect.py": 90,
    "tests/app/test_concurrency.py": 80, "tests/ingestion/test_landing_corpus.py": 55,
    "tests/platform/spark/test_bench_engines.py": 31, "tests/platform/spark/test_spark_audit_driver.py": 300,
    "tests/platform/spark/test_spark_audit.py": 80, "tests/e2e/test_open_bandit_campaigns.py": 200,
    "tests/selection/test_interactive_elicitation.py": 120,
    "tests/platform/spark/test_storage_on_cluster.py": 309, "tests/platform/spark/test_landing_uri_job.py": 282,
    "tests/platform/spark/test_spark_cell_audit.py": 119,
}

# Directories whose modules are one work unit (one worker runs all of them): the Spark tests share the session's
# SparkSession, and a worker that ran any of them started a JVM (25-45 s) of its own.
ONE_WORKER = ("tests/platform/spark/",)
# Spark modules that start a cluster or a Connect server of their own and never the shared session: units of their
# own, so that the other worker runs them beside the shared-session tests. The modules on the session's standalone
# cluster (tests/platform/spark/conftest.py's `shared_cluster`) are one unit, so that one worker starts it once.
OWN_JVM = ("tests/platform/spark/test_connect.py", "tests/platform/spark/test_engine_run.py",
           "tests/platform/spark/test_spark_audit_driver.py", "tests/platform/spark/test_storage_on_cluster.py")
SHARED_CLUSTER = ("tests/platform/spark/test_engine_run.py", "tests/platform/spark/test_spark_audit_driver.py",
                  "tests/platform/spark/test_storage_on_cluster.py")
SHARED_CLUSTER_UNIT = "tests/platform/spark/ (shared standalone cluster)"

# Modules whose tests share no module-scoped setup (each builds its own home): every test is a unit of its own, so
# the two workers share a module that would otherwise keep one of them busy for many minutes. Worker-seconds of
# each test, as LONG_MODULES (test_kill_recovery took 880 s as one unit, its longest test 254 s idle;
# test_docs_commands 420 s, four tests of it 330 s).
SPLIT_MODULES = ("tests/platform/test_kill_recovery.py", "tests/e2e/test_docs_commands.py")
LONG_TESTS = {
    "tests/e2e/test_docs_commands.py::test_the_documented_week_run": 202,
    "tests/e2e/test_docs_commands.py::test_benchmark_runs_with_smaller_sizes[python benchmarks/bench_noop_run.py "
    "--days 4 --requests-per-day 1000]": 234,
    "tests/e2e/test_docs_commands.py::test_benchmark_runs_with_smaller_sizes[python benchmarks/bench_main_job.py "
    "--sizes 25000 100000 250000 --days 3 --top 6]": 75,
    "tests/e2e/test_docs_commands.py::test_benchmark_runs_with_smaller_sizes[python benchmarks/bench_penalized.py "
    "--repeats 5 --parts objective,fits,path]": 20,
    "tests/platform/test_kill_recovery.py::test_run_recovers_after_kill_in_sql_model_audit_and_selection_steps": 302,
    "tests/platform/test_kill_recovery.py::test_backfill_completes_after_run_killed_mid_step[mlflow_logging]": 165,
    "tests/platform/test_kill_recovery.py::test_backfill_completes_after_run_killed_mid_step[ingestion]": 160,
    "tests/platform/test_kill_recovery.py::test_run_waiting_for_a_live_runs_slot_obeys_sigterm": 55,
}


def work_unit(nodeid: str) -> str:
    """The work unit xdist hands to one worker: a test's module, its ONE_WORKER directory, the SHARED_CLUSTER
    modules together, or (SPLIT_MODULES) the test itself."""
    module = nodeid.split("::")[0]
    if module in SPLIT_MODULES:
        return nodeid
    if module in SHARED_CLUSTER:
        return SHARED_CLUSTER_UNIT
    if module in OWN_JVM:
        return module
    return next((directory for directory in ONE_WORKER if module.startswith(directory)), module)


def unit_seconds() -> dict[str, int]:
    """LONG_MODULES summed by work unit, and LONG_TESTS."""
    seconds: dict[str, int] = dict(LONG_TESTS)
    for module, figure in LONG_MODULES.items():
        seconds[work_unit(module)] = seconds.get(work_unit(module), 0) + figure
    return seconds


def pytest_collection_modifyitems(items):
    """Long work units first (a stable sort: runs after pytest-randomly's shuffle, keeps it everywhere else)."""
    seconds = unit_seconds()
    items.sort(key=lambda item: -seconds.get(work_unit(item.nodeid), 0))


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with ONE_WORKER's directories as single work units (other modes: xdist's own)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileOrDirectoryScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return LoadFileOrDirectoryScheduling(config, log)


# The variables that steer the project and the libraries it drives (others, e.g. OpenMP's, are set by imports).
WATCHED_ENVIRONMENT = ("FAIR_PIPELINE_", "DAGSTER_", "MLFLOW_")


@pytest.fixture(autouse=True)
def no_state_left_for_later_tests():
    """Tests must not depend on their order. Two ways one test changed the next ones (both found by CI): a
    variable left in os.environ (inherited by every later subprocess) and MLflow's process-wide tracking/registry
    URIs (which `MlflowClient(uri)` without a registry follows). The project's variables must come back unchanged (a
    test that leaks fails here, naming them); MLflow's URIs are reset, since the in-process runs set them by
    design. Runs after `monkeypatch` undoes its changes (autouse fixtures are set up first, torn down last)."""
    import sys

    environment = dict(os.environ)
    yield
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        from mlflow.tracking import _tracking_service
        from mlflow.tracking._model_registry import utils as registry_utils

        _tracking_service.utils._tracking_uri = None
        registry_utils._registry_uri = None
    changed = sorted(k for k in {*environment, *os.environ}
                     if environment.get(k) != os.environ.get(k) and k.startswith(WATCHED_ENVIRONMENT))
    for name in changed:
        if name in environment:
            os.environ[name] = environment[name]
        else:
            os.environ.pop(name)
    assert not changed, f"the test left environment variables changed for later tests: {changed}"


@pytest.fixture
def fp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return home


@pytest.fixture
def small_landing(fp_home: Path) -> Path:
    """Two small simulated days (2026-01-01, 2026-01-02) under $FAIR_PIPELINE_HOME/landing."""
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing

    landing = fp_home / "landing"
    simulate_to_landing(SMALL, landing, START, 2)
    return landing
