"""All-or-nothing replacement of one directory of a Parquet table (a `partition_date=...` partition, or the
`current` data of an unpartitioned table), by directory renames. Pure Python (os, shutil): no Spark.

A write goes to `<table>/_staging/<id>/` first; only a complete, checked write is swapped in:
  1. journal `<table>/_swap/<name>.json` = {staged, trash}    (written atomically: temp file + os.replace)
  2. rename the live directory to `<table>/_trash/<id>`       (if it exists)
  3. rename the staged directory to the live name             (if the write has rows; none: the partition is empty)
  4. delete the trash and the journal
A reader or a crash therefore sees the old directory, no directory (between 2 and 3) or the new one, never a mix;
`recover` (run before every read or write of the table) completes or undoes an interrupted swap from its journal:
the journal is written only for a complete write, so recovery always completes the swap (steps 2-4 for
whatever of them had not run).
Spark ignores paths starting with `_`, so staging, trash and journals are invisible to queries. Renames are
atomic on a local or HDFS file system; object stores (S3) need a table format (Delta, Iceberg) instead.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

STAGING = "_staging"
TRASH = "_trash"
JOURNAL = "_swap"


def new_staging_dir(table_dir: Path) -> Path:
    """A fresh directory path (not created) under the table's staging area."""
    path = Path(table_dir) / STAGING / uuid.uuid4().hex
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + f".{uuid.uuid4().hex}.tmp")
    temporary.write_text(json.dumps(payload))
    os.replace(temporary, path)


def swap_in(table_dir: Path, name: str, staged: Path | None) -> None:
    """Make `staged` (a complete directory, or None for "no rows") the live directory `<table_dir>/<name>`."""
    table_dir = Path(table_dir)
    recover(table_dir)
    live = table_dir / name
    trash = table_dir / TRASH / uuid.uuid4().hex
    journal = table_dir / JOURNAL / f"{name}.json"
    _write_json(journal, {"name": name, "staged": str(staged) if staged else None, "trash": str(trash)})
    if live.exists():
        trash.parent.mkdir(parents=True, exist_ok=True)
        _rename(live, trash)
    if staged is not None:
        _rename(staged, live)
    _finish(journal, trash)


def _rename(source: Path, target: Path) -> None:
    os.rename(source, target)


def _finish(journal: Path, trash: Path) -> None:
    shutil.rmtree(trash, ignore_errors=True)
    journal.unlink(missing_ok=True)


def recover(table_dir: Path) -> list[str]:
    """Complete every interrupted swap of the table (see the module docstring); returns the names recovered."""
    table_dir = Path(table_dir)
    recovered = []
    for journal in sorted((table_dir / JOURNAL).glob("*.json")):
        entry = json.loads(journal.read_text())
        live, trash = table_dir / entry["name"], Path(entry["trash"])
        staged = Path(entry["staged"]) if entry["staged"] else None
        new_data_waiting = staged is not None and staged.exists()
        if live.exists() and (staged is None or new_data_waiting):  # the crash came before step 2
            trash.parent.mkdir(parents=True, exist_ok=True)
            _rename(live, trash)
        if new_data_waiting:
            _rename(staged, live)
        if staged is not None and staged.parent.parent == table_dir / STAGING:
            discard(staged.parent)  # the rest of that write's staging directory (e.g. Spark's _SUCCESS marker)
        _finish(journal, trash)
        recovered.append(entry["name"])
    return recovered


def live_partition_dates(table_dir: Path, column: str = "partition_date") -> list[str]:
    """The `column=YYYY-MM-DD` partitions a table directory serves, ascending (read only: an interrupted swap is
    completed by the next writer). A partition directory exists only with rows (a zero-row write removes it),
    so this is the days holding data, known without a SparkSession."""
    prefix = f"{column}="
    table_dir = Path(table_dir)
    if not table_dir.is_dir():
        return []
    return sorted(p.name[len(prefix):] for p in table_dir.iterdir() if p.is_dir() and p.name.startswith(prefix))


def discard(path: Path) -> None:
    """Remove a staging directory that will not be swapped in (a failed or refused write)."""
    shutil.rmtree(path, ignore_errors=True)
