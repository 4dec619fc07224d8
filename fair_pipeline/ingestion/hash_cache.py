"""A cache of landing files' content hashes, so that deciding what changed reads only new or touched files.

An entry is trusted only while the file's (size, mtime_ns, ctime_ns, inode, device) are what they were when its
bytes were hashed: rewriting a file changes its size, its mtime or its ctime (even a write that restores the old
mtime moves ctime), so a touched file is hashed again; a file copied or restored from a backup gets a new inode and
is hashed again too (its fingerprint, which holds only paths, sizes and content hashes, stays the same).

The cache is a JSON file beside the Dagster instance (`landing_hashes.json` in $DAGSTER_HOME). It is written to a
temporary file and renamed over the old one, under an exclusive lock on a lock file that also covers re-reading
and merging what another run saved meanwhile, so two concurrent runs neither lose each other's entries nor see a
half-written file. Its entries carry a SHA-256 checksum: a file that does not parse or whose checksum does not match
is not trusted; every hash is recomputed and the cache is rewritten.

A file modified less than `RACY_NS` before it was hashed is not cached: on file systems that stamp times coarsely,
a second write within the same tick would leave its stat unchanged (git's "racy" index entries).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from fair_pipeline.platform.file_lock import exclusive_lock

CACHE_NAME = "landing_hashes.json"
FORMAT = 1
RACY_NS = 2_000_000_000
_CHUNK = 1 << 20

log = logging.getLogger(__name__)


def content_hash(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stat_key(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


def _checksum(entries: dict) -> str:
    return hashlib.sha256(json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _valid_entry(value) -> bool:
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[1], str) and len(value[1]) == 64
            and isinstance(value[0], list) and len(value[0]) == 5 and all(type(v) is int for v in value[0]))


def read_entries(path: Path) -> tuple[dict[str, list], str | None]:
    """(entries, why the file was not trusted or None): {absolute path: [stat key, sha256]}. A missing file is an
    empty cache; one that does not parse, has another format, or fails its checksum is an empty cache with a reason."""
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as error:
        return {}, f"unreadable ({error})"
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        return {}, "not a hash cache of this format"
    entries = data["entries"]
    if data.get("checksum") != _checksum(entries):
        return {}, "checksum mismatch"
    if not all(isinstance(k, str) and _valid_entry(v) for k, v in entries.items()):
        return {}, "malformed entries"
    return entries, None


class HashCache:
    """Content hashes of files by absolute path, read from and saved to `path` (None: kept in memory only)."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path is not None else None
        self.entries: dict[str, list] = {}
        self.fresh: dict[str, list] = {}  # entries hashed by this process, to merge into the saved file
        self.hashed: list[Path] = []  # files whose bytes this process read
        self.rebuild = False  # the file was not trusted: rewrite it even when nothing new was hashed
        if self.path is not None:
            self.entries, why = read_entries(self.path)
            if why:
                log.warning("landing hash cache %s not trusted (%s): every landing file is hashed again", self.path, why)
                self.rebuild = True

    @classmethod
    def beside(cls, instance) -> HashCache:
        """The cache in the Dagster instance's directory (an instance without one: in memory only)."""
        root = getattr(instance, "root_directory", None)
        return cls(Path(root) / CACHE_NAME if root else None)

    def digest(self, path: Path) -> str:
        """The SHA-256 of `path`'s bytes: from the cache while its stat key matches, else read and hashed."""
        key = str(Path(path).absolute())
        before = os.stat(path)
        entry = self.entries.get(key)
        if entry is not None and entry[0] == _stat_key(before):
            return entry[1]
        started = time.time_ns()
        value = content_hash(Path(path))
        self.hashed.append(Path(path))
        after = os.stat(path)
        if _stat_key(after) == _stat_key(before) and before.st_mtime_ns < started - RACY_NS:
            self.entries[key] = self.fresh[key] = [_stat_key(before), value]
        else:  # changed while read, or too recent to trust its stat: hashed again next time
            self.entries.pop(key, None)
        return value

    def save(self) -> None:
        """Merge this process's new entries into the cache file (under its lock, atomically); entries of files that
        no longer exist or whose stat moved are dropped. Nothing to save: the file is left as it is."""
        if self.path is None or not (self.fresh or self.rebuild):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            saved, _ = read_entries(self.path)
            merged = {**saved, **self.fresh}
            merged = {k: v for k, v in merged.items() if _still(k, v)}
            _write_atomic(self.path, {"format": FORMAT, "checksum": _checksum(merged), "entries": merged})
        self.fresh, self.rebuild = {}, False


def _still(path: str, entry: list) -> bool:
    try:
        return _stat_key(os.stat(path)) == entry[0]
    except OSError:
        return False


def _write_atomic(path: Path, data: dict) -> None:
    descriptor, temporary = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(data, handle, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
