"""Fingerprints of landing days and of the item catalogues: what decides whether `run` / `backfill` re-ingest.

A fingerprint is the SHA-256 of every file's path under the landing root, size and content hash, in path order: a
day is re-ingested when a file was added, removed, renamed or rewritten with other bytes, and never because its
modification time moved (a copy, a restore from backup). The ingestion assets record each day's fingerprint as their
materialization's data version (Dagster's `DataVersion`: the lineage view marks what was built from older data as
stale) and in their metadata by day, which is what `runner.landing_changes` compares against.

Content hashes come from a `HashCache` when one is given (`ingestion.hash_cache`: only files that are new or were
touched since they were last hashed are read); without one, every file is read.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from pathlib import Path

from fair_pipeline.ingestion import contract
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


def combined(fingerprints: dict[str, str]) -> str:
    """One data version for several days' fingerprints (a run that loads a range of days)."""
    if len(fingerprints) == 1:
        return next(iter(fingerprints.values()))
    return hashlib.sha256("".join(f"{day}={fp}\n" for day, fp in sorted(fingerprints.items())).encode()).hexdigest()
