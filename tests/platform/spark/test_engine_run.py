"""The issue's done-when: `fair-pipeline run --engine spark --no-simulate` on the landing files a DuckDB run wrote
gives the same findings.json (every metric to 1e-9, the same finding texts and verdicts).

Two homes: the DuckDB run simulates two small days (the smallest main job that passes its checks, as
tests/e2e/test_main_job.py) and builds everything; the Spark run gets a copy of its landing files only, so every
mart, staging view and raw table it reads was built on Spark (a fresh DuckDB file holds only what ingestion and the
result stores write). Both runs share the test session's SparkSession (local[2], 1 GB driver): one JVM start."""
from __future__ import annotations

import json
import math
import shutil

import duckdb
import pytest

from fair_pipeline.commands import main
from fair_pipeline.platform import settings, sql_models
from fair_pipeline.reporting.build import FINDINGS_NAME
from fair_pipeline.reporting.latest import latest_report_dir

SIMULATION = ["--start", "2026-01-01", "--days", "2", "--requests-per-day", "200", "--items", "2000"]


def _findings(home) -> dict:
    return json.loads((latest_report_dir(home / "reports") / FINDINGS_NAME).read_text())


@pytest.fixture
def homes(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # each home its own Dagster instance
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv(settings.ENGINE_ENV, raising=False)
    return tmp_path / "duckdb_home", tmp_path / "spark_home"


def test_a_spark_run_on_a_duckdb_runs_landing_files_gives_the_same_findings(spark, homes, capsys):
    duck_home, spark_home = homes
    assert main(["--home", str(duck_home), "run", *SIMULATION]) == 0, capsys.readouterr().out
    shutil.copytree(duck_home / "landing", spark_home / "landing")
    code = main(["--home", str(spark_home), "run", "--engine", "spark", "--spark-master", "local[2]", "--no-simulate"])
    out = capsys.readouterr().out
    assert code == 0, out
    tables = spark_home / "spark_warehouse"
    models = sql_models.discover_models()
    views = json.loads((tables / "_views.json").read_text())
    for model in models.values():  # every model was built on Spark: a view definition or a table directory
        assert (".".join(model.key) in views) if model.is_view else (tables / model.key[0] / model.key[1]).is_dir()
    assert (tables / "raw" / "randomized_impressions" / "partition_date=2026-01-01").is_dir()
    # The run's DuckDB file holds the ingestion's raw layer and the result stores, and no SQL model: every stage
    # read the marts and staging views from Spark.
    with duckdb.connect(str(spark_home / "warehouse.duckdb"), read_only=True) as con:
        local = {tuple(row) for row in con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()}
    assert ("raw", "observational_impressions") in local and ("marts", "fairness_audit_groups") in local
    assert not local & {model.key for model in models.values()}, local & {model.key for model in models.values()}

    duck, spark_findings = _findings(duck_home), _findings(spark_home)
    assert duck["metrics"] and set(spark_findings["metrics"]) == set(duck["metrics"])
    differing = {k: (v, spark_findings["metrics"][k]) for k, v in duck["metrics"].items()
                 if not (math.isclose(v, spark_findings["metrics"][k], rel_tol=1e-9, abs_tol=1e-9)
                         or (math.isnan(v) and math.isnan(spark_findings["metrics"][k])))}
    assert not differing, differing
    assert spark_findings["findings"] == duck["findings"]
    assert spark_findings["missing"] == duck["missing"] and spark_findings["verdict_counts"] == duck["verdict_counts"]
