"""All-or-nothing directory swaps of the Spark engine's partitions (pure Python; the Spark side is in
tests/platform/spark/test_spark_engine.py). A crash is injected at each rename; the next `recover` must leave
exactly the new data, never the old, a mix, or leftovers."""
from __future__ import annotations

from pathlib import Path

import pytest

from fair_pipeline.platform.engines import partition_dirs

NAME = "partition_date=2026-01-01"


def _files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir())} if directory.exists() else {}


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "marts" / "t"
    (table / NAME).mkdir(parents=True)
    (table / NAME / "part-0.parquet").write_text("old-0")
    (table / NAME / "part-1.parquet").write_text("old-1")
    return table


def _staged(table: Path, files: dict[str, str]) -> Path | None:
    if not files:
        return None
    staged = partition_dirs.new_staging_dir(table) / NAME
    staged.mkdir(parents=True)
    for name, text in files.items():
        (staged / name).write_text(text)
    return staged


def _only_live_data_left(table: Path) -> None:
    assert not list((table / partition_dirs.JOURNAL).glob("*.json"))
    assert not any((table / partition_dirs.TRASH).glob("*"))


@pytest.mark.parametrize("new", [{"part-0.parquet": "new-0"}, {}], ids=["rows", "zero-rows"])
def test_a_swap_replaces_the_whole_directory(tmp_path, new):
    table = _table(tmp_path)
    partition_dirs.swap_in(table, NAME, _staged(table, new))
    assert _files(table / NAME) == new  # no old file survives, also when the new data has no rows
    _only_live_data_left(table)


@pytest.mark.parametrize("new,crash_at", [({"part-0.parquet": "new-0"}, 1), ({"part-0.parquet": "new-0"}, 2), ({}, 1)],
                         ids=["rows-crash-old-to-trash", "rows-crash-new-to-live", "zero-rows-crash-old-to-trash"])
def test_a_crash_at_any_rename_is_completed_by_recover(tmp_path, monkeypatch, new, crash_at):
    table = _table(tmp_path)
    staged = _staged(table, new)
    real_rename, calls = partition_dirs._rename, []

    def crashing_rename(source, target):
        calls.append(source)
        if len(calls) == crash_at:
            raise OSError("injected crash")
        real_rename(source, target)

    monkeypatch.setattr(partition_dirs, "_rename", crashing_rename)
    with pytest.raises(OSError, match="injected crash"):
        partition_dirs.swap_in(table, NAME, staged)
    # Mid-swap the live directory is the old data or absent (never a mix).
    assert _files(table / NAME) in ({"part-0.parquet": "old-0", "part-1.parquet": "old-1"}, {})
    monkeypatch.setattr(partition_dirs, "_rename", real_rename)
    assert partition_dirs.recover(table) == [NAME]
    assert _files(table / NAME) == new
    _only_live_data_left(table)
    assert partition_dirs.recover(table) == []


def test_a_crash_after_the_journal_before_any_rename_is_completed(tmp_path, monkeypatch):
    table = _table(tmp_path)
    staged = _staged(table, {"part-0.parquet": "new-0"})
    monkeypatch.setattr(partition_dirs, "_finish", lambda journal, trash: (_ for _ in ()).throw(OSError("crash")))
    monkeypatch.setattr(partition_dirs, "_rename", lambda s, t: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        partition_dirs.swap_in(table, NAME, staged)
    monkeypatch.undo()
    partition_dirs.recover(table)
    assert _files(table / NAME) == {"part-0.parquet": "new-0"}
    _only_live_data_left(table)
