"""Fingerprints of landing days and of the item catalogues: what decides whether `run` / `backfill` re-ingest.

A fingerprint is the SHA-256 of every file's path under the landing root, size and content hash, in path order: a
day is re-ingested when a file was added, removed, renamed or rewritten with other bytes, and never because its
modification time moved (a copy, a restore from backup). The ingestion assets record each day's fingerprint as their
materialization's data version (Dagster's `DataVersion`: the lineage view marks what was built from older data as
stale) and in their metadata by day, which is what `runner.landing_changes` compares against.

Content hashes come from a `HashCache` when one is given (`ingestion.hash_cache`: only files that are new or were
touched since they were last hashed are read); without one, every file is read.

A landing read through Spark (a URI, `ingestion.landing_uris`) is fingerprinted from its files' metadata, never their
bytes (`status_fingerprint`): path, size, and the file system's checksum where it keeps one (HDFS), else the
modification time. There a copy or a restore with a new modification time re-ingests the day (the same rows again),
and a rewrite within the same millisecond that keeps the size is not seen.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from pathlib import Path

from fair_pipeline.ingestion import contract, landing_uris
from fair_pipeline.ingestion.catalogue_dates import UNDATED, deliveries
from fair_pipeline.ingestion.hash_cache import HashCache
from fair_pipeline.ingestion.landing import landing_files, partition_dir


def files_fingerprint(landing: Path, files: Iterable[Path], cache: HashCache | None = None) -> str:
    """SHA-256 over (path relative to `landing`, size, content SHA-256) of `files`, in path order."""
    root = Path(landing)
    cache = cache or HashCache(None)
    digest = hashlib.sha256()
    for path in sorted(Path(f) for f in files):
        digest.update(f"{path.relative_to(root).as_posix()}\0{path.stat().st_size}\0{cache.digest(path)}\n".encode())
    return digest.hexdigest()


def source_day_files(landing: Path, source: str, day: dt.date | str) -> list[Path]:
    """What the ingestion of `source` reads for `day`: its landing files and its extras."""
    extras = Path(landing) / contract.EXTRAS_DIR / source / f"date={day}"
    return landing_files(partition_dir(landing, source, day)) + landing_files(extras)


def source_day_fingerprint(landing: Path, source: str, day: dt.date | str, cache: HashCache | None = None) -> str:
    return files_fingerprint(landing, source_day_files(landing, source, day), cache)


def catalogue_fingerprint(landing: Path, cache: HashCache | None = None) -> str:
    """Every catalogue delivery's files (dated or not)."""
    return files_fingerprint(landing, landing_files(Path(landing) / contract.ITEMS_DIR), cache)


def delivery_fingerprints(landing: Path, cache: HashCache | None = None) -> dict[str, str]:
    """Each catalogue delivery's fingerprint by its day (`UNDATED` for an undated catalogue): which days read a
    changed catalogue (`catalogue_dates.holding_delivery`)."""
    return {str(d.day) if d.day else UNDATED: files_fingerprint(landing, d.files, cache) for d in deliveries(landing)}


def status_fingerprint(fs, landing: str, files: Iterable[str]) -> str:
    """SHA-256 over (path relative to the landing URI, size, checksum or else modification time) of `files`, in
    path order, from the file system `fs` (`warehouse_files`: the Spark session's Hadoop FileSystem)."""
    files = sorted(files)
    digest = hashlib.sha256()
    for relative, uri in zip(landing_uris.stored_paths(landing, files), files):
        size, modified_ms, checksum = fs.status(uri)
        digest.update(f"{relative}\0{size}\0{checksum or f'mtime={modified_ms}'}\n".encode())
    return digest.hexdigest()


def uri_source_day_fingerprint(fs, landing: str, source: str, day: dt.date | str) -> str:
    """As `source_day_fingerprint`, for a landing URI: the day's files and its extras, from their metadata."""
    files = (landing_uris.landing_files(fs, landing_uris.partition_uri(landing, source, day))
             + landing_uris.extras_files(fs, landing, source, day))
    return status_fingerprint(fs, landing, files)


def uri_catalogue_fingerprints(fs, landing: str) -> tuple[str, dict[str, str]]:
    """As (`catalogue_fingerprint`, `delivery_fingerprints`), for a landing URI, from the files' metadata."""
    found = landing_uris.catalogue_deliveries(fs, landing)
    every = status_fingerprint(fs, landing, [f for d in found for f in d.files])
    return every, {str(d.day) if d.day else UNDATED: status_fingerprint(fs, landing, d.files) for d in found}


def combined(fingerprints: dict[str, str]) -> str:
    """One data version for several days' fingerprints (a run that loads a range of days)."""
    if len(fingerprints) == 1:
        return next(iter(fingerprints.values()))
    return hashlib.sha256("".join(f"{day}={fp}\n" for day, fp in sorted(fingerprints.items())).encode()).hexdigest()
