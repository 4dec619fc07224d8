"""A run names what in the landing zone it will not read (nothing is skipped silently): a CSV beside a day's
Parquet files, a CSV-only day, folders that are not days, a day landed for one source only."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from fair_pipeline.commands import main
from fair_pipeline.commands import run as run_command
from fair_pipeline.commands.unread import unread_entries
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
