"""Tell a full disk apart from other failures, in one line the CLI can end with.

Why: DuckDB, SQLite (Dagster's instance, the MLflow store) and MLflow's artifact store all write under
$FAIR_PIPELINE_HOME, and each reports a full disk its own way; SQLite on a full tmpfs says only "disk I/O
error". So besides ENOSPC anywhere in the error chain, the free space of the home's file system is checked.
"""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

# Below this much free space the home's disk counts as full: one more warehouse write or model artifact fails.
LOW_FREE_BYTES = 16 * 2**20
_FULL_MESSAGES = ("No space left on device", "database or disk is full")


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _says_full(evidence: BaseException | str) -> bool:
    if isinstance(evidence, str):
        return any(message in evidence for message in _FULL_MESSAGES)
    return any(getattr(e, "errno", None) == errno.ENOSPC or _says_full(str(e)) for e in _chain(evidence))


# What an I/O failure says on its way up (SQLite: "disk I/O error", DuckDB: "IO Error: ...", an OSError printed in
# a step's failure summary: "[Errno 5] ..."), besides an OSError itself.
_IO_MESSAGES = ("disk I/O error", "IO Error", "[Errno ")


def is_io_failure(error: BaseException | str) -> bool:
    """Whether `error` (or one of its causes, or a failure summary's text) is a failed read or write, not, say, a
    bug that happened while the disk was nearly full: then a full disk explains it, and its traceback would only
    bury the one line that says what to do."""
    if isinstance(error, str):
        return _says_full(error) or any(message in error for message in _IO_MESSAGES)
    return _says_full(error) or any(isinstance(e, OSError) or any(m in str(e) for m in _IO_MESSAGES)
                                    for e in _chain(error))


def free_bytes(path: Path) -> int:
    """Free space of the file system holding `path` (its nearest existing ancestor)."""
    path = Path(path).resolve()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def disk_full_line(home: Path, *evidence: BaseException | str) -> str | None:
    """One line saying the home's disk is full and what to do, when the evidence says so (ENOSPC, "No space left",
    "database or disk is full") or it is an I/O failure on a disk with less than LOW_FREE_BYTES free. Any other
    error (a SyntaxError, a bad column) is never blamed on the disk, however full it is."""
    if not any(_says_full(e) for e in evidence):
        if not any(is_io_failure(e) for e in evidence) or free_bytes(home) >= LOW_FREE_BYTES:
            return None
    free = free_bytes(home)
    return (f"the disk holding {home} is full ({free / 2**20:.1f} MB free): free some space and run the same "
            "command again (it recovers the interrupted run)")
