"""Homes whose paths hold spaces, quotes, `#`, `;` or non-ASCII work (landing, warehouse, MLflow store all inside
the home); a path with `?` or `%`, which DuckDB's WAL path and the MLflow sqlite URI can't hold, is refused in one
line before anything is written."""
from __future__ import annotations

import pytest

from fair_pipeline.commands import main
from fair_pipeline.ingestion import loads
from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.tracking import ensure_experiments


@pytest.mark.parametrize("name", ["two words", "it's \"quoted\"", "a#b;c", "zoë 中文 نساء"])
def test_a_home_with_odd_characters_ingests_and_tracks_inside_itself(tmp_path, monkeypatch, name):
    home = tmp_path / name
    monkeypatch.setenv(settings.HOME_ENV, str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["simulate", "--start", "2026-01-01", "--days", "1", "--requests-per-day", "20", "--items", "200"]) == 0
    with warehouse.session(settings.warehouse_path()) as con:
        load = loads.load_partition(con, settings.landing_dir(), "observational", "2026-01-01")
    assert load.accepted > 0 and (home / "warehouse.duckdb").exists()
    ensure_experiments()
    assert (home / "mlflow.db").exists()


@pytest.mark.parametrize("name", ["what?", "100%", "a%20b"])
def test_a_home_with_a_question_mark_or_percent_is_refused_before_any_write(tmp_path, monkeypatch, capsys, name):
    home = tmp_path / name
    monkeypatch.setenv(settings.HOME_ENV, str(home))
    assert main(["simulate", "--start", "2026-01-01", "--days", "1", "--requests-per-day", "20"]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("[fair-pipeline] error: the home ") and "choose a path without '?' or '%'" in lines[-1]
    assert not home.exists() and list(tmp_path.iterdir()) == []
