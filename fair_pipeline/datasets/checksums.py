"""Integrity check for the files shipped under data/external/.

Each dataset folder carries a ``SHA256SUMS`` file in ``sha256sum`` format
(``<hex digest>  <relative path>``). Loaders call :func:`verified_path` before
reading, so a truncated, edited or missing file fails loudly instead of
silently changing every downstream figure.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from fair_pipeline.platform import settings

SUMS_FILE = "SHA256SUMS"
_CHUNK = 1 << 20


class DatasetFileError(ValueError):
    """A shipped dataset file is missing, unlisted or does not match its checksum."""


def external_root(root: Path | str | None = None) -> Path:
    """The folder holding the shipped datasets (default: ``<repo>/data/external``)."""
    return Path(root) if root is not None else settings.EXTERNAL_DATA


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def expected_sums(dataset_dir: Path) -> dict[str, str]:
    """Parse ``<dataset_dir>/SHA256SUMS`` into {relative path: hex digest}."""
    sums_path = dataset_dir / SUMS_FILE
    if not sums_path.is_file():
        raise DatasetFileError(f"checksum list {sums_path} is missing")
    sums: dict[str, str] = {}
    for lineno, line in enumerate(sums_path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise DatasetFileError(f"{sums_path}:{lineno}: expected '<sha256>  <path>', got {line!r}")
        sums[parts[1].lstrip("*").strip()] = parts[0].lower()
    return sums


def verified_path(dataset_dir: Path, relative: str) -> Path:
    """Return ``dataset_dir / relative`` after checking it against SHA256SUMS.

    Raises DatasetFileError naming the file when it is missing, not listed in
    SHA256SUMS, or its sha256 differs from the recorded one.
    """
    path = dataset_dir / relative
    if not path.is_file():
        raise DatasetFileError(
            f"dataset file {path} is missing; it ships with the repository under data/external/ "
            "(see the PROVENANCE.md next to it for where it came from)"
        )
    sums = expected_sums(dataset_dir)
    if relative not in sums:
        raise DatasetFileError(f"dataset file {path} is not listed in {dataset_dir / SUMS_FILE}")
    actual = sha256_of(path)
    if actual != sums[relative]:
        raise DatasetFileError(
            f"dataset file {path} has sha256 {actual}, expected {sums[relative]} "
            f"(from {dataset_dir / SUMS_FILE}); the file was modified or truncated"
        )
    return path
