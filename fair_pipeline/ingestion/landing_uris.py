"""A landing given as a URI (`file:///...`, `hdfs://...`, any scheme the Spark session's Hadoop client knows), for
the Spark loader: the folders are listed through a file system of `platform.engines.warehouse_files` (the session's
Hadoop FileSystem on a classic session), never through this machine's paths, with the discovery rules of
`landing.discover`: `.parquet` in any case; hive-style `key=value` subfolders belong to the day; a Parquet file in
any other subfolder, a folder named like a Parquet file, a file that is not a regular file and a folder that cannot
be listed are refused by name; hidden and temporary names (`.x`, `_x`) are skipped. Hadoop reports a FIFO as a file
of 0 bytes: a `.parquet` file of 0 bytes is refused as not being a Parquet file (the smallest is 12 bytes).

Files are named by their URIs (the landing URI joined with the names as listed, never percent-encoded: Hadoop takes
a URI's path as written); `source_file` stores each one's path relative to the landing, as for a local landing.
"""
from __future__ import annotations

import datetime as dt
from pathlib import PurePosixPath

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue_dates import Delivery, deliveries_of
from fair_pipeline.ingestion.landing import (DAY_FOLDER_PREFIX, PARQUET_SUFFIX, LandingFileError, folder_day,
                                             is_hive_folder, skipped_name)
from fair_pipeline.platform.engines.warehouse_files import has_scheme, join, location_uri

# A Parquet file is at least its two 4-byte magic numbers and a 4-byte footer length.
MIN_PARQUET_BYTES = 12


def is_uri(landing) -> bool:
    """A landing given as a URI (read through Spark) rather than a folder of this machine."""
    return has_scheme(str(landing))


def partition_uri(landing: str, source: str, day: dt.date | str) -> str:
    return join(location_uri(landing), source, f"{DAY_FOLDER_PREFIX}{day}")


def discover(fs, folder: str) -> tuple[list[str], list[str]]:
    """The Parquet files under a landing folder URI (sorted) and why any other entry can't be read (see the module
    docstring); nothing is opened."""
    files, refused = [], []
    if not fs.exists(folder):
        return [], []
    pending = [(folder, ())]
    while pending:
        directory, relative = pending.pop()
        try:
            entries = fs.list_entries(directory)
        except OSError as error:
            refused.append(f"{directory}: {error}")
            continue
        odd_folder = next((part for part in relative if not is_hive_folder(part)), None)
        for name, kind, size in entries:
            uri = join(directory, name)
            if skipped_name(name):
                continue
            if kind == "dir":
                if name.lower().endswith(PARQUET_SUFFIX):
                    refused.append(f"{uri}: not a regular file (a folder)")
                else:
                    pending.append((uri, (*relative, name)))
                continue
            if not name.lower().endswith(PARQUET_SUFFIX):
                continue
            if odd_folder is not None:
                refused.append(f"{uri}: in subfolder {odd_folder!r}, which is not a hive-style key=value folder")
            elif kind != "file":
                refused.append(f"{uri}: not a regular file")
            elif size < MIN_PARQUET_BYTES:
                refused.append(f"{uri}: {size} bytes, not a Parquet file (a FIFO or an empty file)")
            else:
                files.append(uri)
    return sorted(files), sorted(refused)


def landing_files(fs, folder: str) -> list[str]:
    """The readable Parquet files of a landing folder URI (for listing what is landed)."""
    return discover(fs, folder)[0]


def partition_files(fs, landing: str, source: str, day: dt.date | str) -> list[str]:
    """The Parquet files of one day, sorted; as `landing.partition_files` (FileNotFoundError when there are none,
    LandingFileError naming any file that can't be read), for a landing URI."""
    folder = partition_uri(landing, source, day)
    files, refused = discover(fs, folder)
    if refused:
        raise LandingFileError(f"landing folder {folder} has files ingestion can't read: {'; '.join(refused)}")
    if not files:
        raise FileNotFoundError(f"no landing files for source {source!r}, partition {day}: {folder}/*.parquet not found")
    return files


def landed_dates(fs, landing: str, source: str) -> list[str]:
    """As `landing.landed_dates`, for a landing URI."""
    folder = join(location_uri(landing), source)
    days = [(_day(folder, name), join(folder, name)) for name in fs.list_dirs(folder)
            if name.startswith(DAY_FOLDER_PREFIX)]
    return sorted(day.isoformat() for day, uri in days if landing_files(fs, uri))


def _day(folder: str, name: str) -> dt.date | None:
    try:
        return folder_day(PurePosixPath(name))
    except LandingFileError as error:
        raise LandingFileError(str(error).replace(f"landing folder {name}", f"landing folder {join(folder, name)}", 1)) \
            from error


def complete_days(fs, landing: str) -> list[str]:
    """As `landing.complete_days`, for a landing URI: the days landed for every source."""
    per_source = [set(landed_dates(fs, landing, source)) for source in contract.SOURCES]
    return sorted(set.intersection(*per_source))


def missing_sources(fs, landing: str, day: dt.date | str) -> list[str]:
    return [source for source in contract.SOURCES if not landing_files(fs, partition_uri(landing, source, day))]


def catalogue_deliveries(fs, landing: str) -> list[Delivery]:
    """As `catalogue_dates.deliveries`, for a landing URI (each delivery's files as URIs). An undated catalogue next
    to dated ones is refused: dating it moves files, which a landing read through Spark leaves as they are."""
    folder = join(location_uri(landing), contract.ITEMS_DIR)
    files, refused = discover(fs, folder)
    if refused:
        raise LandingFileError(f"landing folder {folder} has files ingestion can't read: {'; '.join(refused)}")
    found: dict[dt.date | None, list[str]] = {}
    for uri in files:
        first, nested, _ = uri[len(folder) + 1:].partition("/")
        found.setdefault(_day(folder, first) if nested else None, []).append(uri)
    return deliveries_of(found, folder)


def extras_files(fs, landing: str, source: str, day: dt.date | str) -> list[str]:
    return landing_files(fs, partition_uri(join(location_uri(landing), contract.EXTRAS_DIR), source, day))


def stored_paths(landing: str, files: list[str]) -> list[str]:
    """Each file's path relative to the landing URI: the value `source_file` stores."""
    root = location_uri(landing) + "/"
    outside = [f for f in files if not f.startswith(root)]
    if outside:
        raise ValueError(f"{outside[0]} is not under the landing {root}")
    return [f[len(root):] for f in files]
