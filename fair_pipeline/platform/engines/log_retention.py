"""Retention of the commit log: old checkpoints, and the commits a kept checkpoint covers, are deleted.

Without it the log keeps every commit and checkpoint ever written: disk, and a listing of every commit's name on
each read. After a writer's checkpoint is written (durably: Spark's writer returned), `trim` keeps the newest
`keep` checkpoints (at least 2) that include every trim marker, takes the oldest of them as the horizon, and
  1. writes a trim marker `_checkpoints/trim=<horizon>/` (one empty Parquet file, by Spark's writer) unless one is
     there: from now on a reader must use a checkpoint built on the horizon;
  2. deletes every other checkpoint it listed;
  3. deletes the commits the horizon covers (their entries live on in the horizon and every checkpoint built on it);
  4. deletes the trim markers of checkpoints the horizon is built on (its own marker implies theirs).
It trims only when every kept checkpoint is built on the horizon (a checkpoint written from an older read, by a slow
writer, is not), so readers keep `keep` usable checkpoints.

Why a concurrent reader loses nothing (`log_snapshot.read_snapshot`): a reader uses a checkpoint that includes every
marker it listed, and lists the checkpoints and markers again after reading the commits. A commit is deleted only
after its horizon's marker is durable, so if one the reader needed was gone when it listed the commits, the marker
was there before, and is still there, or a later marker whose checkpoint includes it is (markers are deleted only
after such a later one is written): the reader sees that its checkpoint does not include it and reads again. A
reader whose checkpoint or commit file is deleted while it reads it reads again too. A process killed at any step
leaves a state every reader reads correctly; the next checkpoint's trim finishes the work.

Files are deleted through the session's Hadoop FileSystem (the driver JVM's client, any scheme it knows). A Spark
Connect client has no JVM: its writes do not trim (a classic session's next checkpoint will).
"""
from __future__ import annotations

import dataclasses
import logging

from fair_pipeline.platform.engines import version_log
from fair_pipeline.platform.engines.log_files import SparkLogFiles, checkpoints_uri
from fair_pipeline.platform.engines.warehouse_files import join

KEEP_CHECKPOINTS = 2

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Trimmed:
    """What one trim deleted (names), and its horizon (None: nothing to trim)."""

    horizon: str | None = None
    checkpoints: list[str] = dataclasses.field(default_factory=list)
    commits: list[str] = dataclasses.field(default_factory=list)
    markers: list[str] = dataclasses.field(default_factory=list)


def trim(spark, root: str, keep: int = KEEP_CHECKPOINTS, files=None, delete=None) -> Trimmed:
    """Delete the checkpoints older than the newest `keep` usable ones and the commits the oldest kept one covers
    (see the module docstring). `files` lists and reads the log (default: through `spark`), `delete(uri)` removes a
    directory (default: the session's Hadoop FileSystem; nothing on a Spark Connect client)."""
    check_keep(keep)
    from fair_pipeline.platform.engines.spark_engine import is_connect_session
    from fair_pipeline.platform.engines.warehouse_files import HadoopFiles

    if delete is None:
        if is_connect_session(spark):
            return Trimmed()
        delete = HadoopFiles(spark).delete
    files = files or SparkLogFiles(spark, root)
    checkpoints, markers = files.checkpoints()
    kept = []
    for name in sorted(checkpoints, reverse=True):
        checkpoint = files.checkpoint(name)
        if checkpoint.usable(name, markers):
            kept.append((name, checkpoint))
            if len(kept) == keep:
                break
    horizon, covering = kept[-1] if len(kept) == keep else (None, None)
    if horizon is None or any(horizon not in checkpoint.based_on for _, checkpoint in kept[:-1]):
        return Trimmed()
    if horizon not in markers:
        write_marker(spark, root, horizon)
    trimmed = Trimmed(horizon)
    folder = checkpoints_uri(root)
    for name in sorted(checkpoints - {name for name, _ in kept}):
        if _deleted(delete, join(folder, f"checkpoint={name}")):
            trimmed.checkpoints.append(name)
    for commit in sorted(files.commits() & covering.covered):
        if _deleted(delete, join(version_log.log_uri(root), f"commit={commit}")):
            trimmed.commits.append(commit)
    for name in sorted(markers & covering.based_on):
        if _deleted(delete, join(folder, f"trim={name}")):
            trimmed.markers.append(name)
    return trimmed


def check_keep(keep: int) -> None:
    """Two at least: a reader that read the newest checkpoint just before a newer one appeared still finds it."""
    if keep < 2:
        raise ValueError(f"keep at least 2 checkpoints of the commit log (got {keep})")


def write_marker(spark, root: str, horizon: str) -> None:
    """The marker is one empty Parquet file (Spark writes one for a frame without rows), seen whole or not at all."""
    from pyspark.sql.types import StructType

    frame = spark.createDataFrame([], StructType.fromDDL(version_log.LOG_DDL)).coalesce(1)
    frame.write.parquet(join(checkpoints_uri(root), f"trim={horizon}"))


def _deleted(delete, uri: str) -> bool:
    """A failed deletion costs space only (the next trim tries again): logged, not raised."""
    try:
        delete(uri)
        return True
    except Exception as error:  # noqa: BLE001 - space only
        logger.warning("could not delete %s of the commit log: %s", uri, error)
        return False
