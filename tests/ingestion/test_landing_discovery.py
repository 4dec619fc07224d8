"""Discovery never skips a file silently: any-case `.parquet`, hive-style subfolders read, other subfolders and
non-regular files refused by name without being opened, and hive folder names never become columns."""
from __future__ import annotations

import os
import threading

import duckdb
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import loads
from fair_pipeline.ingestion.landing import LandingFileError, discover, landed_dates, partition_files
from fair_pipeline.platform import settings, warehouse

DAY = "2026-01-01"


def _folder(landing, day=DAY):
    return landing / "observational" / f"date={day}"


def _load(landing, day=DAY):
    with warehouse.session(settings.warehouse_path()) as con:
        return loads.load_partition(con, landing, "observational", day)


def _stored_keys(day=DAY):
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute("SELECT count(*), count(DISTINCT source_file) FROM raw.observational_impressions "
                           "WHERE partition_date = $d", {"d": day}).fetchone()


def _split(folder, names):
    """Move the day's one file into len(names) files at the given relative paths (rows split evenly)."""
    table = pq.read_table(folder / "part-0.parquet")
    (folder / "part-0.parquet").unlink()
    step = -(-table.num_rows // len(names))
    for i, name in enumerate(names):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(i * step, step), folder / name)
    return table.num_rows


def test_extensions_in_any_case_and_hive_subfolders_are_read(small_landing):
    folder = _folder(small_landing)
    rows = _split(folder, ["part-1.PARQUET", "part-2.Parquet", "hour=01/x.parquet", "hour=02/region=eu/y.parquet"])
    assert len(partition_files(small_landing, "observational", DAY)) == 4
    load = _load(small_landing)
    assert load.accepted + load.rejected == rows
    assert _stored_keys() == (load.accepted, 4)
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        columns = [r[0] for r in con.execute("DESCRIBE raw.observational_impressions").fetchall()]
        stored = {r[0] for r in con.execute("SELECT source_file FROM raw.observational_impressions").fetchall()}
    assert "hour" not in columns and "region" not in columns and "date" not in columns
    assert "observational/date=2026-01-01/hour=02/region=eu/y.parquet" in stored


def test_a_file_in_a_plain_subfolder_is_refused_naming_it_and_the_partition_is_kept(small_landing):
    _load(small_landing)
    before = _stored_keys()
    folder = _folder(small_landing)
    _split(folder, ["part-0.parquet", "sub/x.parquet"])
    with pytest.raises(LandingFileError, match=r"sub/x\.parquet: in subfolder 'sub'"):
        _load(small_landing)
    assert _stored_keys() == before
    assert landed_dates(small_landing, "observational") == ["2026-01-01", "2026-01-02"]  # listing never raises


def test_a_fifo_named_parquet_is_refused_without_opening_it(small_landing):
    _load(small_landing)
    before = _stored_keys()
    fifo = _folder(small_landing) / "stream.parquet"
    os.mkfifo(fifo)
    done = threading.Event()
    errors = []

    def load():
        try:
            _load(small_landing)
        except LandingFileError as error:
            errors.append(str(error))
        done.set()

    threading.Thread(target=load, daemon=True).start()
    if not done.wait(120):  # an open() of the FIFO would block forever; unblock it before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("ingestion opened the FIFO")
    assert errors and f"{fifo}: not a regular file" in errors[0]
    assert _stored_keys() == before


def test_folders_links_and_temp_names_are_handled_by_name(small_landing):
    folder = _folder(small_landing)
    (folder / "odd.parquet").mkdir()
    (folder / "gone.parquet").symlink_to(folder / "missing-target.parquet")
    (folder / "_temporary" / "0").mkdir(parents=True)  # Spark's writer folder: not meant for ingestion
    pq.write_table(pq.read_table(folder / "part-0.parquet"), folder / "_temporary" / "0" / "part-9.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    files, refused = discover(folder)
    assert files == [folder / "part-0.parquet"]
    assert sorted(refused) == sorted([f"{folder / 'gone.parquet'}: No such file or directory",
                                      f"{folder / 'odd.parquet'}: not a regular file (a folder)"])
    (folder / "odd.parquet").rmdir()
    (folder / "gone.parquet").unlink()
    (folder / "link.parquet").symlink_to(folder / "part-0.parquet")  # a link to a regular file is read
    assert discover(folder) == ([folder / "link.parquet", folder / "part-0.parquet"], [])
