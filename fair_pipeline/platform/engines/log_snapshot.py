"""The commit log's live state read from its latest checkpoint and the commits after it, and the checkpoints written.

Without a checkpoint, reading the live state means opening every commit file ever written (`version_log.read_full`),
so every write would cost more as the warehouse ages. A checkpoint is one Parquet file, written by Spark under
`<root>/_checkpoints/checkpoint=<n>-<id>/` (one task: it appears whole under its final name or not at all; `n`
is the number of commits it reflects), holding the live entry of every (kind, name, partition) together with the
ids of the commits those entries were taken from that were still there (rows of kind "covered"). A reader lists
the commit files' names (a listing, no file opened), takes the checkpoint reflecting the most commits, and reads
only the commits that checkpoint does not cover. Coverage is by id,
never by time: a commit that appears late (its writer was slow, or its clock behind) is simply not covered and is
read from the tail, so a checkpoint can neither lose nor hide a commit; the live entry of a key is the latest by
(time, id) over the checkpoint's entries and the tail's, which equals the latest over the full log. A checkpoint
killed while written leaves only Spark's `_temporary` files, which listings skip. Warehouses written before
checkpoints read their full log once; the first write then checkpoints it.

Old checkpoints and the commits a checkpoint covers may be deleted (`log_retention`), so a read is validated: it
uses a checkpoint that includes every trim marker's checkpoint (its own "based_on" rows name the checkpoints it was
built on), and after listing and reading the commits it lists the checkpoints again: if its checkpoint was deleted,
or a trim marker appeared that it does not include, some commit it needed may be gone, and it reads again. A file
that vanished under a read is the same case. A reader therefore never sees a state missing a commit's entries.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable
from urllib.parse import urlsplit

from fair_pipeline.platform.engines import version_log
from fair_pipeline.platform.engines.log_files import (Checkpoint, LocalLogFiles, SparkLogFiles, checkpoint_rows,
                                                      checkpoints_uri, count_of)
from fair_pipeline.platform.engines.version_log import Entry, live
from fair_pipeline.platform.engines.warehouse_files import join

# A checkpoint every 100 commits: a write then reads at most ~100 small commit files besides one checkpoint.
CHECKPOINT_EVERY = 100
# Reads in a row that found the log changed under them (a checkpoint or commit deleted meanwhile) before giving up:
# trimming happens once per checkpoint, so a second read normally succeeds.
READ_ATTEMPTS = 8
SERIAL_LISTING_SCHEMES = {"file", "hdfs", "viewfs"}
_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


class LogChangedError(RuntimeError):
    """The log kept changing under every read (checkpoints or commits deleted while it was read)."""


@dataclasses.dataclass
class Snapshot:
    """The live entry of every key (`state`) and the ids of the listed commits it reflects (`commits`), read from
    checkpoint `base` (None: the full log), which reflects `base_count` commits and includes the checkpoints
    `based_on`; `tail` is how many commits were read or made past the checkpoint (a new checkpoint is written when
    they are many)."""

    state: dict[tuple[str, str, str], Entry]
    commits: set[str]
    tail: int = 0
    base: str | None = None
    base_count: int = 0
    based_on: frozenset[str] = frozenset()

    def apply(self, committed: Iterable[Entry]) -> None:
        """This process's own commit, applied as a reader of the log would (no second read of the log)."""
        committed = list(committed)
        self.state = live([*self.state.values(), *committed])
        self.commits.update(e.commit_id for e in committed)
        self.tail += len({e.commit_id for e in committed})

    def as_checkpoint(self) -> Checkpoint:
        return Checkpoint(self.state, frozenset(self.commits),
                          self.based_on | ({self.base} if self.base else frozenset()))

    def checkpointed(self, name: str) -> None:
        """The snapshot is now checkpoint `name`: its next checkpoint is built on it."""
        self.based_on, self.base = self.as_checkpoint().based_on, name
        self.base_count, self.tail = count_of(name), 0


def read(spark, root: str) -> Snapshot:
    """The live state of the warehouse at `root`: its latest usable checkpoint and the commits it does not cover,
    through the session (classic or Spark Connect)."""
    with listing_by_the_driver(spark, root):
        return read_snapshot(SparkLogFiles(spark, root))


def read_local(root: str) -> Snapshot:
    """As `read`, for a `file://` warehouse, with pyarrow on this machine (no JVM)."""
    return read_snapshot(LocalLogFiles(root))


def read_snapshot(files) -> Snapshot:
    """The latest checkpoint that includes every trim marker's checkpoint, and the commits it does not cover; read
    again while the log changes under the read (see the module docstring)."""
    for _ in range(READ_ATTEMPTS):
        checkpoints, trims = files.checkpoints()
        used, checkpoint = None, _NONE
        try:
            for name in sorted(checkpoints, reverse=True):  # the most commits first
                used, checkpoint = name, _NONE
                checkpoint = files.checkpoint(name)
                if checkpoint.usable(name, trims):
                    break
            else:
                used, checkpoint = None, _NONE
            listed = files.commits()
            tail = sorted(listed - checkpoint.covered)
            entries = files.read_commits(tail) if tail else []
        except Exception:
            now, trims_now = files.checkpoints()
            if (used in now if used else not trims_now) and trims_now == trims:
                raise  # nothing was deleted under the read: a real error
            continue
        if _still_valid(files, used, checkpoint):
            # The commits it reflects that are still there: the next checkpoint need not name the deleted ones.
            reflected = (set(checkpoint.covered) & listed) | set(tail)
            return Snapshot(live([*checkpoint.state.values(), *entries]), reflected, len(tail), used,
                            count_of(used) if used else 0, checkpoint.based_on)
    raise LogChangedError(f"the commit log of {files.root} changed under {READ_ATTEMPTS} reads in a row")


_NONE = Checkpoint({}, frozenset(), frozenset())


def _still_valid(files, used: str | None, checkpoint: Checkpoint) -> bool:
    """The checkpoint read is still there and includes every trim marker (none without a checkpoint): no commit it
    needed was deleted before its commits were listed."""
    checkpoints, trims = files.checkpoints()
    if used is None:
        return not trims
    return used in checkpoints and checkpoint.usable(used, trims)


def write(spark, root: str, snapshot: Snapshot) -> str:
    """Write `snapshot` as a checkpoint (one file, by Spark's writer); returns its name. A checkpoint covers exactly
    the commits the snapshot was taken from, whatever else was committed meanwhile; its name starts with the number
    of commits it reflects (its base's and those read or made past it)."""
    from pyspark.sql.types import StructType

    name = f"{snapshot.base_count + snapshot.tail:012d}-{version_log.new_id()}"
    fields = [field for field, _ in version_log.FIELDS]
    rows = [tuple(row[field] for field in fields) for row in checkpoint_rows(snapshot.as_checkpoint())]
    schema = StructType.fromDDL(version_log.LOG_DDL)
    frame = spark.createDataFrame(rows, schema).coalesce(1)  # one task, one file: seen whole or not at all
    frame.write.parquet(join(checkpoints_uri(root), f"checkpoint={name}"))
    return name


@contextlib.contextmanager
def listing_by_the_driver(spark, root: str):
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
