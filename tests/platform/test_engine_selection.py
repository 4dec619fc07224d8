"""Engine selection (no JVM): --engine / $FAIR_PIPELINE_ENGINE / --spark-master reach the warehouse resource as
run config, help shows the defaults, and a missing pyspark or Java is one line before any run starts."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fair_pipeline import runner
from fair_pipeline.commands import main
from fair_pipeline.platform import settings
from fair_pipeline.platform.engines import DuckDBEngine
from fair_pipeline.platform.engines import select as engine_select
from fair_pipeline.platform.resources import DuckDBWarehouse


def test_run_help_shows_the_engine_options_and_their_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--engine {duckdb,spark}" in out and "(default: $FAIR_PIPELINE_ENGINE, else duckdb)" in out
    assert "--spark-master URL" in out and "(default: $FAIR_PIPELINE_SPARK_MASTER, else local[*])" in out


def test_the_engine_comes_from_the_flag_then_the_environment_then_duckdb(monkeypatch):
    monkeypatch.delenv(settings.ENGINE_ENV, raising=False)
    monkeypatch.delenv(settings.SPARK_MASTER_ENV, raising=False)
    assert settings.engine() == "duckdb" and settings.spark_master() == "local[*]"
    assert runner.engine_run_config() == {"resources": {"warehouse": {"config": {"engine": "duckdb",
                                                                                 "spark_master": ""}}}}
    monkeypatch.setenv(settings.ENGINE_ENV, "spark")
    monkeypatch.setenv(settings.SPARK_MASTER_ENV, "spark://cluster:7077")
    monkeypatch.setattr(engine_select, "require_engine", lambda name: None)
    assert runner.engine_run_config()["resources"]["warehouse"]["config"] == {
        "engine": "spark", "spark_master": "spark://cluster:7077"}
    assert settings.engine("duckdb") == "duckdb"  # a resource's own config wins over the environment
    monkeypatch.setenv(settings.ENGINE_ENV, "snowflake")
    with pytest.raises(ValueError, match=r"\$FAIR_PIPELINE_ENGINE='snowflake' is not one of \['duckdb', 'spark'\]"):
        settings.engine()


def test_the_duckdb_engine_wraps_the_callers_connection(tmp_path):
    import duckdb

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    engine = DuckDBWarehouse(engine="duckdb").engine_for(con)
    assert isinstance(engine, DuckDBEngine) and engine.con is con


@pytest.mark.parametrize("missing", ["pyspark", "java"])
def test_a_missing_pyspark_or_java_is_one_line_before_any_run(fp_home, monkeypatch, capsys, missing):
    if missing == "pyspark":
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    else:
        monkeypatch.setattr(engine_select.shutil, "which", lambda name: None)
        monkeypatch.delenv("JAVA_HOME", raising=False)
    code = main(["run", "--engine", "spark", "--no-simulate"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 2
    expected = "pip install -e '.[spark]'" if missing == "pyspark" else "apt-get install openjdk-17-jre-headless"
    assert len(out) == 1 and "] error: the spark engine needs" in out[0] and expected in out[0], out


def test_the_command_restores_the_engine_environment(fp_home, monkeypatch):
    monkeypatch.delenv(settings.ENGINE_ENV, raising=False)
    monkeypatch.setattr(engine_select.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert main(["run", "--engine", "spark", "--spark-master", "local[1]", "--no-simulate"]) == 2
    import os

    assert settings.ENGINE_ENV not in os.environ and settings.SPARK_MASTER_ENV not in os.environ


def test_the_landing_is_a_folder_or_a_file_uri_on_duckdb(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(settings.LANDING_ENV, raising=False)
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path / "home"))
    assert settings.landing_dir() == tmp_path / "home" / "landing"
    # A file:// URI's path as written (not %-decoded, as Hadoop reads it), with or without a host of localhost.
    for uri in ("file:///data/land ing+ü'%41", "file://localhost/data/land ing+ü'%41", "file:/data/land ing+ü'%41"):
        assert settings.landing_dir(uri) == Path("/data/land ing+ü'%41")
    code = main(["backfill", "--start", "2026-03-01", "--end", "2026-03-01", "--engine", "duckdb",
                 "--landing", "hdfs://namenode/fair/landing"])
    assert code == 2
    assert ("error: the landing hdfs://namenode/fair/landing is not a folder of this machine: only --engine spark "
            "reads it") in capsys.readouterr().out
