"""The landing hash cache: an unchanged landing is fingerprinted without reading a byte of it, a touched or rewritten
file is read again, a corrupt cache is rebuilt, and two runs saving at once lose nothing."""
from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from fair_pipeline.ingestion.fingerprints import files_fingerprint, source_day_fingerprint
from fair_pipeline.ingestion.hash_cache import CACHE_NAME, HashCache, content_hash, read_entries
from tests.landing_reads import watch

DAY = "2026-01-02"
OLD = time.time_ns() - 3_600 * 10**9  # an hour ago: not "racy" (see hash_cache.RACY_NS)


def _write(path: Path, data: bytes, mtime_ns: int = OLD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    root = tmp_path / "landing"
    for name in ("part-0.parquet", "part 1 (copy).PARQUET"):
        _write(root / "observational" / f"date={DAY}" / name, name.encode() * 1000)
    _write(root / "_extras" / "observational" / f"date={DAY}" / "extra.parquet", b"extras")
    return root


def _fresh_fingerprint(landing: Path) -> str:
    return source_day_fingerprint(landing, "observational", DAY)  # no cache: every file read


def test_an_unchanged_landing_is_fingerprinted_without_reading_it(landing: Path, tmp_path: Path):
    cache_file = tmp_path / "dagster_home" / CACHE_NAME
    first = HashCache(cache_file)
    expected = source_day_fingerprint(landing, "observational", DAY, first)
    assert len(first.hashed) == 3
    first.save()
    assert expected == _fresh_fingerprint(landing)
    with watch(landing) as reads:
        second = HashCache(cache_file)
        assert source_day_fingerprint(landing, "observational", DAY, second) == expected
    assert second.hashed == [] and reads.files == set()
    # The watcher does see reads: the fresh fingerprint opens all three files.
    with watch(landing) as reads:
        _fresh_fingerprint(landing)
    assert len(reads.files) == 3


def test_a_touched_or_rewritten_file_is_read_again(landing: Path, tmp_path: Path):
    cache_file = tmp_path / CACHE_NAME
    cache = HashCache(cache_file)
    before = source_day_fingerprint(landing, "observational", DAY, cache)
    cache.save()
    path = landing / "observational" / f"date={DAY}" / "part-0.parquet"
    # Touched: same bytes, new mtime. Read again, same fingerprint (it holds no time).
    os.utime(path, ns=(OLD + 10**9, OLD + 10**9))
    cache = HashCache(cache_file)
    assert source_day_fingerprint(landing, "observational", DAY, cache) == before
    assert cache.hashed == [path]
    cache.save()
    # Rewritten with other bytes of the same size, its old mtime put back (as `touch -r` or a sloppy copier
    # would): the size and mtime match the cache, the ctime does not.
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    stat = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    cache = HashCache(cache_file)
    changed = source_day_fingerprint(landing, "observational", DAY, cache)
    assert cache.hashed == [path] and changed != before and changed == _fresh_fingerprint(landing)
    # A new file of that day is read, and only it.
    added = _write(path.with_name("part-2.parquet"), b"new")
    cache.save()
    cache = HashCache(cache_file)
    assert source_day_fingerprint(landing, "observational", DAY, cache) == _fresh_fingerprint(landing)
    assert cache.hashed == [added]


def test_a_file_written_just_now_is_not_cached(landing: Path, tmp_path: Path):
    path = _write(landing / "observational" / f"date={DAY}" / "part-9.parquet", b"recent", time.time_ns())
    cache = HashCache(tmp_path / CACHE_NAME)
    assert cache.digest(path) == content_hash(path)
    cache.save()
    again = HashCache(tmp_path / CACHE_NAME)
    again.digest(path)
    assert again.hashed == [path]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "wrong hash", "other format"])
def test_a_corrupt_cache_is_not_trusted_and_is_rebuilt(landing: Path, tmp_path: Path, damage: str, caplog):
    cache_file = tmp_path / CACHE_NAME
    cache = HashCache(cache_file)
    expected = source_day_fingerprint(landing, "observational", DAY, cache)
    cache.save()
    text = cache_file.read_text()
    if damage == "truncated":
        cache_file.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        cache_file.write_bytes(b"\x00\xff" * 50)
    elif damage == "wrong hash":  # valid JSON, a plausible hash: only the checksum tells
        data = json.loads(text)
        for entry in data["entries"].values():
            entry[1] = "0" * 64
        cache_file.write_text(json.dumps(data))
    else:
        cache_file.write_text(json.dumps({"format": 99, "entries": {}}))
    rebuilt = HashCache(cache_file)
    assert "not trusted" in caplog.text
    assert source_day_fingerprint(landing, "observational", DAY, rebuilt) == expected
    assert len(rebuilt.hashed) == 3
    rebuilt.save()
    entries, why = read_entries(cache_file)
    assert why is None and len(entries) == 3


def test_entries_of_removed_files_are_dropped(landing: Path, tmp_path: Path):
    cache = HashCache(tmp_path / CACHE_NAME)
    files = sorted((landing / "observational" / f"date={DAY}").iterdir())
    files_fingerprint(landing, files, cache)
    cache.save()
    files[0].unlink()
    cache = HashCache(tmp_path / CACHE_NAME)
    _write(landing / "other.parquet", b"x")
    files_fingerprint(landing, [landing / "other.parquet"], cache)
    cache.save()
    assert sorted(read_entries(tmp_path / CACHE_NAME)[0]) == sorted(str(p) for p in [files[1], landing / "other.parquet"])


def _hash_and_save(args: tuple[str, list[str]]) -> None:
    """One run per file: read the cache, hash the file, save (merging with what the other process saved)."""
    cache_file, paths = args
    for path in paths:
        cache = HashCache(Path(cache_file))
        assert not cache.rebuild, "a run read a half-written or damaged cache"
        cache.digest(Path(path))
        cache.save()


def test_two_runs_saving_at_once_keep_each_others_entries(tmp_path: Path):
    """Two processes hash disjoint files, saving after each, at the same time: the cache file is never
    half-written (each read verifies its checksum), and no save drops an entry the other one made."""
    files = [str(_write(tmp_path / "landing" / f"{k}.parquet", os.urandom(100))) for k in range(120)]
    cache_file = str(tmp_path / "dagster_home" / CACHE_NAME)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_hash_and_save, [(cache_file, files[:60]), (cache_file, files[60:])])
    entries, why = read_entries(Path(cache_file))
    assert why is None and sorted(entries) == sorted(files)
    assert all(entries[f][1] == content_hash(Path(f)) for f in files)
    assert not [p for p in Path(cache_file).parent.iterdir() if p.name.endswith(".tmp")]
