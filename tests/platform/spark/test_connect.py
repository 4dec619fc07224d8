"""Ingestion and every SQL model through a Spark Connect server started from the pyspark wheel
(`tests/platform/spark/cluster.py`): the thin client sends only DataFrame and SQL plans (no RDD, no JVM access), and
every partitioned mart equals the one DuckDB builds from the same landing files (values to 1e-9)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from fair_pipeline.commands import main
from fair_pipeline.platform import settings
from tests.platform.spark.cluster import connect_server, require_java
from tests.platform.spark.raw_and_models import assert_same_tables

SIMULATION = ["--start", "2026-01-01", "--days", "2", "--requests-per-day", "60", "--items", "300"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_java("the Spark Connect test")
    with connect_server(tmp_path_factory.mktemp("connect"), master="local[2]") as started:
        yield started


def _build(engine: str, home, out, *spark: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "tests.platform.spark.raw_and_models", engine, str(home), str(out), *spark],
                         cwd=settings.REPO_ROOT, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    return json.loads(out.read_text())


@pytest.mark.timeout(1800)
def test_ingestion_and_sql_models_over_spark_connect_equal_duckdbs(server, tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    duck_home, connect_home = tmp_path / "duckdb", tmp_path / "connect"
    assert main(["--home", str(duck_home), "simulate", *SIMULATION]) == 0
    shutil.copytree(duck_home / "landing", connect_home / "landing")
    duck = _build("duckdb", duck_home, tmp_path / "duckdb.json")
    # The warehouse as a file:// URI: the client changes it with its own file operations (it has no JVM), the
    # server's executors write and read the same files.
    spark = _build("spark", connect_home, tmp_path / "connect.json", server.url,
                   "--warehouse", f"file://{connect_home}/spark_warehouse")
    assert_same_tables(duck, spark)
