"""Versioned Parquet tables under a warehouse URI, changed through Spark's DataFrame API only (so the same code serves
a classic session and a Spark Connect client, and executors on other hosts see what the driver sees):

    <root>/<schema>/<table>/write_id=<id>/partition_date=YYYY-MM-DD/part-*.parquet   a daily partition's version
    <root>/<schema>/<table>/write_id=<id>/part-*.parquet                             an unpartitioned table's version
    <root>/_commits/commit=<id>/part-*.parquet                                       the commit log (`version_log`)
    <root>/_checkpoints/checkpoint=<n>-<id>/part-*.parquet                           its checkpoints (`log_snapshot`)

A write goes to a new `write_id=` directory (Spark's writer), is counted back (rows per partition: a row of another
partition is refused), then one commit names the new versions of every table written together. Until that commit
the old versions stay live, so a failed or killed write changes nothing readers see; the commit is one file, seen
whole or not at all. Each write reads the log once, before it writes (the latest checkpoint and the commits
after it), and applies its own commit to what it read; every `CHECKPOINT_EVERY` commits read past the checkpoint,
it writes a new one, then deletes older checkpoints and the commits they make unneeded (`log_retention`). A
zero-row write commits "no version": the partition is then empty. After a commit the versions it superseded, and the version of a write that failed, are emptied by Spark's overwrite writer (an
empty DataFrame: the directory keeps one empty Parquet file). A version superseded by another process's commit
between this writer's reading of the log and its own commit, or written by a process killed before its commit,
is never named live and stays on disk: it costs space, never correctness. A warehouse of the layout before the
commit log is adopted when it is opened with an empty log (`earlier_layout`).
"""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame, functions
from pyspark.sql.types import StructType

from fair_pipeline.platform.engines import earlier_layout, log_retention, log_snapshot, version_log
from fair_pipeline.platform.engines.base import WarehouseWriteError
from fair_pipeline.platform.engines.version_log import Entry
from fair_pipeline.platform.engines.warehouse_files import join

PARTITION_COLUMN = "partition_date"
WRITE_COLUMN = "write_id"

logger = logging.getLogger(__name__)


class VersionedTables:
    """The live state of the warehouse at `root` (re-read from the commit log by `refresh`). A checkpoint is written
    once a read went `checkpoint_every` commits past the latest one (0: never); then the newest `keep_checkpoints`
    are kept and the commits the oldest of them covers deleted."""

    def __init__(self, spark, root: str, checkpoint_every: int = log_snapshot.CHECKPOINT_EVERY,
                 keep_checkpoints: int = log_retention.KEEP_CHECKPOINTS):
        self.spark = spark
        self.root = root
        self.checkpoint_every = checkpoint_every
        log_retention.check_keep(keep_checkpoints)
        self.keep_checkpoints = keep_checkpoints
        self.snapshot = log_snapshot.Snapshot({}, set())
        self.refresh()
        if not self.state:  # nothing committed: a new warehouse, or one of the layout before the commit log
            earlier_layout.adopt(self, root)

    @property
    def state(self) -> dict[tuple[str, str, str], Entry]:
        return self.snapshot.state

    def refresh(self) -> None:
        self.snapshot = log_snapshot.read(self.spark, self.root)

    def _latest(self) -> int:
        return max((e.committed_at for e in self.state.values()), default=0)

    # -- what is live ---------------------------------------------------------------------------------------
    def table_names(self) -> list[str]:
        return sorted({e.name for e in self.state.values() if e.kind != version_log.VIEW})

    def views(self) -> list[tuple[str, str]]:
        """(name, SQL) of every view, in the order they were last defined (within one commit, by `rows`)."""
        entries = sorted((e for e in self.state.values() if e.kind == version_log.VIEW),
                         key=lambda e: (e.committed_at, e.commit_id, e.rows))
        return [(e.name, e.definition) for e in entries]

    def schema(self, name: str) -> StructType | None:
        """The table's schema: that of its latest write."""
        entries = [e for e in self.state.values() if e.name == name and e.kind != version_log.VIEW]
        if not entries:
            return None
        return StructType.fromJson(_json(max(entries, key=lambda e: (e.committed_at, e.commit_id)).definition))

    def live_key(self, name: str) -> tuple:
        """What `frame(name)` reads: the commits, versions and partitions of the table's live entries (any commit
        that changes them changes the key)."""
        return tuple(sorted((e.kind, e.partition, e.version or "", e.commit_id, e.committed_at)
                            for e in self.state.values() if e.name == name and e.kind != version_log.VIEW))

    def table_dir(self, name: str) -> str:
        return join(self.root, *name.split(".", 1))

    def version_dir(self, name: str, version: str) -> str:
        return join(self.table_dir(name), f"{WRITE_COLUMN}={version}")

    def frame(self, name: str) -> DataFrame:
        """The table's live rows, columns in the table's order."""
        schema = self.schema(name)
        if PARTITION_COLUMN in schema.names:
            paths = [join(self.version_dir(name, e.version), f"{PARTITION_COLUMN}={e.partition}")
                     for e in sorted(self.state.values(), key=lambda e: e.partition)
                     if e.kind == version_log.PARTITION and e.name == name and e.version]
            reader = self.spark.read.schema(schema).option("basePath", self.table_dir(name))
            frame = reader.parquet(*paths) if paths else _no_rows(self.spark, schema)
        else:
            entry = self.state.get((version_log.TABLE, name, ""))
            frame = (self.spark.read.schema(schema).parquet(self.version_dir(name, entry.version))
                     if entry is not None and entry.version else _no_rows(self.spark, schema))
        return frame.select(*schema.names)  # Spark puts partition columns (and write_id) last

    # -- writes ---------------------------------------------------------------------------------------------
    def write_partitions(self, writes: Sequence[tuple[str, DataFrame]], partition: str) -> list[int]:
        """Write each frame as a new version of partition `partition` of its table and commit them together;
        returns each one's rows. The frames may read the tables as they were (they are not changed until the
        commit)."""
        self.refresh()
        day = dt.date.fromisoformat(partition)
        entries: list[Entry] = []
        written: list[tuple[str, StructType]] = []
        try:
            for name, frame in writes:
                self._check_columns(name, frame)
                version = version_log.new_id()
                written.append((self.version_dir(name, version), frame.schema))
                frame.write.partitionBy(PARTITION_COLUMN).parquet(written[-1][0])
                counts = {row[0]: row[1] for row in self.spark.read.schema(frame.schema).parquet(written[-1][0])
                          .groupBy(PARTITION_COLUMN).count().collect()}
                strays = {str(key): n for key, n in counts.items() if key != day}
                if strays:
                    raise WarehouseWriteError(
                        f"{name}: the query wrote {sum(strays.values())} rows whose partition_date is not {partition} "
                        f"(partitions {sorted(strays)}); filter every partitioned input on $partition_date")
                rows = counts.get(day, 0)
                entries.append(Entry(version_log.PARTITION, name, partition, version if rows else None, rows,
                                     frame.schema.json()))
        except BaseException:
            for directory, schema in written:
                self._empty(directory, schema)
            raise
        self._commit(entries)
        return [e.rows for e in entries]

    def write_table(self, name: str, frame: DataFrame) -> int:
        """Write the frame as the new version of an unpartitioned table (its schema may change) and commit it."""
        self.refresh()
        version = version_log.new_id()
        directory = self.version_dir(name, version)
        try:
            frame.write.parquet(directory)
            rows = self.spark.read.schema(frame.schema).parquet(directory).count()
        except BaseException:
            self._empty(directory, frame.schema)
            raise
        self._commit([Entry(version_log.TABLE, name, "", version, rows, frame.schema.json())])
        return rows

    def define_view(self, name: str, sql: str) -> None:
        self.refresh()
        self._commit([Entry(version_log.VIEW, name, "", None, 0, sql)])

    def _check_columns(self, name: str, frame: DataFrame) -> None:
        if PARTITION_COLUMN not in frame.columns:
            raise WarehouseWriteError(f"{name}: the query has no {PARTITION_COLUMN} column")
        if WRITE_COLUMN in frame.columns:
            raise WarehouseWriteError(f"{name}: the column name {WRITE_COLUMN} is the warehouse's own (versions)")
        schema = self.schema(name)
        if schema is not None and schema.names != frame.columns:
            raise WarehouseWriteError(
                f"the query now returns columns {frame.columns} but {name} has {schema.names}; "
                f"drop {name} (derived data) and backfill its partitions")

    def _commit(self, entries: list[Entry]) -> None:
        """Commit, apply the commit to the state read before it (another process's commit made meanwhile is read by
        the next write's `refresh`), checkpoint when due, then empty the versions the commit superseded (as this
        writer last read the log)."""
        superseded = [self.state[e.key] for e in entries if e.key in self.state]
        self.snapshot.apply(version_log.commit(self.spark, self.root, entries, after=self._latest()))
        if self.checkpoint_every and self.snapshot.tail >= self.checkpoint_every:
            self._checkpoint()
        for old in superseded:
            if old.version and old.kind != version_log.VIEW:
                directory = self.version_dir(old.name, old.version)
                if old.kind == version_log.PARTITION:  # a version may hold other days, still live (adoption)
                    directory = join(directory, f"{PARTITION_COLUMN}={old.partition}")
                self._empty(directory, StructType.fromJson(_json(old.definition)))

    def _checkpoint(self) -> None:
        """A failed checkpoint is logged, not raised: the commit is made, and the next write checkpoints again. Once
        it is written, the log is trimmed (`log_retention`); a failed trim costs space only."""
        try:
            self.snapshot.checkpointed(log_snapshot.write(self.spark, self.root, self.snapshot))
        except Exception as error:  # noqa: BLE001 - cost only: readers read the commits from the previous checkpoint
            logger.warning("could not write a checkpoint of the commit log of %s: %s", self.root, error)
            return
        try:
            log_retention.trim(self.spark, self.root, self.keep_checkpoints)
        except Exception as error:  # noqa: BLE001 - space only: whatever it left, readers read correctly
            logger.warning("could not trim the commit log of %s: %s", self.root, error)

    def _empty(self, directory: str, schema: StructType) -> None:
        """Remove a version's rows through Spark's writer (overwrite with no rows); a failure is logged, not raised:
        the version is not live either way."""
        try:
            data = StructType([f for f in schema.fields if f.name != PARTITION_COLUMN])
            _no_rows(self.spark, data).write.mode("overwrite").parquet(directory)
        except Exception as error:  # noqa: BLE001 - space only: the rows are not live
            logger.warning("could not empty the unused version %s: %s", directory, error)


def _no_rows(spark, schema: StructType) -> DataFrame:
    """An empty frame of `schema`, made by Spark (no local data is shipped)."""
    return spark.range(0).select(*(functions.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields))


def _json(text: str) -> dict:
    import json

    return json.loads(text)
