"""Reading and writing landing files (`landing/<source>/date=YYYY-MM-DD/*.parquet`)."""
from __future__ import annotations

import datetime as dt
import os
import stat
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract
# The day folders' one parser and its error live in the platform, whose partitions read the first landed day too.
from fair_pipeline.platform.day_folders import DAY_FOLDER_PREFIX, LandingFileError, folder_day


def partition_dir(landing: Path, source: str, day: dt.date | str) -> Path:
    return Path(landing) / source / f"{DAY_FOLDER_PREFIX}{day}"


PARQUET_SUFFIX = ".parquet"


def skipped_name(name: str) -> bool:
    """A name starting with "." or "_" is a file still being written (`.tmp-*`) or not meant for ingestion
    (Spark's `_SUCCESS`, `_temporary/`, checksums like `.part-0.parquet.crc`)."""
    return name.startswith((".", "_"))


def is_hive_folder(name: str) -> bool:
    key, equals, value = name.partition("=")
    return bool(equals and key and value)


def discover(folder: Path) -> tuple[list[Path], list[str]]:
    """The Parquet files under a landing folder (sorted) and why any other entry can't be read.

    A file is Parquet when its name ends in `.parquet` in any case (`part-1.PARQUET`). Files in `key=value`
    subfolders (`hour=01/x.parquet`, as hive-style writers lay them out) belong to the folder's day; a Parquet file
    in any other subfolder, a `.parquet` name that is not a regular file (a FIFO, a socket, a folder, a broken
    link) and an unreadable folder are refused by name; none is ever opened here. Hidden and temp names are skipped."""
    files, refused = [], []
    folder = Path(folder)
    if not folder.is_dir():
        return [], []
    for root, dirs, names in os.walk(folder, onerror=lambda error: refused.append(f"{error.filename}: {error.strerror}")):
        relative = Path(root).relative_to(folder)
        dirs[:] = sorted(d for d in dirs if not skipped_name(d))
        odd_folder = next((part for part in relative.parts if not is_hive_folder(part)), None)
        for name in sorted(names):
            path = Path(root) / name
            if skipped_name(name) or not name.lower().endswith(PARQUET_SUFFIX):
                continue
            if odd_folder is not None:
                refused.append(f"{path}: in subfolder {odd_folder!r}, which is not a hive-style key=value folder")
                continue
            try:
                mode = os.stat(path).st_mode  # follows links; never opens the file (a FIFO's open would block)
            except OSError as error:
                refused.append(f"{path}: {error.strerror}")
                continue
            if not stat.S_ISREG(mode):
                refused.append(f"{path}: not a regular file")
                continue
            files.append(path)
        for name in dirs:  # a folder named like a Parquet file is not one
            if name.lower().endswith(PARQUET_SUFFIX):
                refused.append(f"{Path(root) / name}: not a regular file (a folder)")
    return sorted(files), refused


def landing_files(folder: Path) -> list[Path]:
    """The Parquet files of a landing folder that can be read (see `discover`); for listing what is landed."""
    return discover(folder)[0]


def checked_landing_files(folder: Path) -> list[Path]:
    """The Parquet files of a landing folder, for loading: any entry `discover` refuses raises LandingFileError
    naming it, so no file is skipped silently."""
    files, refused = discover(folder)
    if refused:
        raise LandingFileError(f"landing folder {folder} has files ingestion can't read: {'; '.join(refused)}")
    return files


def partition_files(landing: Path, source: str, day: dt.date | str) -> list[Path]:
    """The Parquet files of one day, sorted; raises FileNotFoundError naming the folder if there are none, and
    LandingFileError naming any file that can't be read."""
    folder = partition_dir(landing, source, day)
    files = checked_landing_files(folder)
    if not files:
        raise FileNotFoundError(f"no landing files for source {source!r}, partition {day}: {folder}/*.parquet not found")
    return files


def landed_dates(landing: Path, source: str) -> list[str]:
    """The days (YYYY-MM-DD) of `source` with a readable landing file; a `date=` folder not named as a day raises
    LandingFileError (`folder_day`), files that can't be read are left to the load that refuses them by name."""
    folder = Path(landing) / source
    days = [(folder_day(p), p) for p in folder.glob(f"{DAY_FOLDER_PREFIX}*") if p.is_dir()]
    return sorted(day.isoformat() for day, path in days if landing_files(path))


def complete_days(landing: Path) -> list[str]:
    """Dates with landing files for every source (a day missing a source cannot be ingested)."""
    per_source = [set(landed_dates(landing, source)) for source in contract.SOURCES]
    return sorted(set.intersection(*per_source)) if per_source else []


def missing_sources(landing: Path, day: dt.date | str) -> list[str]:
    """The sources (observational, randomized) with no landing file for partition `day`."""
    from fair_pipeline.ingestion.contract import SOURCES

    return [source for source in SOURCES if not landing_files(partition_dir(landing, source, day))]


def truth_dir(landing: Path, day: dt.date | str | None = None) -> Path:
    """The simulator's ground truth of partition `day` (evaluation only): `landing/_truth/date=D/`, written per
    simulated day so that a later simulation never changes an earlier day's truth; else `landing/_truth/` (homes
    simulated before truth was dated keep their one truth for the days that have none of their own)."""
    root = Path(landing) / contract.TRUTH_DIR
    dated = root / f"date={day}"
    return dated if day is not None and dated.is_dir() else root


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write via a temp file + rename so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".parquet")
    os.close(fd)
    try:
        # store_schema=False: dictionary-encoded string columns read back as plain strings.
        # LZ4 writes about twice as fast as zstd for ~8% larger files (measured on simulator days).
        pq.write_table(table, tmp, compression="lz4", store_schema=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def conform(table: pa.Table) -> pa.Table:
    """Select and cast to the impression contract; names every missing column."""
    missing = [c for c in contract.IMPRESSION_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"landing table lacks contract columns {missing}; expected {list(contract.IMPRESSION_COLUMNS)}")
    table = table.select(list(contract.IMPRESSION_COLUMNS))
    # Dictionary-encoded strings already satisfy a string column; casting would materialize them.
    target = pa.schema(
        [
            table.schema.field(f.name) if _is_dictionary_string(table.schema.field(f.name).type) and f.type == pa.string() else f
            for f in contract.IMPRESSION_SCHEMA
        ]
    )
    return table.cast(target)


def _is_dictionary_string(arrow_type: pa.DataType) -> bool:
    return pa.types.is_dictionary(arrow_type) and pa.types.is_string(arrow_type.value_type)
