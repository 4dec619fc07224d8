"""A run names what in the landing zone it will not read (nothing is skipped silently): a CSV beside a day's
Parquet files, a CSV-only day, folders that are not days, a day landed for one source only."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pandas as pd
import pytest

from fair_pipeline.commands import main
from fair_pipeline.commands import run as run_command
from fair_pipeline.commands.unread import unread_entries
from fair_pipeline.ingestion.landing import LandingFileError, complete_days, folder_day, landed_dates
from fair_pipeline.platform import settings


def _parquet(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"x": [1]}).to_parquet(path)


def _landing(root: Path) -> Path:
    landing = root / "landing"
    for source in ("observational", "randomized"):
        _parquet(landing / source / "date=2026-01-01" / "part-0.parquet")
        _parquet(landing / source / "date=2026-01-01" / "hour=01" / "part-1.PARQUET")  # hive subfolder: read
        (landing / source / "date=2026-01-01" / "_SUCCESS").write_text("")  # a writer's marker: unnamed
    (landing / "observational" / "date=2026-01-01" / "export 2026-01-01 (copy).csv").write_text("a,b\n")
    (landing / "randomized" / "date=2026-01-02").mkdir()
    (landing / "randomized" / "date=2026-01-02" / "day.csv").write_text("a,b\n")  # a CSV-only day
    _parquet(landing / "observational" / "date=2026-01-03" / "part-0.parquet")  # one source only
    (landing / "observational" / "2026-01-04").mkdir()  # not a date= folder
    (landing / "randomised").mkdir()  # a misspelt source
    _parquet(landing / "items" / "items.parquet")  # an undated catalogue: read
    return landing


def test_every_unread_entry_is_named_with_its_reason(tmp_path):
    landing = _landing(tmp_path)
    lines = unread_entries(landing)
    assert lines == [
        f"{landing / 'observational' / '2026-01-04'}: not a day (expected date=YYYY-MM-DD/ folders)",
        f"{landing / 'observational' / 'date=2026-01-01' / 'export 2026-01-01 (copy).csv'}: not Parquet "
        "(only *.parquet files are read)",
        f"{landing / 'randomised'}: not a landing folder (expected observational, randomized, items)",
        f"{landing / 'randomized' / 'date=2026-01-02' / 'day.csv'}: not Parquet (only *.parquet files are read)",
        "partition 2026-01-03: no Parquet files under randomized/date=2026-01-03/, so the day is not ingested "
        "(a day needs every source)",
    ]


def test_the_run_says_them_before_it_runs(tmp_path, monkeypatch, capsys):
    landing = _landing(tmp_path)
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.setattr(run_command, "prepare_stores", lambda verbose=False: False)  # stop before any Dagster run
    assert main(["run", "--no-simulate"]) == 1
    out = capsys.readouterr().out
    assert f"[fair-pipeline] not read: {landing / 'randomized' / 'date=2026-01-02' / 'day.csv'}: not Parquet" in out
    assert "[fair-pipeline] not read: partition 2026-01-03: no Parquet files under randomized/date=2026-01-03/" in out


@pytest.mark.parametrize("name", ["date=2026-13-01", "date=20260105", "date=2026-1-5", "date=2026-W01-1", "date="])
def test_a_date_folder_not_named_as_a_day_fails_the_run_naming_it_and_every_reader_agrees(tmp_path, monkeypatch,
                                                                                          capsys, name):
    landing = _landing(tmp_path)
    odd = landing / "randomized" / name
    _parquet(odd / "part-0.parquet")
    expected = rf"landing folder {re.escape(str(odd))} is not named date=YYYY-MM-DD"
    for read in (lambda: landed_dates(landing, "randomized"), lambda: complete_days(landing),
                 lambda: unread_entries(landing), lambda: folder_day(odd)):
        with pytest.raises(LandingFileError, match=expected):
            read()
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.setattr(run_command, "prepare_stores", lambda verbose=False: False)
    assert main(["run", "--no-simulate"]) == 2
    assert "is not named date=YYYY-MM-DD" in capsys.readouterr().out


def test_the_day_folder_parser_reads_days_and_leaves_other_names_to_the_listing(tmp_path):
    assert folder_day(tmp_path / "date=2026-02-28") == dt.date(2026, 2, 28)
    assert folder_day(tmp_path / "2026-02-28") is None and folder_day(tmp_path / "hour=01") is None
