"""The Spark warehouse's commit log: which version of each table partition, table and view is live.

Data is never moved or renamed: every write lands in a directory of its own (a version, written by Spark's writer),
and a commit names the versions that become live. A commit is one Parquet file of a few rows, written by Spark under
`<root>/_commits/commit=<id>/`: Spark's output committer makes a task's finished file appear under its final name in
one rename, so a commit is seen whole or not at all, and the several rows of one commit (a day's raw rows and its
quarantine rows) become live together. A reader takes, for each (kind, name, partition), the row of the latest
commit (by its time, then its id). Nothing here is a file operation of this process: the log is written and read
through the session (classic or Spark Connect) or, without a JVM, read with pyarrow on a `file://` warehouse.
Writers read the live state from the latest checkpoint and the commits after it (`log_snapshot`).

Kinds: "partition" (a daily partition of a table: its version, or none when the write had no rows), "table" (an
unpartitioned table's version) and "view" (a view's DuckDB-dialect SQL). `definition` is the table's Spark schema
(JSON) or the view's SQL. A view's `rows` is its place among the views of its commit (one commit may define
several, in order: adopting an earlier-layout warehouse).
"""
from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Sequence

from fair_pipeline.platform.engines.warehouse_files import join, listing_uri, local_path

LOG_DIR = "_commits"
PARTITION, TABLE, VIEW = "partition", "table", "view"
FIELDS = (("commit_id", "string"), ("committed_at", "bigint"), ("kind", "string"), ("name", "string"),
           ("partition", "string"), ("version", "string"), ("rows", "bigint"), ("definition", "string"))
LOG_DDL = ", ".join(f"`{field}` {kind}" for field, kind in FIELDS)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One row of a commit: `name` ("schema.table") gets `version` (None: no rows) for `partition` ("" but for
    kind "partition"). `committed_at` (microseconds since the epoch) and `commit_id` order the commits."""

    kind: str
    name: str
    partition: str
    version: str | None
    rows: int
    definition: str
    committed_at: int = 0
    commit_id: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.name, self.partition


def new_id() -> str:
    return uuid.uuid4().hex


def log_uri(root: str) -> str:
    return join(root, LOG_DIR)


def commit(spark, root: str, entries: Sequence[Entry], after: int = 0) -> list[Entry]:
    """Write one commit naming every entry (one file, one task); returns the entries as committed. `after` is the
    latest commit time the writer has seen: the commit is later still, whatever this machine's clock says, so the
    version it replaces is never chosen over it."""
    committed_at = max(time.time_ns() // 1000, after + 1)
    commit_id = new_id()
    committed = [dataclasses.replace(e, committed_at=committed_at, commit_id=commit_id) for e in entries]
    _write_commit(spark, root, commit_id, committed)
    return committed


def _write_commit(spark, root: str, commit_id: str, entries: Sequence[Entry]) -> None:
    """The rows go in as bound parameters of one SELECT per row (no value in the SQL text, no local frame to ship);
    a missing version is bound as '' and made NULL."""
    selects, args = [], {}
    for n, entry in enumerate(entries):
        cells = []
        for field, kind in FIELDS:
            value = getattr(entry, field)
            args[f"{field}_{n}"] = "" if value is None else value
            cell = f"CAST(:{field}_{n} AS {kind})"
            if field == "version":
                cell = f"NULLIF({cell}, '')"
            cells.append(f"{cell} AS `{field}`")
        selects.append(f"SELECT {', '.join(cells)}")
    frame = spark.sql(" UNION ALL ".join(selects), args=args).coalesce(1)
    frame.write.parquet(join(log_uri(root), f"commit={commit_id}"))


def read_full(spark, root: str) -> list[Entry]:
    """The live entry of each (kind, name, partition), as `live` picks it, from every commit ever written, through
    the session (its executors read the log where it is). Every commit file is opened: writers read the latest
    checkpoint and the commits after it instead (`log_snapshot`)."""
    return _latest_rows(spark, lambda reader: reader.parquet(listing_uri(log_uri(root))))


def read_commits(spark, root: str, commit_ids: Sequence[str]) -> list[Entry]:
    """As `read_full`, from the named commits only."""
    paths = [join(log_uri(root), f"commit={commit_id}") for commit_id in commit_ids]
    return _latest_rows(spark, lambda reader: reader.option("basePath", log_uri(root)).parquet(*paths))


def is_missing_path(error) -> bool:
    condition = error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()
    return condition == "PATH_NOT_FOUND"


def _latest_rows(spark, scan) -> list[Entry]:
    from pyspark.errors import AnalysisException
    from pyspark.sql import Window, functions

    # Only the live rows reach the driver: the log grows with every write ever made, its live rows with the tables'
    # partitions.
    latest = Window.partitionBy("kind", "name", "partition").orderBy(functions.desc("committed_at"),
                                                                     functions.desc("commit_id"))
    try:
        log = scan(spark.read.schema(LOG_DDL))
        rows = (log.withColumn("latest", functions.row_number().over(latest)).where("latest = 1")
                .select(*(f for f, _ in FIELDS)).collect())
    except AnalysisException as error:
        if is_missing_path(error):  # nothing committed yet
            return []
        raise
    return [Entry(**row.asDict()) for row in rows]


def read_local(root: str) -> list[Entry]:
    """The entries of every commit file there is (pass them to `live`), without a JVM, for a `file://` warehouse
    (pyarrow skips `_temporary` and hidden files, so a commit being written is not seen). Once the log is trimmed
    (`log_retention`) the commits a checkpoint covers are gone: the live state is `log_snapshot.read_local`'s."""
    import pyarrow.dataset as ds

    path = local_path(log_uri(root))
    if not path.is_dir():
        return []
    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=[f for f, _ in FIELDS])
    return [Entry(**row) for row in table.to_pylist()]


def live(entries: Iterable[Entry]) -> dict[tuple[str, str, str], Entry]:
    """The latest entry of each (kind, name, partition)."""
    latest: dict[tuple[str, str, str], Entry] = {}
    for entry in entries:
        held = latest.get(entry.key)
        if held is None or (entry.committed_at, entry.commit_id) > (held.committed_at, held.commit_id):
            latest[entry.key] = entry
    return latest


def live_partition_dates(entries: Iterable[Entry], name: str) -> list[str]:
    """The days `name` ("schema.table") holds rows for, ascending."""
    return sorted(e.partition for e in live(entries).values() if e.kind == PARTITION and e.name == name and e.version)
