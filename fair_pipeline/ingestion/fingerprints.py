"""Fingerprints of landing days and of the item catalogues: what decides whether `run` / `backfill` re-ingest.

A fingerprint is the SHA-256 of every file's path under the landing root, size and content hash, in path order: a
day is re-ingested when a file was added, removed, renamed or rewritten with other bytes, and never because its
modification time moved (a copy, a restore from backup). The ingestion assets record each day's fingerprint as their
materialization's data version (Dagster's `DataVersion`: the lineage view marks what was built from older data as
stale) and in their metadata by day, which is what `ingested_fingerprints` compares against.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from pathlib import Path

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import landing_files, partition_dir

_CHUNK = 1 << 20


def _content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_fingerprint(landing: Path, files: Iterable[Path]) -> str:
    """SHA-256 over (path relative to `landing`, size, content SHA-256) of `files`, in path order."""
    root = Path(landing)
    digest = hashlib.sha256()
    for path in sorted(Path(f) for f in files):
        digest.update(f"{path.relative_to(root).as_posix()}\0{path.stat().st_size}\0{_content_hash(path)}\n".encode())
    return digest.hexdigest()


def source_day_files(landing: Path, source: str, day: dt.date | str) -> list[Path]:
    """What the ingestion of `source` reads for `day`: its landing files and its extras."""
    extras = Path(landing) / contract.EXTRAS_DIR / source / f"date={day}"
    return landing_files(partition_dir(landing, source, day)) + landing_files(extras)


def source_day_fingerprint(landing: Path, source: str, day: dt.date | str) -> str:
    return files_fingerprint(landing, source_day_files(landing, source, day))


def catalogue_fingerprint(landing: Path) -> str:
    """Every catalogue delivery's files (dated or not)."""
    return files_fingerprint(landing, landing_files(Path(landing) / contract.ITEMS_DIR))


def combined(fingerprints: dict[str, str]) -> str:
    """One data version for several days' fingerprints (a run that loads a range of days)."""
    if len(fingerprints) == 1:
        return next(iter(fingerprints.values()))
    return hashlib.sha256("".join(f"{day}={fp}\n" for day, fp in sorted(fingerprints.items())).encode()).hexdigest()
