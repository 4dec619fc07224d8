"""The main job on a standalone Spark cluster gives DuckDB's findings, measured by the cluster benchmark.

A master and a worker started from the pyspark wheel (`tests/platform/spark/cluster.py`: separate processes on
127.0.0.1, the worker in its own working directory, away from the driver's), shared with the other modules whose jobs
run on a cluster in processes of their own (`shared_cluster`). One main job runs on it, through
benchmarks/bench_spark_cluster.py (documented in docs/spark.md) at its smallest size: the benchmark simulates two days
and runs `fair-pipeline run --engine spark --spark-master spark://... --spark-warehouse file://... --no-simulate` in
a process of its own (this one holds the local SparkSession the other Spark tests share, and a process has one
SparkContext), with the warehouse given as a `file://` URI outside the home, and measures every step. The executors
ingest the landing files, every mart and staging view is built on Spark, and the findings must equal those of a
DuckDB run on a copy of the same landing files (every metric to 1e-9, the same texts and verdicts). One run serves
both checks: each is a main job of minutes on this machine. The DuckDB run is a `fair-pipeline run` process started
beside the Spark job (its landing written first with `--simulate-only`): the Spark job spends much of its time
waiting on its cluster, so the two overlap instead of adding up. Then `--steps eo,selection` measures those two
steps again on the home that run left."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from benchmarks.spark_cluster_logs import STEPS
from fair_pipeline.audit.spark_audit import PARTITIONS_CONF
from fair_pipeline.platform import settings, sql_models
from fair_pipeline.platform.engines import log_snapshot, version_log
from fair_pipeline.reporting.build import FINDINGS_NAME
from fair_pipeline.reporting.latest import latest_report_dir

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_spark_cluster.py"
SMALL_TASKS = ("--spark-conf", "spark.sql.shuffle.partitions=2", "--spark-conf", f"{PARTITIONS_CONF}=2",
               "--spark-conf", "spark.locality.wait=0s")
CLEARED = ("DAGSTER_HOME", "MLFLOW_TRACKING_URI", settings.ENGINE_ENV, settings.SPARK_MASTER_ENV,
           settings.SPARK_CONF_ENV, settings.SPARK_DRIVER_MEMORY_ENV)


def _findings(home) -> dict:
    return json.loads((latest_report_dir(home / "reports") / FINDINGS_NAME).read_text())


def assert_same_findings(expected: dict, actual: dict) -> None:
    assert expected["metrics"] and set(actual["metrics"]) == set(expected["metrics"])
    differing = {k: (v, actual["metrics"][k]) for k, v in expected["metrics"].items()
                 if not (math.isclose(v, actual["metrics"][k], rel_tol=1e-9, abs_tol=1e-9)
                         or (math.isnan(v) and math.isnan(actual["metrics"][k])))}
    assert not differing, differing
    assert actual["findings"] == expected["findings"]
    assert actual["missing"] == expected["missing"] and actual["verdict_counts"] == expected["verdict_counts"]


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_spark_cluster", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.timeout(2400)
def test_the_main_job_on_a_standalone_cluster_is_measured_and_gives_duckdbs_findings(shared_cluster, tmp_path,
                                                                                      monkeypatch, capsys):
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    cluster = shared_cluster
    # The worker's application directories from earlier modules on the same cluster, told apart from this run's.
    earlier_apps = set((cluster.worker_dir / "work").glob("*"))
    bench = _bench_module()
    storage = tmp_path / "shared storage"  # outside the home; a space, as Hadoop takes URIs' paths
    spark_home, tables = tmp_path / "bench" / "home_2e+04", storage / "home_2e+04"
    bench_args = ["--impressions", "2e4", "--master", cluster.master_url, "--work-dir", str(tmp_path / "bench"),
                  "--spark-warehouse", f"file://{storage}"]
    bench.main([*bench_args, "--simulate-only"])
    duck_home = tmp_path / "duckdb_home"
    shutil.copytree(spark_home / "landing", duck_home / "landing")
    with (tmp_path / "duckdb_run.log").open("w") as log:
        duck_run = subprocess.Popen([sys.executable, "-m", "fair_pipeline.commands", "--home", str(duck_home), "run",
                                     "--no-simulate"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                                    env={k: v for k, v in os.environ.items() if k not in CLEARED})
    try:
        # Two tasks per shuffle and two score ranges per audit, one per core of the cluster (the defaults, 8 and 16,
        # run waves of tiny tasks: most of the audit step's time; the test checks findings and that tasks ran, not
        # task counts), launched without waiting for a slot local to their data (3 s by default, per stage; the
        # executors share one machine). The landing written above is reused.
        bench.main([*bench_args, *SMALL_TASKS])
        duck_code = duck_run.wait(timeout=1800)
    finally:
        if duck_run.poll() is None:
            duck_run.kill()
            duck_run.wait()
    out = capsys.readouterr().out

    # The benchmark: every step measured, Spark ran the work of the steps that read rows (its event log's tasks,
    # attributed by the steps' Dagster times), the growth table is printed from figures given as two sizes.
    steps = [step for step in STEPS if step != "between steps"]
    for step in steps:
        assert f"| 20,000 | {step} |" in out, out
    rows = json.loads((tmp_path / "bench" / "results_2e+04.json").read_text())
    assert all(rows[step]["wall_s"] > 0 and rows[step]["python_peak_mb"] > 0 for step in steps), rows
    assert all(rows[step]["tasks"] > 0 and rows[step]["result_bytes"] > 0 for step in ("ingest", "sql models", "audit"))
    assert rows["_run"]["jvm_live_heap_mb"] > 0 and rows["_run"]["jvm_peak_rss_mb"] > 0, rows["_run"]
    bench._print({2e4: rows, 4e4: rows}, [2e4, 4e4])
    out = capsys.readouterr().out
    assert "growth 2e+04 -> 4e+04 (x2 impressions)" in out and "result_bytes 1.00x" in out, out

    # The executors ran under the worker (its own directory); the tables live at the URI, none in the home.
    assert set((cluster.worker_dir / "work").glob("*")) - earlier_apps
    assert not (spark_home / "spark_warehouse").exists()
    models = sql_models.discover_models()
    live = log_snapshot.read_local(f"file://{tables}").state
    for model in models.values():  # every model was built on Spark: a view definition or a committed table
        kinds = {kind for kind, name, _ in live if name == ".".join(model.key)}
        wanted = (version_log.VIEW if model.is_view else version_log.PARTITION if sql_models.is_partitioned(model, models)
                  else version_log.TABLE)
        assert kinds == {wanted}, (model.key, kinds)
    assert "2026-01-01" in version_log.live_partition_dates(live.values(), "raw.randomized_impressions")
    assert any(name == "raw.quarantine" for _, name, _ in live)
    # The run's DuckDB file holds the result stores, no raw day and no SQL model: the executors ingested the landing
    # files and every stage read the raw tables, marts and staging views from Spark.
    with duckdb.connect(str(spark_home / "warehouse.duckdb"), read_only=True) as con:
        local = {tuple(row) for row in con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()}
        raw_rows = [con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in (
            "raw.observational_impressions", "raw.randomized_impressions", "raw.quarantine WHERE partition_date IS NOT NULL")]
    assert ("marts", "fairness_audit_groups") in local and raw_rows == [0, 0, 0], raw_rows
    assert not local & {model.key for model in models.values()}, local & {model.key for model in models.values()}

    assert duck_code == 0, (tmp_path / "duckdb_run.log").read_text()[-4000:]
    assert_same_findings(_findings(duck_home), _findings(spark_home))

    # --steps: only the EO and selection steps again, on the home the main job left, in a driver of their own and
    # with the same instrumentation; the figures of that run alone, its logs in a folder of the home.
    bench.main([*bench_args, *SMALL_TASKS, "--steps", "eo,selection"])
    out = capsys.readouterr().out
    again = json.loads((tmp_path / "bench" / "results_steps_eo+selection_2e+04.json").read_text())
    assert set(again) - {"_run", "between steps"} == {"eo", "selection"}, again
    assert "| 20,000 | eo |" in out and "| 20,000 | audit |" not in out, out
    assert all(again[step]["tasks"] > 0 and again[step]["python_peak_mb"] > 0 for step in ("eo", "selection")), again
    assert again["_run"]["wall_s"] < rows["_run"]["wall_s"] and (spark_home / "steps_eo+selection" / "event_log").is_dir()
