"""A landing given to the Spark loader as a URI: listed through the session's Hadoop FileSystem with the discovery rules
of a local landing, footers read by Spark, nothing read from the driver's paths (pyarrow's readers and Python's
directory listing fail if called), and the same stored rows and quarantine as the same files loaded from the plain
folder. Refusals name the file by its URI and leave the day as it was."""
from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import landing_uris, spark_loads
from fair_pipeline.ingestion.landing import LandingFileError, partition_dir
from fair_pipeline.ingestion.simulated_landing import simulate_source_table
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform.engines import fetch_rows

DAY = "2026-01-01"
ODD = "part 1+ü'\"ß%41 ד"
STORED = "SELECT * FROM raw.observational_impressions WHERE partition_date = $d ORDER BY request_id, position"
QUARANTINE = "SELECT reason, source_file, request_id, position FROM raw.quarantine WHERE partition_date = $d ORDER BY ALL"


@pytest.fixture(scope="module")
def engine(spark, tmp_path_factory):
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    return SparkEngine(spark, tmp_path_factory.mktemp("uri_warehouse"))


@pytest.fixture(scope="module")
def day_table():
    """One simulated observational day as an Arrow table."""
    config = SimulationConfig(n_items=200, requests_per_day=40, slots=10, seed=3)
    return simulate_source_table(config, simulate_items(config), dt.date.fromisoformat(DAY), "observational")


def _odd_landing(root: Path, table) -> Path:
    """The day in a folder with an odd name: two files with odd names (one in a hive-style subfolder, one with an
    upper-case suffix, one written by pandas with nanosecond timestamps) and entries the rules skip."""
    landing = root / "land ing+ü'%41"
    folder = partition_dir(landing, "observational", DAY)
    (folder / "hour=07 +é").mkdir(parents=True)
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), folder / f"{ODD}.PARQUET")
    frame = table.slice(half).to_pandas()
    frame.loc[frame.index[0], "position"] = 0  # rejected: position outside 1..K
    frame.to_parquet(folder / "hour=07 +é" / f"{ODD}.parquet", coerce_timestamps=None, allow_truncated_timestamps=True)
    (folder / ".tmp-writing.parquet").write_bytes(b"PAR1")
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / "notes.txt").write_text("not data")
    return landing


def _no_driver_reads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a landing given as a URI was read from the driver's file system")

    for name in ("read_table", "read_metadata", "read_schema", "ParquetFile"):
        monkeypatch.setattr(pq, name, refuse)
    monkeypatch.setattr(os, "scandir", refuse)
    monkeypatch.setattr(os, "walk", refuse)


def test_a_landing_uri_loads_as_its_plain_folder(engine, day_table, tmp_path, monkeypatch):
    landing = _odd_landing(tmp_path, day_table)
    params = {"d": DAY}
    by_path = spark_loads.load_partition(engine, landing, "observational", DAY)
    stored, quarantined = fetch_rows(engine, STORED, params), fetch_rows(engine, QUARANTINE, params)
    with monkeypatch.context() as patched:
        _no_driver_reads(patched)
        by_uri = spark_loads.load_partition(engine, f"file://{landing}", "observational", DAY)
    assert (by_uri.accepted, by_uri.rejected, by_uri.rejected_by_reason) == \
        (by_path.accepted, by_path.rejected, by_path.rejected_by_reason)
    assert by_uri.accepted == day_table.num_rows - 1 and by_uri.rejected == 1
    assert by_uri.files == tuple(sorted(f"file://{p}" for p in by_path.files))
    assert fetch_rows(engine, STORED, params) == stored
    assert fetch_rows(engine, QUARANTINE, params) == quarantined
    assert {row[1] for row in quarantined} == {f"observational/date={DAY}/hour=07 +é/{ODD}.parquet"}
    assert pd.Series([r[-3] for r in stored]).notna().all()


DEFECTS = {  # entry under the day's folder, how it is made, what the refusal says
    "extra/x.parquet": (lambda path, good: shutil.copy(good, path), "not a hive-style"),
    "dir.parquet": (lambda path, good: path.mkdir(), "a folder"),
    "stream.parquet": (lambda path, good: os.mkfifo(path), "0 bytes"),
    "cut.parquet": (lambda path, good: path.write_bytes(good.read_bytes()[:-40]), "unreadable"),
}


def test_a_refused_file_under_a_landing_uri_is_named_and_nothing_changes(engine, day_table, tmp_path):
    landing = tmp_path / "landing"
    folder = partition_dir(landing, "observational", DAY)
    folder.mkdir(parents=True)
    good = folder / "good.parquet"
    pq.write_table(day_table, good)
    spark_loads.load_partition(engine, f"file://{landing}", "observational", DAY)
    before = fetch_rows(engine, STORED, {"d": DAY})
    integer_ts = day_table.set_column(day_table.schema.get_field_index("ts"), "ts", day_table["ts"].cast("int64"))
    defects = {**DEFECTS, "int.parquet": (lambda path, good: pq.write_table(integer_ts, path), "column 'ts' is int64")}
    for name, (make, reason) in defects.items():
        bad = folder / name
        bad.parent.mkdir(parents=True, exist_ok=True)
        make(bad, good)
        with pytest.raises(LandingFileError) as refused:
            spark_loads.load_partition(engine, f"file://{landing}", "observational", DAY)
        assert f"file://{bad}" in str(refused.value) and reason in str(refused.value), (name, str(refused.value))
        shutil.rmtree(bad) if bad.is_dir() else bad.unlink()
    assert fetch_rows(engine, STORED, {"d": DAY}) == before


def test_landed_days_of_a_landing_uri(engine, day_table, tmp_path):
    landing = _odd_landing(tmp_path, day_table)
    assert landing_uris.landed_dates(engine.files, f"file://{landing}", "observational") == [DAY]
    assert landing_uris.landed_dates(engine.files, f"file://{landing}", "randomized") == []
    (landing / "observational" / "date=2026-13-01").mkdir()
    with pytest.raises(LandingFileError, match=re.escape(f"file://{landing}/observational/date=2026-13-01 is not")):
        landing_uris.landed_dates(engine.files, f"file://{landing}", "observational")
