"""The commit log's files as a reader sees them: its checkpoints, trim markers and commits, listed and read through
a Spark session (`SparkLogFiles`: classic or Spark Connect, any scheme) or with pyarrow on this machine
(`LocalLogFiles`: a `file://` warehouse, no JVM). `log_snapshot.read_snapshot` reads the live state from either.

    <root>/_commits/commit=<id>/part-*.parquet              a commit
    <root>/_checkpoints/checkpoint=<n>-<id>/part-*.parquet  a checkpoint: the live state of n commits
    <root>/_checkpoints/trim=<checkpoint>/part-*.parquet    a trim marker: commits that checkpoint covers may be gone

A directory is listed once it holds a data file: a commit, checkpoint or marker being written has only Spark's
`_temporary` files (hidden names are skipped), so it is not seen until its file is renamed into place.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from fair_pipeline.platform.engines import version_log
from fair_pipeline.platform.engines.version_log import Entry, live
from fair_pipeline.platform.engines.warehouse_files import join, listing_uri, local_path

CHECKPOINT_DIR = "_checkpoints"
COVERED = "covered"  # a checkpoint's row naming a commit its entries were taken from
BASED_ON = "based_on"  # a checkpoint's row naming a checkpoint its entries include (its base, and the base's own)
_CHILD = re.compile(r"/(commit|checkpoint|trim)=([^/]+)/[^/_.][^/]*$")


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's live entries, the commits they were taken from and the checkpoints they include."""

    state: dict[tuple[str, str, str], Entry]
    covered: frozenset[str]
    based_on: frozenset[str]

    def usable(self, name: str, markers: set[str]) -> bool:
        """Whether this checkpoint, named `name`, includes every trim marker's checkpoint: only then does it hold
        the entries of every commit a trim may have deleted."""
        return markers <= self.based_on | {name}


def checkpoints_uri(root: str) -> str:
    return join(root, CHECKPOINT_DIR)


def count_of(name: str) -> int:
    """The commits a checkpoint's entries reflect: the number its name starts with."""
    return int(name.split("-", 1)[0])


def checkpoint_rows(checkpoint: Checkpoint) -> list[dict]:
    """A checkpoint as rows of the log's schema (kind "covered" and "based_on" rows beside the entries)."""
    rows = [dataclasses.asdict(e) for e in checkpoint.state.values()]
    empty = {field: None for field, _ in version_log.FIELDS}
    rows += [{**empty, "kind": COVERED, "commit_id": commit} for commit in sorted(checkpoint.covered)]
    rows += [{**empty, "kind": BASED_ON, "name": name} for name in sorted(checkpoint.based_on)]
    return rows


def parse_checkpoint(rows) -> Checkpoint:
    entries, covered, based_on = [], set(), set()
    for row in rows:
        if row["kind"] == COVERED:
            covered.add(row["commit_id"])
        elif row["kind"] == BASED_ON:
            based_on.add(row["name"])
        else:
            entries.append(Entry(**{field: row[field] for field, _ in version_log.FIELDS}))
    return Checkpoint(live(entries), frozenset(covered), frozenset(based_on))


class SparkLogFiles:
    """The log through a session: listed by Spark's file index (the driver's Hadoop client, or Spark's parallel
    listing; see `log_snapshot.listing_by_the_driver`), read by its executors."""

    def __init__(self, spark, root: str):
        self.spark, self.root = spark, root

    def checkpoints(self) -> tuple[set[str], set[str]]:
        """(checkpoint names, names of the checkpoints of the trim markers)."""
        listed = self._listed(checkpoints_uri(self.root))
        return listed.get("checkpoint", set()), listed.get("trim", set())

    def commits(self) -> set[str]:
        return self._listed(version_log.log_uri(self.root)).get("commit", set())

    def checkpoint(self, name: str) -> Checkpoint:
        frame = self.spark.read.schema(version_log.LOG_DDL).parquet(join(checkpoints_uri(self.root),
                                                                         f"checkpoint={name}"))
        return parse_checkpoint(row.asDict() for row in frame.collect())

    def read_commits(self, commit_ids: Sequence[str]) -> list[Entry]:
        return version_log.read_commits(self.spark, self.root, commit_ids)

    def _listed(self, uri: str) -> dict[str, set[str]]:
        """The ids of the children of `uri` that hold a data file, by the kind in their name. No partition
        discovery (`recursiveFileLookup`): checkpoints and trim markers sit side by side under other names."""
        from pyspark.errors import AnalysisException

        try:
            files = (self.spark.read.schema(version_log.LOG_DDL).option("recursiveFileLookup", "true")
                     .parquet(listing_uri(uri)).inputFiles())
        except AnalysisException as error:
            if version_log.is_missing_path(error):  # none written yet
                return {}
            raise
        return _by_kind(files)


class LocalLogFiles:
    """The log of a `file://` warehouse read with pyarrow on this machine (no JVM), with Spark's listing rules."""

    def __init__(self, root: str):
        self.root = root

    def checkpoints(self) -> tuple[set[str], set[str]]:
        listed = _by_kind(self._files(checkpoints_uri(self.root)))
        return listed.get("checkpoint", set()), listed.get("trim", set())

    def commits(self) -> set[str]:
        return _by_kind(self._files(version_log.log_uri(self.root))).get("commit", set())

    def checkpoint(self, name: str) -> Checkpoint:
        return parse_checkpoint(self._rows(join(checkpoints_uri(self.root), f"checkpoint={name}")))

    def read_commits(self, commit_ids: Sequence[str]) -> list[Entry]:
        rows = [row for commit in commit_ids for row in self._rows(join(version_log.log_uri(self.root),
                                                                        f"commit={commit}"))]
        return list(live(Entry(**row) for row in rows).values())

    @staticmethod
    def _files(uri: str) -> list[str]:
        """The data files one level down (`<uri>/<child>/<file>`), as URIs; none for a missing directory. A child
        deleted while it is listed is left out, as a listing a moment later would."""
        path = local_path(uri)
        if not path.is_dir():
            return []
        files = []
        for child in path.iterdir():
            try:
                files += [f"{uri}/{child.name}/{file.name}" for file in child.iterdir() if file.is_file()]
            except (FileNotFoundError, NotADirectoryError):
                continue
        return files

    @staticmethod
    def _rows(uri: str) -> list[dict]:
        """Every row of the data files in the directory; a directory removed meanwhile raises FileNotFoundError."""
        import pyarrow.parquet as pq

        path = local_path(uri)
        files = sorted(f for f in path.iterdir() if f.is_file() and not f.name.startswith(("_", ".")))
        fields = [field for field, _ in version_log.FIELDS]
        return [row for f in files for row in pq.read_table(f, columns=fields).to_pylist()]


def _by_kind(files) -> dict[str, set[str]]:
    listed: dict[str, set[str]] = {}
    for path in files:
        match = _CHILD.search(path)
        if match:
            listed.setdefault(match.group(1), set()).add(match.group(2))
    return listed
