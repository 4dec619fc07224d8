"""Checks of whole landing files before a partition is replaced (no Dagster here): each file readable, with every
contract column once, no reserved or nested column, types of one family across the day's files, text bytes that are
UTF-8; and, when DuckDB's scan fails, the damaged file named. Each refusal is a LandingFileError naming the file and
the column."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import LandingFileError
from fair_pipeline.platform.warehouse import quote_identifier

TEXT_COLUMNS = tuple(f.name for f in contract.IMPRESSION_SCHEMA if pa.types.is_string(f.type))


def check_files(files: list[Path], allow_empty: bool) -> tuple[dict[str, int], set[str]]:
    """Each file readable, with every contract column once, no reserved column, no nested contract
    column, no DATE-typed ts, and rows (unless `allow_empty`). Returns each file's row count and all column names."""
    rows, all_names, types_seen = {}, set(), {}
    for path in files:
        try:
            metadata = pq.read_metadata(path)
            schema = metadata.schema.to_arrow_schema()
        except Exception as error:  # noqa: BLE001 - any reader failure means an unreadable file
            raise LandingFileError(f"unreadable landing file {path}: {error}") from error
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
        if metadata.num_rows == 0 and not allow_empty:
            raise LandingFileError(
                f"landing file {path} has no rows; set the ingestion config allow_empty=true if the day is really empty"
            )
        rows[str(path)] = metadata.num_rows
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
            _raise_naming_the_damaged_file(files, error)
            raise
        raise LandingFileError(f"{error} (a text column of the contract; the partition was left unchanged)") from error
    except duckdb.Error as error:
        _raise_naming_the_damaged_file(files, error)
        raise


def _raise_naming_the_damaged_file(files: list[Path], error: Exception) -> None:
    for path in files:
        try:
            pq.read_table(path, columns=list(contract.IMPRESSION_COLUMNS))
        except Exception as damage:  # noqa: BLE001 - any reader failure means a damaged file
            raise LandingFileError(f"unreadable landing file {path}: {damage} (DuckDB: {error}); the partition was "
                                   "left unchanged") from error


def refuse_invalid_utf8_bytes(con: duckdb.DuckDBPyConnection, files: list[Path]) -> None:
    """A contract text column stored as bytes (Parquet BINARY without the UTF-8 annotation) is read as text only
    if every value is valid UTF-8; otherwise the file is refused naming the column (as for a text column)."""
    for path in files:
        schema = pq.read_schema(path)
        for column in TEXT_COLUMNS:
            if pa.types.is_binary(schema.field(column).type) or pa.types.is_large_binary(schema.field(column).type):
                bad = con.execute(
                    f"SELECT count(*) FROM read_parquet($file) WHERE {quote_identifier(column)} IS NOT NULL "
                    f"AND TRY(decode({quote_identifier(column)})) IS NULL", {"file": str(path)}).fetchone()[0]
                if bad:
                    raise LandingFileError(f"landing file {path}: column {column!r} holds bytes that are not UTF-8 "
                                           f"text in {bad} rows; the partition was left unchanged")
