"""The daily partitions start at the first landed day, so the UI lists real days instead of years of empty ones."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fair_pipeline.ingestion.landing import LandingFileError, landed_dates
from fair_pipeline.platform.partitions import DEFAULT_START_DATE, START_DATE_ENV, first_partition_day


def _land(landing: Path, source: str, day: str) -> None:
    folder = landing / source / f"date={day}"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"PAR1")  # only its name matters here


@pytest.fixture
def no_configured_start(monkeypatch):
    monkeypatch.delenv(START_DATE_ENV, raising=False)


def test_the_first_landed_day_of_any_source(tmp_path, no_configured_start):
    _land(tmp_path, "observational", "2026-03-04")
    _land(tmp_path, "observational", "2026-03-02")
    _land(tmp_path, "randomized", "2026-03-03")
    (tmp_path / "randomized" / "_temporary").mkdir()  # a writer's bookkeeping, never a day
    assert first_partition_day(tmp_path) == "2026-03-02"


@pytest.mark.parametrize("name", ["date=not-a-day", "date=2026-13-01", "date=20260301", "date=2026-3-1"])
def test_a_day_folder_not_named_as_a_day_is_named_as_ingestion_names_it(tmp_path, no_configured_start, name):
    """The one parser of day folders (ingestion's): a `date=` folder meant as a day is never skipped, even empty."""
    _land(tmp_path, "observational", "2026-03-02")
    (tmp_path / "randomized" / name).mkdir(parents=True)
    with pytest.raises(LandingFileError, match=rf"landing folder \S*/randomized/{name} is not named date=YYYY-MM-DD"):
        first_partition_day(tmp_path)
    with pytest.raises(LandingFileError, match=rf"randomized/{name} is not named"):
        landed_dates(tmp_path, "randomized")


def test_nothing_landed_starts_at_the_shipped_sample(tmp_path, no_configured_start):
    assert first_partition_day(tmp_path) == DEFAULT_START_DATE
    (tmp_path / "observational" / "date=2026-03-02").mkdir(parents=True)  # a folder without files is not a day
    assert first_partition_day(tmp_path) == DEFAULT_START_DATE


def test_the_setting_wins_and_a_bad_one_is_named(tmp_path, monkeypatch):
    _land(tmp_path, "observational", "2026-03-02")
    monkeypatch.setenv(START_DATE_ENV, "2025-12-01")
    assert first_partition_day(tmp_path) == "2025-12-01"
    monkeypatch.setenv(START_DATE_ENV, "01/12/2025")
    with pytest.raises(ValueError, match=f"{START_DATE_ENV}='01/12/2025' is not a date"):
        first_partition_day(tmp_path)


def test_the_definitions_partitions_start_at_the_home_first_landed_day(tmp_path):
    """What the UI shows: the definitions loaded in a fresh process over a home whose logs begin on 2026-01-02."""
    home = tmp_path / "home"
    for source in ("observational", "randomized"):
        _land(home / "landing", source, "2026-01-02")
    env = {k: v for k, v in os.environ.items() if k != START_DATE_ENV} | {"FAIR_PIPELINE_HOME": str(home)}
    code = ("from fair_pipeline.definitions import defs\n"
            "keys = defs.resolve_asset_graph().get(__import__('dagster').AssetKey(['reporting', 'fairness_report']))"
            ".partitions_def.get_partition_keys(current_time=__import__('datetime').datetime(2026, 1, 6))\n"
            "print(keys)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['2026-01-02', '2026-01-03', '2026-01-04', '2026-01-05']"


def test_run_simulates_before_it_loads_the_definitions(tmp_path):
    """`run --start` simulates days before the first landed one; the definitions must load after that, or those
    days would fall before the partitions' start."""
    code = ("import sys\nfrom fair_pipeline.commands import main, run\n"
            "def simulate(args):\n"
            "    print('definitions loaded' if 'fair_pipeline.platform.partitions' in sys.modules else 'not loaded')\n"
            "    raise SystemExit(0)\n"
            "run.simulate = simulate\nmain(['run', '--start', '2026-01-01', '--days', '1'])\n")
    env = {k: v for k, v in os.environ.items() if k != START_DATE_ENV} | {"FAIR_PIPELINE_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    assert out.strip().splitlines()[-1] == "not loaded"
