"""The main job on a standalone Spark cluster: a master and a worker started from the pyspark wheel
(`tests/platform/spark/cluster.py`), separate processes on 127.0.0.1, the worker in its own working directory. The
driver is a `fair-pipeline run --engine spark --spark-master spark://...` subprocess (this test process already
holds the local SparkSession the other Spark tests share, and a process has one SparkContext). Its findings must
equal those of a DuckDB run on the same landing files (every metric to 1e-9, the same texts and verdicts)."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fair_pipeline import cli
from fair_pipeline.platform import settings
from fair_pipeline.reporting.build import FINDINGS_NAME
from fair_pipeline.reporting.latest import latest_report_dir
from tests.platform.spark.cluster import standalone_cluster

SIMULATION = ["--start", "2026-01-01", "--days", "2", "--requests-per-day", "200", "--items", "2000"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("the cluster test needs Java 17")
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


def test_the_main_job_on_a_standalone_cluster_gives_duckdbs_findings(cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv(settings.ENGINE_ENV, raising=False)
    duck_home, spark_home, driver_cwd = tmp_path / "duckdb_home", tmp_path / "spark_home", tmp_path / "driver"
    assert cli.main(["--home", str(duck_home), "run", *SIMULATION]) == 0, capsys.readouterr().out
    shutil.copytree(duck_home / "landing", spark_home / "landing")
    driver_cwd.mkdir()
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI", settings.ENGINE_ENV)}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "fair-pipeline"), "--home", str(spark_home), "run", "--engine", "spark",
         "--spark-master", cluster.master_url, "--no-simulate"],
        cwd=driver_cwd, env=environment, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert cluster.worker_dir != driver_cwd and any((cluster.worker_dir / "work").iterdir()), \
        "the executors ran in the worker's directory"
    assert (spark_home / "spark_warehouse" / "marts").is_dir()
    assert_same_findings(_findings(duck_home), _findings(spark_home))
