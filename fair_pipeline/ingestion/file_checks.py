"""Checks of whole landing files before a partition is replaced (no Dagster here): each file readable, with every
contract column once, no reserved or nested column, types of one family across the day's files, text bytes that are
UTF-8; and, when DuckDB's scan fails, the damaged file named. Each refusal is a LandingFileError naming the file and
the column."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import LandingFileError


def check_files(files: list[Path], allow_empty: bool) -> tuple[dict[str, int], set[str]]:
    """Each file readable, with every contract column once, no reserved column, no nested contract
    column, no DATE-typed ts, and rows (unless `allow_empty`). Returns each file's row count and all column names."""
    return check_footers(((path, *_footer(path)) for path in files), allow_empty)


def _footer(path: Path) -> tuple[pa.Schema, int]:
    try:
        metadata = pq.read_metadata(path)
        return metadata.schema.to_arrow_schema(), metadata.num_rows
    except Exception as error:  # noqa: BLE001 - any reader failure means an unreadable file
        raise LandingFileError(f"unreadable landing file {path}: {error}") from error


def check_footers(footers: Iterable[tuple[object, pa.Schema, int]], allow_empty: bool) -> tuple[dict[str, int], set[str]]:
    """`check_files` over (file, Arrow schema, rows) of each file, however they were read (pyarrow on this machine,
    Spark for a landing given as a URI: `spark_footers`). Refusals name the file as given."""
    rows, all_names, types_seen = {}, set(), {}
    for path, schema, num_rows in footers:
        names = schema.names
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise LandingFileError(f"landing file {path} has duplicate columns {repeated}")
        reserved = [n for n in names if n.lower() in contract.RESERVED_COLUMNS]  # DuckDB's names ignore case
        if reserved:
            raise LandingFileError(f"landing file {path} has reserved columns {reserved} (DuckDB's row-number column)")
        missing = [c for c in contract.IMPRESSION_COLUMNS if c not in names]
        if missing:
            raise LandingFileError(f"landing file {path} lacks contract columns {missing}")
        for column in contract.IMPRESSION_COLUMNS:
            file_type = schema.field(column).type
            expected = contract.IMPRESSION_SCHEMA.field(column).type
            if pa.types.is_nested(file_type) or (column == "ts" and not is_timestamp_or_text(file_type)):
                raise LandingFileError(f"landing file {path}: column {column!r} is {file_type}; expected {expected}")
            # Writers differ (pandas: large_string, int64, timestamp[ns]; pyarrow: string, int32, timestamp[us];
            # an all-NULL column: null), so types agree when their families do (`type_family`); DuckDB then reads
            # the files as one relation in the widest type and validation checks each value against the contract.
            family = type_family(file_type)
            if family == "null":
                continue
            first_path, first_type = types_seen.setdefault(column, (path, file_type))
            if type_family(first_type) != family:
                raise LandingFileError(
                    f"landing file {path}: column {column!r} is {file_type} but {first_type} in {first_path}; "
                    "the files of one partition must agree (text, number, timestamp: any width, unit or zone)"
                )
        if num_rows == 0 and not allow_empty:
            raise LandingFileError(
                f"landing file {path} has no rows; set the ingestion config allow_empty=true if the day is really empty"
            )
        rows[str(path)] = num_rows
        all_names.update(names)
    return rows, all_names


def is_timestamp_or_text(arrow_type: pa.DataType) -> bool:
    """ts must carry a time of day: a timestamp, or text parsed as one (or all NULL: every row is then rejected).
    A DATE would be stored as an invented midnight and an integer has no agreed unit, so both are refused."""
    return type_family(arrow_type) in ("timestamp", "text", "null")


def type_family(arrow_type: pa.DataType) -> str:
    """The rule for files of one day written by different writers: types of one family are read as one.

    text: string, large_string, string_view, dictionary-encoded text; number: integers of any width or sign and
    floats (read in the widest type; a value out of the contract's range or a fraction in an integer column is a
    rejected row); timestamp: any unit, any zone (instants; a naive timestamp is UTC); null: a column with no
    value at all (pyarrow's `null` type), which agrees with every family. Anything else is its own family."""
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_null(arrow_type):
        return "null"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return "text"
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return "number"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    return str(arrow_type)


@contextlib.contextmanager
def errors_named(files: list[Path]) -> Iterator[None]:
    """Invalid UTF-8 in a contract text column fails the scan (after the rollback) as a LandingFileError;
    DuckDB's message names the file and the value. A file whose footer reads but whose pages are damaged (a
    flipped bit: DuckDB's `Out of buffer`, which names no file) is found by reading each file and named."""
    try:
        yield
    except duckdb.InvalidInputException as error:
        if "Invalid string encoding" not in str(error):
            raise_naming_the_damaged_file(files, error)
            raise
        raise LandingFileError(f"{error} (a text column of the contract; the partition was left unchanged)") from error
    except duckdb.Error as error:
        raise_naming_the_damaged_file(files, error)
        raise


def _read_whole(path: Path) -> None:
    pq.read_table(path, columns=list(contract.IMPRESSION_COLUMNS))


def raise_naming_the_damaged_file(files: list, error: Exception, engine: str = "DuckDB",
                                  read_whole: Callable[[object], None] = _read_whole) -> None:
    """If one of `files` cannot be read whole (`read_whole` raises: pyarrow by default; Spark's executors for a
    landing given as a URI), a LandingFileError naming it (with `engine`'s own error)."""
    for path in files:
        try:
            read_whole(path)
        except Exception as damage:  # noqa: BLE001 - any reader failure means a damaged file
            raise LandingFileError(f"unreadable landing file {path}: {damage} ({engine}: {error}); the partition was "
                                   "left unchanged") from error


def refuse_invalid_utf8(bad_rows: list[tuple[str, str, int]]) -> None:
    """A contract text column stored as bytes (Parquet BINARY without the UTF-8 annotation) is read as text only
    if every value is valid UTF-8; otherwise the file is refused naming the column (as for a text column).
    `bad_rows`: (file, column, rows not UTF-8) from `rules.invalid_utf8_sql`, run by either engine."""
    for path, column, bad in sorted(bad_rows):
        if bad:
            raise LandingFileError(f"landing file {path}: column {column!r} holds bytes that are not UTF-8 "
                                   f"text in {bad} rows; the partition was left unchanged")


def refuse_fully_rejected_files(rejected_by_file: list[tuple[str, int, str]], rows_by_file: dict[str, int]) -> None:
    """A file none of whose rows pass is a broken file, not bad rows: fail before the partition is replaced.
    `rejected_by_file`: (file, rejected rows, most common reason) from `rules.rejected_by_file_sql`."""
    for path, rejected, reason in sorted(rejected_by_file):
        if rejected == rows_by_file[path]:
            raise LandingFileError(f"landing file {path}: all {rejected} rows rejected (most common reason: "
                                   f"{reason}); the partition was left unchanged")
