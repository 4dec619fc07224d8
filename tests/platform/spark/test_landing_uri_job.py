"""The Dagster job on a landing URI (`--engine spark --landing file:///...`): the days are listed, fingerprinted and
ingested through the Spark session while this process's Python cannot list, stat or open anything under the landing
(those calls fail if they name it), with odd file and folder names; what `run` decides to ingest again follows the
files' metadata: a rewritten day file re-ingests that day only, a rewritten catalogue the catalogue only, and an
unchanged landing nothing (the duckdb engine's refusal of a landing URI: tests/platform/test_engine_selection.py)."""
from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import io
import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract, landing_source
from fair_pipeline.ingestion.simulated_landing import simulate_source_table
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform import settings
from fair_pipeline.platform.engines import fetch_rows

DAYS = ["2026-03-01", "2026-03-02"]
ODD = "part 1+ü'\"ß%41 ד"
CONFIG = SimulationConfig(n_items=120, requests_per_day=30, slots=8, seed=11)
ROWS = "SELECT partition_date, count(*) AS n FROM raw.{table} GROUP BY partition_date ORDER BY partition_date"


def _write_day(landing: Path, source: str, day: str, table: pa.Table) -> Path:
    folder = landing / source / f"date={day}" / ("hour=07 +é" if source == "randomized" else "")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ODD}.parquet"
    pq.write_table(table, path)
    (folder / "_SUCCESS").write_bytes(b"")
    return path


def _write_catalogue(landing: Path, items) -> Path:
    folder = landing / contract.ITEMS_DIR / f"date={DAYS[0]}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"items {ODD}.parquet"
    columns = ["item_id", "group_id"] + [c for c in items.columns if c.startswith("f")]
    pq.write_table(pa.Table.from_pandas(items[columns], preserve_index=False), path)
    return path


@contextlib.contextmanager
def _python_kept_out_of(root: Path, monkeypatch) -> None:
    """Listing, stat()-ing or opening anything under `root` from Python, or reading it with pyarrow, fails."""
    root_text = str(root)

    def under(arg) -> bool:
        try:
            return os.path.abspath(os.fsdecode(os.fspath(arg))).startswith(root_text)
        except TypeError:
            return False

    def guarded(function):
        def call(*args, **kwargs):
            if args and under(args[0]):
                raise AssertionError(f"the driver's Python touched the landing: {function.__name__}({args[0]!r})")
            return function(*args, **kwargs)
        return call

    with monkeypatch.context() as patched:
        for module, name in ((os, "stat"), (os, "lstat"), (os, "scandir"), (os, "listdir"), (os, "walk"),
                             (builtins, "open"), (io, "open"), (pq, "read_table"), (pq, "read_metadata"),
                             (pq, "read_schema"), (pq, "ParquetFile"), (pq, "ParquetDataset")):
            patched.setattr(module, name, guarded(getattr(module, name)))
        yield


@pytest.fixture
def uri_home(spark, tmp_path, monkeypatch):
    """A home whose landing (odd names) is given as a file:// URI, on the spark engine (the shared session)."""
    landing = tmp_path / "land ing+ü'%41"
    items = simulate_items(CONFIG)
    for day in DAYS:
        for source in contract.SOURCES:
            _write_day(landing, source, day, simulate_source_table(CONFIG, items, dt.date.fromisoformat(day), source))
    _write_catalogue(landing, items)
    home = tmp_path / "home"
    for name, value in {settings.HOME_ENV: str(home), "DAGSTER_HOME": str(home / "dagster_home"),
                        settings.ENGINE_ENV: "spark", settings.SPARK_MASTER_ENV: "local[2]",
                        settings.SPARK_CONF_ENV: "spark.sql.shuffle.partitions=2",
                        settings.SPARK_WAREHOUSE_ENV: f"file://{tmp_path / 'spark warehouse'}",
                        settings.LANDING_ENV: f"file://{landing}"}.items():
        monkeypatch.setenv(name, value)
    from fair_pipeline.runner import ensure_dagster_home

    ensure_dagster_home()
    return landing, items


def _spark_rows(spark, tmp_path: Path, table: str) -> dict[str, int]:
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    engine = SparkEngine(spark, f"file://{tmp_path / 'spark warehouse'}")
    return {str(day): n for day, n in fetch_rows(engine, ROWS.format(table=table))}


def _ingest(first: str, last: str) -> None:
    from fair_pipeline import runner

    result = runner.ingest_range(first, last, verbose=False)
    assert result.success, runner.failure_summary(result)


def _latest(instance, key: str, day: str | None = None):
    records = instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(key.split(".")), asset_partitions=[day] if day else None), limit=1).records
    return records[0]


def test_the_job_lists_fingerprints_and_ingests_a_landing_uri_without_the_driver_reading_it(
        spark, uri_home, tmp_path, monkeypatch):
    from fair_pipeline import runner
    from fair_pipeline.commands.run import landed

    landing, items = uri_home
    with _python_kept_out_of(landing, monkeypatch):
        source = landing_source.configured()
        assert source.through_spark and source.uri == f"file://{landing}"
        assert landed() == DAYS
        assert runner.landing_changes(DAYS) == (DAYS, True)
        _ingest(DAYS[0], DAYS[-1])
        assert runner.landing_changes(DAYS) == ([], False)  # unchanged: nothing to ingest again
    instance = runner.current_instance()
    first_load = {day: _latest(instance, "raw.observational_impressions", day).storage_id for day in DAYS}
    stored = _latest(instance, "raw.observational_impressions", DAYS[0]).asset_materialization.metadata
    assert stored["source_files"].value == [f"file://{landing}/observational/date={day}/{ODD}.parquet" for day in DAYS]
    catalogue = _latest(instance, "raw.items").asset_materialization.metadata
    assert catalogue["source_files"].value == [f"file://{landing}/items/date={DAYS[0]}/items {ODD}.parquet"]
    rows = _spark_rows(spark, tmp_path, "observational_impressions")
    assert sorted(rows) == DAYS and all(n > 0 for n in rows.values())

    # The catalogue rewritten (ten items fewer): the catalogue changed, no day did. Then the second day's file
    # rewritten with fewer rows: that day only is ingested again (with the catalogue).
    _write_catalogue(landing, items.iloc[10:])
    with _python_kept_out_of(landing, monkeypatch):
        assert runner.landing_changes(DAYS) == ([], True)
    table = simulate_source_table(CONFIG, items, dt.date.fromisoformat(DAYS[1]), "observational")
    _write_day(landing, "observational", DAYS[1], table.slice(0, 40))
    with _python_kept_out_of(landing, monkeypatch):
        assert runner.landing_changes(DAYS) == ([DAYS[1]], True)
        _ingest(DAYS[1], DAYS[1])
        assert runner.landing_changes(DAYS) == ([], False)
    assert _spark_rows(spark, tmp_path, "observational_impressions") == {DAYS[0]: rows[DAYS[0]], DAYS[1]: 40}
    assert _latest(instance, "raw.observational_impressions", DAYS[0]).storage_id == first_load[DAYS[0]]
    assert _latest(instance, "raw.observational_impressions", DAYS[1]).storage_id > first_load[DAYS[1]]
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    engine = SparkEngine(spark, f"file://{tmp_path / 'spark warehouse'}")
    assert fetch_rows(engine, "SELECT count(*) FROM raw.items") == [(len(items) - 10,)]

