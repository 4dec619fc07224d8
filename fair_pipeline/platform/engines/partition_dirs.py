"""All-or-nothing replacement of directories of Parquet tables (a `partition_date=...` partition, or the `current`
data of an unpartitioned table), one or several tables together, by directory renames through a file system of
`warehouse_files` (the session's Hadoop FileSystem on Spark; os/shutil in the pure tests). Locations are URIs.

A write goes to `<table>/_staging/<id>/` first; only complete, checked writes are swapped in:
  1. journal `<home>/_swap/<id>.json` = every (table, name, staged, trash)   (temp file renamed into place)
  2. for each table: rename its live directory to `<table>/_trash/<id>`      (if it exists)
                     rename its staged directory to the live name           (if the write has rows; none: empty)
  3. delete the trash and the journal
`<home>` is the table itself for one table, a directory above the tables (the warehouse root) for several.
A crash therefore leaves each directory old, absent (between its two renames) or new, never a mix of files;
`recover(home)` (run before every read or write of a table, and on the warehouse root when an engine opens it)
completes an interrupted swap from its journal: the journal is written only once every write is complete, so
recovery always completes it, for every table it names (a day's raw rows and its quarantine rows end up new together).
Spark ignores paths starting with `_`, so staging, trash and journals are invisible to queries. Renames are
atomic on a local or HDFS file system; object stores (S3) need a table format (Delta, Iceberg) instead.
"""
from __future__ import annotations

import dataclasses
import json
import uuid

from fair_pipeline.platform.engines.warehouse_files import join, parent

STAGING = "_staging"
TRASH = "_trash"
JOURNAL = "_swap"


@dataclasses.dataclass(frozen=True)
class Swap:
    """Make `staged` (a complete directory URI, or None for "no rows") the live directory `<table>/<name>`."""

    table: str
    name: str
    staged: str | None


def new_staging_dir(fs, table_dir: str) -> str:
    """A fresh directory URI (not created) under the table's staging area."""
    fs.mkdirs(join(table_dir, STAGING))
    return join(table_dir, STAGING, uuid.uuid4().hex)


def swap_in(fs, table_dir: str, name: str, staged: str | None) -> None:
    """One table's directory `name` becomes `staged` (journaled in the table's own `_swap/`)."""
    swap_together(fs, table_dir, [Swap(table_dir, name, staged)])


def swap_together(fs, home: str, swaps: list[Swap]) -> None:
    """Every swap or none, journaled under `home` (see the module docstring)."""
    for directory in dict.fromkeys([home, *(s.table for s in swaps)]):
        recover(fs, directory)
    entries = [{"table": s.table, "name": s.name, "staged": s.staged,
                "trash": join(s.table, TRASH, uuid.uuid4().hex)} for s in swaps]
    journal = join(home, JOURNAL, f"{uuid.uuid4().hex}.json")
    fs.write_text(journal, json.dumps({"swaps": entries}))
    for entry in entries:
        live = join(entry["table"], entry["name"])
        if fs.exists(live):
            fs.mkdirs(parent(entry["trash"]))
            _rename(fs, live, entry["trash"])
        if entry["staged"] is not None:
            _rename(fs, entry["staged"], live)
    _finish(fs, journal, [entry["trash"] for entry in entries])


def _rename(fs, source: str, target: str) -> None:
    fs.rename(source, target)


def _finish(fs, journal: str, trashes: list[str]) -> None:
    for trash in trashes:
        fs.delete(trash)
    fs.delete(journal)


def recover(fs, home: str) -> list[str]:
    """Complete every interrupted swap journaled under `home` (see the module docstring); returns the names of the
    directories recovered."""
    recovered = []
    journals = join(home, JOURNAL)
    for file_name in fs.list_files(journals):
        if not file_name.endswith(".json"):
            continue  # a journal's temporary file: its swap never started
        journal = join(journals, file_name)
        text = fs.read_text(journal)
        if text is None:
            continue  # completed meanwhile by another recovery
        entries = json.loads(text)["swaps"]
        for entry in entries:
            table, staged = entry["table"], entry["staged"]
            live = join(table, entry["name"])
            new_data_waiting = staged is not None and fs.exists(staged)
            if fs.exists(live) and (staged is None or new_data_waiting):  # that table's crash came before its step 2
                fs.mkdirs(parent(entry["trash"]))
                _rename(fs, live, entry["trash"])
            if new_data_waiting:
                _rename(fs, staged, live)
            if staged is not None and parent(parent(staged)) == join(table, STAGING):
                discard(fs, parent(staged))  # the rest of that write's staging directory (e.g. Spark's _SUCCESS)
            recovered.append(entry["name"])
        _finish(fs, journal, [entry["trash"] for entry in entries])
    return recovered


def live_partition_dates(fs, table_dir: str, column: str = "partition_date") -> list[str]:
    """The `column=YYYY-MM-DD` partitions a table directory serves, ascending (read only: an interrupted swap is
    completed by the next writer). A partition directory exists only with rows (a zero-row write removes it),
    so this is the days holding data, known without a SparkSession on a local warehouse."""
    prefix = f"{column}="
    return [d[len(prefix):] for d in fs.list_dirs(table_dir) if d.startswith(prefix)]


def discard(fs, uri: str) -> None:
    """Remove a staging directory that will not be swapped in (a failed or refused write)."""
    fs.delete(uri)
