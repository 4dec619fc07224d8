"""Validated, atomic loading of one day's landing files into the raw layer (no Dagster here).

Each partition load is one transaction: the partition's old rows and quarantine entries are deleted and
the new valid / rejected rows inserted, so a re-run replaces exactly that partition and a failure
leaves the previous state intact. Validation is one SQL pass; every rejected row keeps its values
(as text), its reason, its source file and its partition.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb

from fair_pipeline.ingestion import contract, rules
from fair_pipeline.ingestion.extras import ExtrasLoad, load_extras
from fair_pipeline.ingestion.file_checks import (
    check_files,
    errors_named,
    refuse_fully_rejected_files,
    refuse_invalid_utf8,
)
from fair_pipeline.ingestion.landing import LandingFileError, partition_files
from fair_pipeline.ingestion.rules import BLANK_CHARACTERS  # noqa: F401 - the catalogue's blank ids, as here
from fair_pipeline.platform.warehouse import (
    quote_identifier,
    transaction,
)

# The rows' rules are the contract's (`rules`), the same text Spark's loader runs; here they run over DuckDB's
# reader of the day's files. Other columns of the files are never read, so none can shadow an internal name.
_FILES = """read_parquet($files, filename = {file_column}, file_row_number = true, union_by_name = true,
                 hive_partitioning = false)"""
# The key repeated keys are found by: grouping on one 64-bit hash is faster than on (VARCHAR, INTEGER).
_DUPLICATE_KEY = "hash(t_request_id, t_position)"


def _file_types(con: duckdb.DuckDBPyConnection, files: list[str]) -> dict[str, str]:
    """The DuckDB type each contract column is read as (the widest of the files')."""
    return dict((row[0], row[1]) for row in con.execute(
        f"DESCRIBE SELECT {rules.CONTRACT_SELECT} FROM read_parquet($files, union_by_name = true, "
        "hive_partitioning = false)", {"files": files}).fetchall())


def sql_string(text: str) -> str:
    """A SQL string literal (read_parquet options take constants, not parameters); quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def unused_name(base: str, taken: set[str]) -> str:
    """`base`, with underscores prepended until it is not one of `taken` (case-insensitive, as in DuckDB)."""
    lowered = {name.lower() for name in taken}
    while base.lower() in lowered:
        base = "_" + base
    return base


_DELETE_PARTITION = "DELETE FROM {table} WHERE partition_date = $partition_date"
_DELETE_QUARANTINE = "DELETE FROM raw.quarantine WHERE source = $source AND partition_date = $partition_date"

# Three statements instead of staging every row: the rejected rows (usually few) are found in one scan
# that writes almost nothing; the valid rows are the files' rows minus those (a hash anti-join with a
# tiny build side); the quarantine re-reads only the rejected rows, with their original values as text.
_FIND_REJECTED = "CREATE OR REPLACE TEMP TABLE _rejected AS {rejected}"

# What `source_file` stores: the file's path relative to the landing root (`observational/date=2026-01-01/x.parquet`),
# not the absolute path DuckDB's `filename` holds, which would leak the host's layout and go stale when the home
# moves. `$files` and `$stored_files` are parallel lists (bound parameters); a path missing from `$files` gives NULL,
# which the NOT NULL column refuses, so a mismatch fails the load instead of storing a wrong name.
STORED_FILE = "$stored_files[list_position($files, {column})]"


def stored_paths(landing: Path, files: list[Path]) -> list[str]:
    """Each file's path relative to the landing root, with forward slashes: the value `source_file` stores."""
    root = Path(landing)
    return [Path(f).relative_to(root).as_posix() for f in files]


_INSERT_VALID = "INSERT INTO {table} {accepted}"
# Kept as its own statement text: the atomicity test makes this insert fail after the valid rows are in.
QUARANTINE_INSERT = "INSERT INTO raw.quarantine {quarantine}"

_REASON_COUNTS = """
SELECT reason, count(*) FROM raw.quarantine WHERE source = $source AND partition_date = $partition_date
GROUP BY reason ORDER BY reason
"""


@dataclasses.dataclass(frozen=True)
class PartitionLoad:
    source: str
    partition_date: str
    files: tuple[str, ...]
    accepted: int
    rejected: int
    rejected_by_reason: dict[str, int]
    extras: ExtrasLoad

    @property
    def rejected_share(self) -> float:
        total = self.accepted + self.rejected
        return self.rejected / total if total else 0.0


def raw_table(source: str) -> str:
    if source not in contract.SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {contract.SOURCES}")
    return f"raw.{source}_impressions"


@contextlib.contextmanager
def _nan_checks_kept(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB (2.0.1) folds `isnan(score)` to false from a Parquet column's min/max, which writers compute
    without NaN: with the validation's rows streamed rather than materialized, a NaN score would pass. Its
    statistics propagation is off while a partition loads (the previous setting is restored)."""
    previous = con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0]
    con.execute("SET disabled_optimizers = 'statistics_propagation'")
    try:
        yield
    finally:
        con.execute("SET disabled_optimizers = $previous", {"previous": previous})


def _run(con: duckdb.DuckDBPyConnection, sql: str, values: dict[str, object]) -> duckdb.DuckDBPyConnection:
    """One statement with the values it binds."""
    return con.execute(sql, rules.bound(sql, values))


def _refuse_fully_rejected_files(con: duckdb.DuckDBPyConnection, rows_by_file: dict[str, int]) -> None:
    """A file none of whose rows pass is a broken file, not bad rows: fail before the partition is replaced."""
    refuse_fully_rejected_files(con.execute(rules.rejected_by_file_sql("_rejected")).fetchall(), rows_by_file)


def load_partition(
    con: duckdb.DuckDBPyConnection,
    landing: Path,
    source: str,
    partition_date: str,
    max_position: int = 50,
    allow_empty: bool = False,
) -> PartitionLoad:
    """Replace one day of `raw.<source>_impressions` (and its quarantine and extras) atomically.

    Every file is validated before anything is written: a refused file (see `file_checks.check_files`, or one whose rows
    are all rejected) raises LandingFileError and leaves the previous partition as it was."""
    day = dt.date.fromisoformat(partition_date)
    files = partition_files(landing, source, day)
    rows_by_file, file_columns = check_files(files, allow_empty)
    table = raw_table(source)
    file_list = [str(f) for f in files]
    values = {**rules.rule_parameters(source, day, max_position), "files": file_list,
              "stored_files": stored_paths(landing, files), "partition_date": partition_date, "source": source}
    file_column_name = unused_name("_landing_file", file_columns)
    rows, file_column = _FILES.format(file_column=sql_string(file_column_name)), quote_identifier(file_column_name)
    with errors_named(files), _nan_checks_kept(con), transaction(con):
        file_types = _file_types(con, file_list)
        typed = rules.typed_sql(file_types, rows, file_column, STORED_FILE.format(column=file_column))
        utf8 = rules.invalid_utf8_sql(file_types, rows, file_column)
        if utf8:
            refuse_invalid_utf8(con.execute(utf8, rules.bound(utf8, values)).fetchall())
        _run(con, _FIND_REJECTED.format(rejected=rules.rejected_sql(typed, _DUPLICATE_KEY)), values)
        _refuse_fully_rejected_files(con, rows_by_file)
        _run(con, _DELETE_PARTITION.format(table=table), values)
        _run(con, _DELETE_QUARANTINE, values)
        accepted = _run(con, _INSERT_VALID.format(table=table, accepted=rules.accepted_sql(typed, "_rejected")),
                        values).fetchone()[0]
        _run(con, QUARANTINE_INSERT.format(quarantine=rules.quarantine_sql(typed, "_rejected")), values)
        counts = dict(_run(con, _REASON_COUNTS, values).fetchall())
        extras = load_extras(con, landing, source, day, lambda path: stored_paths(landing, [path])[0])
        con.execute("DROP TABLE _rejected")
    rejected = sum(counts.values())
    return PartitionLoad(
        source=source,
        partition_date=partition_date,
        files=tuple(file_list),
        accepted=accepted,
        rejected=rejected,
        rejected_by_reason=counts,
        extras=extras,
    )
