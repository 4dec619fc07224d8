"""Ingestion and every SQL model through a Spark Connect server started from the pyspark wheel
(`tests/platform/spark/cluster.py`): the thin client sends only DataFrame and SQL plans (no RDD, no JVM access),
every partitioned mart equals the one DuckDB builds from the same landing files (values to 1e-9), and the client
process never touches the warehouse directory itself (`forbidden_paths`: any file operation of its own there ends
it): the server's driver and executors write, list and read every table, the commit log included."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from fair_pipeline.commands import main
from fair_pipeline.platform import settings
from tests.platform.spark.cluster import connect_server, require_java
from tests.platform.spark.forbidden_paths import FORBIDDEN_EXIT
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
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[:6000]
    return json.loads(out.read_text())


def test_the_guard_ends_a_process_that_touches_the_forbidden_directory(tmp_path):
    """The guard the Connect client runs under catches what the old client-side swaps did (a stat, a listing,
    a rename) and lets other paths be."""
    forbidden = tmp_path / "warehouse"
    (forbidden / "raw").mkdir(parents=True)
    for operation in ("Path(w, 'raw').exists()", "os.listdir(w)", "os.rename(Path(w, 'raw'), Path(w, 'x'))",
                      "open(Path(w, 'new'), 'w')", "shutil.rmtree(Path(w, 'raw'))"):
        code = ("import os, shutil, sys; from pathlib import Path; from tests.platform.spark.forbidden_paths import forbid; "
                f"w = sys.argv[1]; Path(sys.argv[2]).exists(); forbid(Path(w)); {operation}")
        run = subprocess.run([sys.executable, "-c", code, str(forbidden), str(tmp_path / "elsewhere")],
                             cwd=settings.REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert run.returncode == FORBIDDEN_EXIT and "forbidden file operation" in run.stderr, (operation, run.stderr)
    assert (forbidden / "raw").is_dir()


@pytest.mark.timeout(1800)
def test_ingestion_and_sql_models_over_spark_connect_equal_duckdbs(server, tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    duck_home, connect_home = tmp_path / "duckdb", tmp_path / "connect"
    assert main(["--home", str(duck_home), "simulate", *SIMULATION]) == 0
    shutil.copytree(duck_home / "landing", connect_home / "landing")
    duck = _build("duckdb", duck_home, tmp_path / "duckdb.json")
    # The warehouse as a file:// URI the server's driver and executors write and read; the client may not touch it.
    tables = connect_home / "spark_warehouse"
    spark = _build("spark", connect_home, tmp_path / "connect.json", server.url,
                   "--warehouse", f"file://{tables}", "--forbid", str(tables))
    assert_same_tables(duck, spark)
    assert any(tables.glob("_commits/commit=*/*.parquet")) and any(tables.glob("marts/*/write_id=*"))


ADOPT_OVER_CONNECT = """
import json, sys
from pathlib import Path
from tests.platform.spark.forbidden_paths import forbid
from fair_pipeline.platform.engines.spark_engine import SparkEngine, spark_session
root = Path(sys.argv[2])
forbid(root)
engine = SparkEngine(spark_session(sys.argv[1]), f"file://{root}")
rows = engine.query_df("SELECT CAST(partition_date AS VARCHAR) AS d, source, label, n FROM marts.daily")
print(json.dumps({"columns": engine.table_columns(("marts", "daily")), "rows": sorted(map(list, rows.values.tolist())),
                  "items": engine.row_count(("raw", "items"))}))
"""


def test_an_earlier_layout_warehouse_is_adopted_over_spark_connect(server, tmp_path):
    """The adoption of a warehouse of the layout before the commit log, by a client forbidden to touch it."""
    from tests.platform.spark.test_spark_engine import OLD_DAILY, _write_earlier_layout

    root = tmp_path / "old warehouse"
    _write_earlier_layout(root)
    run = subprocess.run([sys.executable, "-c", ADOPT_OVER_CONNECT, server.url, str(root)], cwd=settings.REPO_ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[:6000]
    adopted = json.loads(run.stdout.strip().splitlines()[-1])
    assert adopted["columns"] == ["source", "partition_date", "label", "n"]
    assert adopted["rows"] == [list(row) for row in OLD_DAILY] and adopted["items"] == 4
    assert len(list(root.glob("_commits/commit=*/*.parquet"))) == 1
