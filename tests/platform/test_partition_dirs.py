"""All-or-nothing directory swaps of the Spark engine's partitions, driven through the local file system of
`warehouse_files` (pure Python; the Spark side, through the session's Hadoop FileSystem, is in
tests/platform/spark/test_spark_engine.py). A crash is injected at each rename; the next `recover` must leave
exactly the new data, never the old, a mix, or leftovers, for one table and for several swapped together."""
from __future__ import annotations

from pathlib import Path

import pytest

from fair_pipeline.platform.engines import partition_dirs
from fair_pipeline.platform.engines.warehouse_files import LocalFiles

FILES = LocalFiles()

NAME = "partition_date=2026-01-01"


def _files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir())} if directory.exists() else {}


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "marts" / "t"
    (table / NAME).mkdir(parents=True)
    (table / NAME / "part-0.parquet").write_text("old-0")
    (table / NAME / "part-1.parquet").write_text("old-1")
    return table


def _staged(table: Path, files: dict[str, str]) -> str | None:
    if not files:
        return None
    staged = Path(partition_dirs.new_staging_dir(FILES, str(table))) / NAME
    staged.mkdir(parents=True)
    for name, text in files.items():
        (staged / name).write_text(text)
    return str(staged)


def _only_live_data_left(table: Path) -> None:
    assert not list((table / partition_dirs.JOURNAL).glob("*"))
    assert not any((table / partition_dirs.TRASH).glob("*"))


@pytest.mark.parametrize("new", [{"part-0.parquet": "new-0"}, {}], ids=["rows", "zero-rows"])
def test_a_swap_replaces_the_whole_directory(tmp_path, new):
    table = _table(tmp_path)
    partition_dirs.swap_in(FILES, str(table), NAME, _staged(table, new))
    assert _files(table / NAME) == new  # no old file survives, also when the new data has no rows
    _only_live_data_left(table)


def _crash_at_rename(monkeypatch, crash_at):
    """Make the crash_at-th rename raise; return the real rename to restore."""
    real_rename, calls = partition_dirs._rename, []

    def crashing_rename(fs, source, target):
        calls.append(source)
        if len(calls) == crash_at:
            raise OSError("injected crash")
        real_rename(fs, source, target)

    monkeypatch.setattr(partition_dirs, "_rename", crashing_rename)
    return real_rename


@pytest.mark.parametrize("new,crash_at", [({"part-0.parquet": "new-0"}, 1), ({"part-0.parquet": "new-0"}, 2), ({}, 1)],
                         ids=["rows-crash-old-to-trash", "rows-crash-new-to-live", "zero-rows-crash-old-to-trash"])
def test_a_crash_at_any_rename_is_completed_by_recover(tmp_path, monkeypatch, new, crash_at):
    table = _table(tmp_path)
    staged = _staged(table, new)
    real_rename = _crash_at_rename(monkeypatch, crash_at)
    with pytest.raises(OSError, match="injected crash"):
        partition_dirs.swap_in(FILES, str(table), NAME, staged)
    # Mid-swap the live directory is the old data or absent (never a mix).
    assert _files(table / NAME) in ({"part-0.parquet": "old-0", "part-1.parquet": "old-1"}, {})
    monkeypatch.setattr(partition_dirs, "_rename", real_rename)
    assert partition_dirs.recover(FILES, str(table)) == [NAME]
    assert _files(table / NAME) == new
    _only_live_data_left(table)
    assert partition_dirs.recover(FILES, str(table)) == []


def test_a_crash_after_the_journal_before_any_rename_is_completed(tmp_path, monkeypatch):
    table = _table(tmp_path)
    staged = _staged(table, {"part-0.parquet": "new-0"})
    monkeypatch.setattr(partition_dirs, "_finish", lambda fs, journal, trashes: (_ for _ in ()).throw(OSError("crash")))
    monkeypatch.setattr(partition_dirs, "_rename", lambda fs, s, t: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        partition_dirs.swap_in(FILES, str(table), NAME, staged)
    monkeypatch.undo()
    partition_dirs.recover(FILES, str(table))
    assert _files(table / NAME) == {"part-0.parquet": "new-0"}
    _only_live_data_left(table)


@pytest.mark.parametrize("crash_at", [1, 2, 3, 4])
def test_several_tables_swapped_together_end_new_together_whatever_rename_crashes(tmp_path, monkeypatch, crash_at):
    """A day's raw rows and its quarantine rows: one journal under the warehouse root names both swaps; a crash at
    any of their four renames is completed for both by recovering the root (the quarantine's new data has no rows)."""
    raw, quarantine = _table(tmp_path), tmp_path / "raw" / "quarantine"
    (quarantine / NAME).mkdir(parents=True)
    (quarantine / NAME / "part-0.parquet").write_text("old-q")
    swaps = [partition_dirs.Swap(str(raw), NAME, _staged(raw, {"part-0.parquet": "new-0"})),
             partition_dirs.Swap(str(quarantine), NAME, None)]
    real_rename = _crash_at_rename(monkeypatch, crash_at)
    if crash_at <= 3:  # three renames (raw's two, the quarantine's old data to the trash); 4: no crash
        with pytest.raises(OSError, match="injected crash"):
            partition_dirs.swap_together(FILES, str(tmp_path), swaps)
        monkeypatch.setattr(partition_dirs, "_rename", real_rename)
        assert partition_dirs.recover(FILES, str(tmp_path)) == [NAME, NAME]
    else:
        partition_dirs.swap_together(FILES, str(tmp_path), swaps)
    assert _files(raw / NAME) == {"part-0.parquet": "new-0"} and _files(quarantine / NAME) == {}
    for table in (raw, quarantine):
        _only_live_data_left(table)
    assert not list((tmp_path / partition_dirs.JOURNAL).glob("*"))
