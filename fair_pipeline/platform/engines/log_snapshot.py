"""The commit log's live state read from its latest checkpoint and the commits after it, and the checkpoints written.

Without a checkpoint, reading the live state means opening every commit file ever written (`version_log.read_full`),
so every write would cost more as the warehouse ages. A checkpoint is one Parquet file, written by Spark under
`<root>/_checkpoints/checkpoint=<covered>-<id>/` (one task: it appears whole under its final name or not at all),
holding the live entry of every (kind, name, partition) together with the ids of the commits those entries were
taken from (rows of kind "covered"). A reader lists the commit files' names (a listing, no file opened), takes the
checkpoint covering the most commits, and reads only the commits that checkpoint does not cover. Coverage is by id,
never by time: a commit that appears late (its writer was slow, or its clock behind) is simply not covered and is
read from the tail, so a checkpoint can neither lose nor hide a commit; the live entry of a key is the latest by
(time, id) over the checkpoint's entries and the tail's, which equals the latest over the full log. A checkpoint
killed while written leaves only Spark's `_temporary` files, which listings skip. Warehouses written before
checkpoints read their full log once; the first write then checkpoints it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from fair_pipeline.platform.engines import version_log
from fair_pipeline.platform.engines.version_log import Entry, live
from fair_pipeline.platform.engines.warehouse_files import join

CHECKPOINT_DIR = "_checkpoints"
COVERED = "covered"
# A checkpoint every 100 commits: a write then reads at most ~100 small commit files besides one checkpoint.
CHECKPOINT_EVERY = 100
SERIAL_LISTING_SCHEMES = {"file", "hdfs", "viewfs"}
_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_COMMIT_DIR = re.compile(r"/commit=([^/]+)/[^/]+$")
_CHECKPOINT_DIR = re.compile(r"/checkpoint=([^/]+)/[^/]+$")


@dataclasses.dataclass
class Snapshot:
    """The live entry of every key (`state`) and the ids of the commits it was taken from (`commits`); `tail` is how
    many of those were read past the checkpoint (the reader writes a new checkpoint when they are many)."""

    state: dict[tuple[str, str, str], Entry]
    commits: set[str]
    tail: int = 0

    def apply(self, committed: Iterable[Entry]) -> None:
        """This process's own commit, applied as a reader of the log would (no second read of the log)."""
        committed = list(committed)
        self.state = live([*self.state.values(), *committed])
        self.commits.update(e.commit_id for e in committed)
        self.tail += len({e.commit_id for e in committed})


def checkpoints_uri(root: str) -> str:
    return join(root, CHECKPOINT_DIR)


def read(spark, root: str) -> Snapshot:
    """The live state of the warehouse at `root`: its latest checkpoint and the commits it does not cover, through
    the session (classic or Spark Connect)."""
    with _listing_by_the_driver(spark, root):
        checkpoint = _latest_checkpoint(spark, root)
        state, covered = _read_checkpoint(spark, root, checkpoint) if checkpoint else ({}, set())
        listed = _listed(spark, version_log.log_uri(root), _COMMIT_DIR)
        tail = sorted(set(listed) - covered)
        tail_entries = version_log.read_commits(spark, root, tail) if tail else []
    return Snapshot(live([*state.values(), *tail_entries]), covered | set(tail), len(tail))


def write(spark, root: str, snapshot: Snapshot) -> str:
    """Write `snapshot` as a checkpoint (one file, by Spark's writer); returns its name. A checkpoint covers exactly
    the commits the snapshot was taken from, whatever else was committed meanwhile."""
    from pyspark.sql.types import StructType

    name = f"{len(snapshot.commits):012d}-{version_log.new_id()}"
    fields = [field for field, _ in version_log.FIELDS]
    rows = [tuple(getattr(e, field) for field in fields) for e in snapshot.state.values()]
    rows += [tuple(commit if field == "commit_id" else COVERED if field == "kind" else None for field in fields)
             for commit in sorted(snapshot.commits)]
    schema = StructType.fromDDL(version_log.LOG_DDL)
    frame = spark.createDataFrame(rows, schema).coalesce(1)  # one task, one file: seen whole or not at all
    frame.write.parquet(join(checkpoints_uri(root), f"checkpoint={name}"))
    return name


@contextlib.contextmanager
def _listing_by_the_driver(spark, root: str):
    """Spark lists more than 32 directories by a job of one task per directory, which costs ~3 ms of CPU each: the
    log's thousands of one-file commit directories then cost more than everything else a write does. On file
    systems where a listing is one cheap call (local, HDFS) the driver's Hadoop client lists them itself, for the
    log's reads only; on object stores (a request per directory) Spark's parallel listing stays. The setting is the
    session's: another thread's read meanwhile is listed the same way, a cost, never a different result."""
    if urlsplit(root).scheme not in SERIAL_LISTING_SCHEMES:
        yield
        return
    previous = spark.conf.get(_LISTING_THRESHOLD)
    spark.conf.set(_LISTING_THRESHOLD, str(2**31 - 1))
    try:
        yield
    finally:
        spark.conf.set(_LISTING_THRESHOLD, previous)


def _listed(spark, uri: str, pattern: re.Pattern) -> dict[str, list[str]]:
    """The data files under `uri` by the id in their directory's name, as Spark's file index lists them (hidden and
    `_temporary` files skipped, so a commit or checkpoint being written is not seen); none for a missing `uri`."""
    from pyspark.errors import AnalysisException

    try:
        files = spark.read.schema(version_log.LOG_DDL).parquet(uri).inputFiles()
    except AnalysisException as error:
        if version_log.is_missing_path(error):
            return {}
        raise
    listed: dict[str, list[str]] = {}
    for path in files:
        match = pattern.search(path)
        if match:
            listed.setdefault(match.group(1), []).append(path)
    return listed


def _latest_checkpoint(spark, root: str) -> str | None:
    """The checkpoint covering the most commits (its name starts with their count)."""
    return max(_listed(spark, checkpoints_uri(root), _CHECKPOINT_DIR), default=None)


def _read_checkpoint(spark, root: str, name: str) -> tuple[dict[tuple[str, str, str], Entry], set[str]]:
    frame = spark.read.schema(version_log.LOG_DDL).parquet(join(checkpoints_uri(root), f"checkpoint={name}"))
    entries, covered = [], set()
    for row in frame.select(*(field for field, _ in version_log.FIELDS)).collect():
        if row["kind"] == COVERED:
            covered.add(row["commit_id"])
        else:
            entries.append(Entry(**row.asDict()))
    return live(entries), covered
