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

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.extras import ExtrasLoad, load_extras
from fair_pipeline.ingestion.rules import BLANK_CHARACTERS, TARGET_TYPES
from fair_pipeline.ingestion.file_checks import check_files, errors_named, refuse_invalid_utf8_bytes
from fair_pipeline.ingestion.landing import LandingFileError, partition_files
from fair_pipeline.platform.warehouse import (
    quote_identifier,
    transaction,
)

# The contract's column types and the blank characters of an id are the Spark loader's (`rules`): one definition
# for both engines.

# An id made only of Unicode blanks (separators such as U+00A0 and U+3000, control characters, and the invisible
# U+200B..U+200D, U+2060, U+FEFF, U+180E) is missing too. Such an id starts below "!" or outside ASCII, so
# `id < '!' OR id >= U+0080` (a prefix compare) guards the regular expression.
BLANK_ID = r"^[\p{Z}\p{Cc}\x{200B}-\x{200D}\x{2060}\x{FEFF}\x{180E}]*$"
NON_ASCII = "\u0080"

# Text read as a number must be a plain decimal: DuckDB's cast also reads "1_0" as 10 and " 0x1A"-like forms.
_PLAIN_NUMBER = "'^ *[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)? *$'"
# Text read as a timestamp must have a time of day: "2026-01-01" would be stored as an invented midnight, as a
# DATE column would (those are refused whole).
_TIME_OF_DAY = "'[0-9]:[0-9][0-9]'"


def _typed_expression(column: str, file_type: str, target: str) -> str:
    """SQL for the typed value of a column (NULL when the value does not parse), from fixed fragments."""
    name = quote_identifier(column)
    if file_type == target:
        return name
    if file_type == "BLOB" and target == "VARCHAR":  # bytes are text only as UTF-8 (checked per file first)
        return f"decode({name})"
    if file_type == "VARCHAR" and target in ("INTEGER", "DOUBLE"):
        name = f"CASE WHEN regexp_matches({name}, {_PLAIN_NUMBER}) THEN {name} END"
    if file_type == "VARCHAR" and target.startswith("TIMESTAMP"):
        return f"CASE WHEN regexp_matches({name}, {_TIME_OF_DAY}) THEN TRY_CAST({name} AS {target}) END"
    if target == "INTEGER":  # refuse 1.5 rather than round it
        return f"CASE WHEN TRY_CAST({name} AS DOUBLE) = floor(TRY_CAST({name} AS DOUBLE)) THEN TRY_CAST({name} AS INTEGER) END"
    return f"TRY_CAST({name} AS {target})"


def _typed_sql(con: duckdb.DuckDBPyConnection, files: list[str], file_column: str) -> tuple[str, dict[str, str]]:
    """The DuckDB type each contract column is read as, and the SQL of the contract columns of the files, read by
    name (other file columns are never read, so none can shadow an internal name), their typed values in `t_*`
    columns, and `file_column`/`file_row_number`."""
    file_types = dict(
        (row[0], row[1])
        for row in con.execute(
            f"DESCRIBE SELECT {_CONTRACT_SELECT} FROM read_parquet($files, union_by_name = true, hive_partitioning = false)",
            {"files": files},
        ).fetchall()
    )
    typed = ",\n        ".join(
        f"{_typed_expression(c, file_types[c], t)} AS {quote_identifier('t_' + c)}" for c, t in TARGET_TYPES.items()
    )
    return file_types, f"""
    SELECT {_CONTRACT_SELECT}, {quote_identifier(file_column)} AS filename, file_row_number,
        {typed}
    FROM read_parquet($files, filename = {sql_string(file_column)}, file_row_number = true, union_by_name = true,
                      hive_partitioning = false)
"""


_CONTRACT_SELECT = ", ".join(quote_identifier(c) for c in contract.IMPRESSION_COLUMNS)


def sql_string(text: str) -> str:
    """A SQL string literal (read_parquet options take constants, not parameters); quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def unused_name(base: str, taken: set[str]) -> str:
    """`base`, with underscores prepended until it is not one of `taken` (case-insensitive, as in DuckDB)."""
    lowered = {name.lower() for name in taken}
    while base.lower() in lowered:
        base = "_" + base
    return base


def _rejected_sql(typed: str, file_types: dict[str, str]) -> str:
    """(filename, file_row_number, reason) of every rejected row.

    The first failing rule wins, structural problems before value problems. Among rows that pass every
    other rule, the first occurrence of a (request_id, position) in file order is kept and later copies
    are rejected; a hash GROUP BY finds the (rare) repeated keys, so only those rows are ranked. The CTEs are
    NOT MATERIALIZED: DuckDB would otherwise hold every typed row of the day in memory (it does not spill a
    materialized CTE; 12.5M rows overran the 512MB cap), where inlined they are streamed from the file."""
    # A float group column's NaN would be stored as the group 'nan'; a NULL group is allowed, a NaN is not.
    group_nan = "isnan(group_id)" if file_types["group_id"] in ("FLOAT", "DOUBLE") else "false"
    return f"""
WITH typed AS NOT MATERIALIZED ({typed}), checked AS NOT MATERIALIZED (
    SELECT filename, file_row_number, t_request_id, t_position,
        CASE
            WHEN t_request_id IS NULL OR ((t_request_id < '!' OR t_request_id >= $non_ascii) AND regexp_matches(t_request_id, $blank_id))
                THEN 'missing request_id'
            WHEN t_query_id IS NULL OR ((t_query_id < '!' OR t_query_id >= $non_ascii) AND regexp_matches(t_query_id, $blank_id))
                THEN 'missing query_id'
            WHEN t_item_id IS NULL OR ((t_item_id < '!' OR t_item_id >= $non_ascii) AND regexp_matches(t_item_id, $blank_id))
                THEN 'missing item_id'
            WHEN {group_nan} THEN 'group_id is NaN'
            WHEN t_ts IS NULL THEN 'missing or unparsable ts'
            WHEN t_policy IS NULL OR NOT list_contains($known_policies, t_policy) THEN 'unknown policy'
            WHEN NOT list_contains($allowed_policies, t_policy) THEN 'policy not allowed in this source'
            WHEN t_position IS NULL OR t_position NOT BETWEEN 1 AND $max_position THEN 'position outside 1..K'
            WHEN t_original_position NOT BETWEEN 1 AND $max_position
                OR (original_position IS NOT NULL AND t_original_position IS NULL) THEN 'original_position outside 1..K'
            WHEN t_click IS NULL OR t_click NOT IN (0, 1) THEN 'click not 0/1'
            WHEN t_score IS NULL OR isnan(t_score) OR isinf(t_score) THEN 'score missing, NaN or infinite'
            WHEN abs(t_score) > $max_abs_score THEN $score_bound_reason
            WHEN t_ts < $day_start OR t_ts >= $day_end THEN 'date outside partition'
        END AS row_reason
    FROM typed
), repeated_keys AS (
    -- Grouping on a 64-bit hash is faster than on (VARCHAR, INTEGER); a collision only adds rows to the
    -- exact-key ranking below, which stays correct.
    SELECT hash(t_request_id, t_position) AS key_hash FROM checked WHERE row_reason IS NULL
    GROUP BY ALL HAVING count(*) > 1
), later_copies AS (
    SELECT filename, file_row_number
    FROM (
        SELECT c.filename, c.file_row_number,
               row_number() OVER (PARTITION BY c.t_request_id, c.t_position ORDER BY c.filename, c.file_row_number) AS copy
        FROM checked AS c JOIN repeated_keys ON hash(c.t_request_id, c.t_position) = repeated_keys.key_hash
        WHERE c.row_reason IS NULL
    ) WHERE copy > 1
)
SELECT checked.filename, checked.file_row_number,
    coalesce(row_reason, 'duplicate (request_id, position)') AS reason
FROM checked LEFT JOIN later_copies USING (filename, file_row_number)
WHERE row_reason IS NOT NULL OR later_copies.file_row_number IS NOT NULL
"""


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


_INSERT_VALID = """
INSERT INTO {table}
SELECT t_ts, t_request_id, t_query_id, t_policy, t_position, t_original_position, t_item_id, t_group_id,
       t_score, t_click, CAST($partition_date AS DATE), {stored_file}
FROM ({typed}) AS file_rows ANTI JOIN _rejected USING (filename, file_row_number)
"""

QUARANTINE_INSERT = """
INSERT INTO raw.quarantine
SELECT $source, CAST($partition_date AS DATE), {stored_file}, reason, CAST(ts AS VARCHAR), CAST(request_id AS VARCHAR),
       CAST(query_id AS VARCHAR), CAST(policy AS VARCHAR), CAST(position AS VARCHAR),
       CAST(original_position AS VARCHAR), CAST(item_id AS VARCHAR), CAST(group_id AS VARCHAR),
       CAST(score AS VARCHAR), CAST(click AS VARCHAR), now()
FROM ({typed}) AS file_rows
JOIN _rejected USING (filename, file_row_number)
"""

_REJECTED_BY_FILE = "SELECT filename, count(*), mode(reason) FROM _rejected GROUP BY filename"

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


def _refuse_fully_rejected_files(con: duckdb.DuckDBPyConnection, rows_by_file: dict[str, int]) -> None:
    """A file none of whose rows pass is a broken file, not bad rows: fail before the partition is replaced."""
    for filename, rejected, reason in con.execute(_REJECTED_BY_FILE).fetchall():
        if rejected == rows_by_file[filename]:
            raise LandingFileError(
                f"landing file {filename}: all {rejected} rows rejected (most common reason: {reason}); "
                "the partition was left unchanged"
            )


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
    params = {"partition_date": partition_date}
    file_list = {"files": [str(f) for f in files]}
    stored = {**file_list, "stored_files": stored_paths(landing, files)}
    stored_file = STORED_FILE.format(column="filename")
    rules = {
        **file_list,
        "known_policies": list(contract.POLICIES),
        "allowed_policies": list(contract.SOURCE_POLICIES[source]),
        "max_position": max_position,
        "day_start": dt.datetime.combine(day, dt.time(), dt.timezone.utc),
        "day_end": dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.timezone.utc),
        "blank_id": BLANK_ID,
        "non_ascii": NON_ASCII,
        "max_abs_score": contract.MAX_ABS_SCORE,
        "score_bound_reason": f"|score| above {contract.MAX_ABS_SCORE:g}",
    }
    file_column = unused_name("_landing_file", file_columns)
    with errors_named(files), _nan_checks_kept(con), transaction(con):
        file_types, typed = _typed_sql(con, file_list["files"], file_column)
        refuse_invalid_utf8_bytes(con, files)
        con.execute(_FIND_REJECTED.format(rejected=_rejected_sql(typed, file_types)), rules)
        _refuse_fully_rejected_files(con, rows_by_file)
        con.execute(_DELETE_PARTITION.format(table=table), params)
        con.execute(_DELETE_QUARANTINE, {"source": source, **params})
        accepted = con.execute(_INSERT_VALID.format(table=table, typed=typed, stored_file=stored_file),
                               {**stored, **params}).fetchone()[0]
        con.execute(QUARANTINE_INSERT.format(typed=typed, stored_file=stored_file), {"source": source, **stored, **params})
        counts = dict(con.execute(_REASON_COUNTS, {"source": source, **params}).fetchall())
        extras = load_extras(con, landing, source, day, lambda path: stored_paths(landing, [path])[0])
        con.execute("DROP TABLE _rejected")
    rejected = sum(counts.values())
    return PartitionLoad(
        source=source,
        partition_date=partition_date,
        files=tuple(file_list["files"]),
        accepted=accepted,
        rejected=rejected,
        rejected_by_reason=counts,
        extras=extras,
    )
