"""The main job on a standalone Spark cluster gives DuckDB's findings.

A master and a worker started from the pyspark wheel (`tests/platform/spark/cluster.py`: separate processes on
127.0.0.1, the worker in its own working directory, away from the driver's). The DuckDB run simulates two small days
(the smallest main job that runs every stage) and builds everything; the Spark run
gets a copy of its landing files only and runs as `fair-pipeline run --engine spark --spark-master spark://...
--spark-warehouse file://... --no-simulate` in its own process (this one holds the local SparkSession the other Spark
tests share, and a process has one SparkContext), with the warehouse given as a `file://` URI outside the home: the
executors ingest the landing files, every mart and staging view is built on Spark, and the findings must equal
DuckDB's (every metric to 1e-9, the same texts and verdicts)."""
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

from fair_pipeline.commands import main
from fair_pipeline.platform import settings, sql_models
from fair_pipeline.reporting.build import FINDINGS_NAME
from fair_pipeline.reporting.latest import latest_report_dir
from tests.platform.spark.cluster import require_java, standalone_cluster

# The smallest simulation that runs every stage (benchmarks/kill_harness.py's sizes): the comparison needs every
# finding on both engines, not many rows (the executors' work is shown by the event log and the worker's directory).
SIMULATION = ["--start", "2026-01-01", "--days", "2", "--requests-per-day", "200", "--items", "500", "--slots", "10"]
BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_spark_cluster.py"
CLEARED = ("DAGSTER_HOME", "MLFLOW_TRACKING_URI", settings.ENGINE_ENV, settings.SPARK_MASTER_ENV,
           settings.SPARK_CONF_ENV, settings.SPARK_DRIVER_MEMORY_ENV)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_java("the cluster test")
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), cores=2, memory="2g") as started:
        yield started


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


@pytest.mark.timeout(2400)
def test_the_main_job_on_a_standalone_cluster_gives_duckdbs_findings(cluster, tmp_path, monkeypatch, capsys):
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    duck_home, spark_home, driver_cwd = tmp_path / "duckdb_home", tmp_path / "spark_home", tmp_path / "driver"
    assert main(["--home", str(duck_home), "run", *SIMULATION]) == 0, capsys.readouterr().out
    shutil.copytree(duck_home / "landing", spark_home / "landing")
    driver_cwd.mkdir()
    tables = tmp_path / "shared storage" / "spark_warehouse"  # outside the home; a space, as Hadoop takes URIs' paths
    run = subprocess.run(
        [sys.executable, "-m", "fair_pipeline.commands", "--home", str(spark_home), "run", "--engine", "spark",
         "--spark-master", cluster.master_url, "--spark-driver-memory", "1g",
         "--spark-conf", "spark.eventLog.enabled=true", "--spark-conf", f"spark.eventLog.dir={cluster.event_log_dir.as_uri()}",
         "--spark-conf", "spark.executor.memory=1g", "--spark-warehouse", f"file://{tables}",
         # Two tasks per shuffle on the 2-core cluster (the default 8 runs four waves of tiny tasks per shuffle; the
         # test checks findings, not task counts).
         "--spark-conf", "spark.sql.shuffle.partitions=2", "--no-simulate"],
        cwd=driver_cwd, env=dict(os.environ), capture_output=True, text=True, timeout=2000)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # The executors ran under the worker (its own directory) and the driver's settings reached the session.
    assert any((cluster.worker_dir / "work").iterdir()) and any(cluster.event_log_dir.iterdir())
    assert not (spark_home / "spark_warehouse").exists()
    models = sql_models.discover_models()
    views = json.loads((tables / "_views.json").read_text())
    for model in models.values():  # every model was built on Spark: a view definition or a table directory
        assert (".".join(model.key) in views) if model.is_view else (tables / model.key[0] / model.key[1]).is_dir()
    assert (tables / "raw" / "randomized_impressions" / "partition_date=2026-01-01").is_dir()
    assert (tables / "raw" / "quarantine").is_dir()
    # The run's DuckDB file holds the result stores, no raw day and no SQL model: the executors ingested the landing
    # files and every stage read the raw tables, marts and staging views from Spark.
    with duckdb.connect(str(spark_home / "warehouse.duckdb"), read_only=True) as con:
        local = {tuple(row) for row in con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()}
        raw_rows = [con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in (
            "raw.observational_impressions", "raw.randomized_impressions", "raw.quarantine WHERE partition_date IS NOT NULL")]
    assert ("marts", "fairness_audit_groups") in local and raw_rows == [0, 0, 0], raw_rows
    assert not local & {model.key for model in models.values()}, local & {model.key for model in models.values()}
    assert_same_findings(_findings(duck_home), _findings(spark_home))


def test_the_cluster_benchmark_runs_small_on_the_same_cluster(cluster, tmp_path, capsys):
    """benchmarks/bench_spark_cluster.py (documented in docs/spark.md): the whole main job at one small size on this
    module's cluster (each size is a main job of a few minutes here), every step measured; the growth table is
    printed from the measured figures given as two sizes."""
    spec = importlib.util.spec_from_file_location("bench_spark_cluster", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--impressions", "2e4", "--master", cluster.master_url, "--work-dir", str(tmp_path)])
    out = capsys.readouterr().out
    steps = [step for step in bench.STEPS if step != "between steps"]
    for step in steps:
        assert f"| 20,000 | {step} |" in out, out
    rows = json.loads((tmp_path / "results_2e+04.json").read_text())
    assert all(rows[step]["wall_s"] > 0 and rows[step]["python_peak_mb"] > 0 for step in steps), rows
    # Spark ran the work of these steps (its event log's tasks, attributed by the steps' Dagster times)
    assert all(rows[step]["tasks"] > 0 and rows[step]["result_bytes"] > 0 for step in ("ingest", "sql models", "audit"))
    assert rows["_run"]["jvm_live_heap_mb"] > 0 and rows["_run"]["jvm_peak_rss_mb"] > 0, rows["_run"]
    bench._print({2e4: rows, 4e4: rows}, [2e4, 4e4])
    out = capsys.readouterr().out
    assert "growth 2e+04 -> 4e+04 (x2 impressions)" in out and "result_bytes 1.00x" in out, out
