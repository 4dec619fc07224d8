"""What the tests of the commit log compare with: every commit as it was written (recorded where the log's one writer
writes it), replayed apart from the log's files, which trimming deletes; and the log's files on disk."""
from __future__ import annotations

import pyarrow.parquet as pq

from fair_pipeline.platform.engines import log_files, version_log, warehouse_files


class Journal:
    """Every entry of every commit written while it records (`record` wraps `version_log._write_commit`)."""

    def __init__(self):
        self.entries: list[version_log.Entry] = []

    def record(self, monkeypatch) -> Journal:
        write = version_log._write_commit

        def recorded(spark, root, commit_id, entries):
            write(spark, root, commit_id, entries)
            self.entries.extend(entries)

        monkeypatch.setattr(version_log, "_write_commit", recorded)
        return self

    def state(self) -> dict:
        return version_log.live(self.entries)


def on_disk(root: str, kind: str) -> list[str]:
    """Names of the log's directories of `kind` (commit, checkpoint, trim) that hold a data file."""
    folder = version_log.log_uri(root) if kind == "commit" else log_files.checkpoints_uri(root)
    path = warehouse_files.local_path(folder)
    return sorted(p.name.split("=", 1)[1] for p in path.glob(f"{kind}=*") if any(p.glob("part-*")))


def checkpoint_rows(root: str, name: str) -> list[dict]:
    folder = warehouse_files.local_path(log_files.checkpoints_uri(root)) / f"checkpoint={name}"
    return [row for f in sorted(folder.glob("part-*.parquet")) for row in pq.read_table(f).to_pylist()]
