"""Source-specific columns (e.g. Open Bandit's propensities) -> raw.<source>_extras, under a contract (no Dagster).

An extras row belongs to one impression of the same day, named by its key (request_id, position):
- a file with a column named `partition_date` (the table's partition column) or `file_row_number` (DuckDB's row
  number), or without both key columns, is refused whole (LandingFileError naming the file; nothing is written);
- a row whose key is missing, not among the day's stored impressions, or a later copy of a key already seen (first
  in file, then row order, as for impressions) goes to raw.extras_quarantine with its reason and all its values;
- a file whose key columns have the wrong type (request_id not text, position not an integer), or a column whose
  type changed against the table (or an earlier file of the day) in a way `widened_type` has no rule for, has all
  its rows quarantined with a reason naming the column and both types; the day's impressions load regardless.
The table takes its shape from the first day loaded; a later day's new columns are added (earlier days read NULL),
its missing ones are NULL for the day, and a compatible type change widens the table's column.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import LandingFileError, checked_landing_files, partition_dir
from fair_pipeline.platform.warehouse import quote_identifier, table_exists

KEYS = ("request_id", "position")
RESERVED = ("partition_date", "file_row_number")  # the table's partition column, DuckDB's row-number column
QUARANTINE = "raw.extras_quarantine"
_QUARANTINE_DDL = f"""CREATE TABLE IF NOT EXISTS {QUARANTINE} (
    source VARCHAR NOT NULL, partition_date DATE NOT NULL, source_file VARCHAR NOT NULL, reason VARCHAR NOT NULL,
    request_id VARCHAR, position VARCHAR, row_values VARCHAR NOT NULL, quarantined_at TIMESTAMP NOT NULL
)"""

# Widening: integers of any width and sign to the narrowest signed type holding both; FLOAT with DOUBLE, and a
# float with an integer of at most 32 bits (exact in a DOUBLE), to DOUBLE; timestamps without zone of second,
# millisecond or microsecond unit to TIMESTAMP (microseconds); an all-NULL column ("NULL") to the other type. Every
# other change (text <-> number, 64-bit integer <-> float, nanoseconds, zones, decimals) is refused: a silent cast
# would round values or change what earlier days' values mean.
_SIGNED = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")
_HOLDS = {"TINYINT": 0, "SMALLINT": 1, "INTEGER": 2, "BIGINT": 3, "HUGEINT": 4,
          "UTINYINT": 1, "USMALLINT": 2, "UINTEGER": 3, "UBIGINT": 4}  # the narrowest signed type holding its values
_SMALL_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT"}
_FLOATS = {"FLOAT", "DOUBLE"}
_TIMESTAMPS = {"TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP"}
NULL_TYPE = '"NULL"'


def widened_type(stored: str, incoming: str) -> str | None:
    """The type a column of type `stored` takes to also hold `incoming` values without loss; None when no rule."""
    if stored == incoming or incoming == NULL_TYPE:
        return stored
    if stored == NULL_TYPE:
        return incoming
    if stored in _HOLDS and incoming in _HOLDS:
        if stored in _SIGNED and incoming in _SIGNED:
            return max(stored, incoming, key=_SIGNED.index)
        return _SIGNED[max(_HOLDS[stored], _HOLDS[incoming])]
    pair = {stored, incoming}
    if pair <= _FLOATS or (pair & _FLOATS and pair - _FLOATS <= _SMALL_INTEGERS and len(pair) == 2):
        return "DOUBLE"
    if pair <= _TIMESTAMPS:
        return "TIMESTAMP"
    return None


@dataclasses.dataclass(frozen=True)
class ExtrasLoad:
    """What a day's source-specific columns did to raw.<source>_extras: rows stored and quarantined (by reason),
    and the schema change against the table (columns new in this day's files, added to the table; table columns
    this day's files lack, stored as NULL for the day; columns widened, `name: old -> new`)."""

    rows: int = 0
    added_columns: tuple[str, ...] = ()
    missing_columns: tuple[str, ...] = ()
    widened_columns: tuple[str, ...] = ()
    quarantined_by_reason: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def quarantined(self) -> int:
        return sum(self.quarantined_by_reason.values())


def _file_types(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    described = con.execute("DESCRIBE SELECT * FROM read_parquet($file, hive_partitioning = false)", {"file": str(path)})
    return {row[0]: row[1] for row in described.fetchall()}


def _refuse_unkeyed(path: Path) -> None:
    names = pq.read_schema(path).names
    reserved = [n for n in names if n.lower() in RESERVED]
    missing = [k for k in KEYS if k not in names]
    if reserved or missing:
        raise LandingFileError(f"extras file {path}: " + (
            f"has reserved columns {reserved} (the table's partition column or DuckDB's row number)" if reserved
            else f"lacks key columns {missing}") + "; the partition was left unchanged")


def _key_type_problem(types: dict[str, str]) -> str | None:
    if types["request_id"] != "VARCHAR":
        return f"key column 'request_id' is {types['request_id']}; expected text"
    if types["position"] not in _HOLDS:
        return f"key column 'position' is {types['position']}; expected an integer"
    return None


def _plan(con, files: list[Path], stored: dict[str, str]) -> tuple[dict[str, str], list[Path], dict[Path, str]]:
    """The column types the table needs (stored types widened by the accepted files), the accepted files, and the
    reason each refused file is refused (the first column whose type has no widening rule)."""
    target, accepted, refused = dict(stored), [], {}
    for path in files:
        types = _file_types(con, path)
        problem = _key_type_problem(types)
        merged = dict(target)
        for name, incoming in types.items():
            if problem:
                break
            have = merged.get(name)
            wider = incoming if have is None else widened_type(have, incoming)
            if wider is None:
                where = "raw table" if name in stored and stored[name] == have else "the day's earlier files"
                problem = f"column {name!r} is {incoming} here but {have} in the {where} (no widening rule)"
            else:
                merged[name] = wider
        if problem:
            refused[path] = problem
        else:
            target = merged
            accepted.append(path)
    return target, accepted, refused


def _stored_types(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, str]:
    rows = con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'raw' "
                       "AND table_name = $table ORDER BY ordinal_position", {"table": f"{source}_extras"}).fetchall()
    return {name: column_type for name, column_type in rows if name != "partition_date"}


def _unused(base: str, columns: list[str]) -> str:
    """`base` with underscores prepended until no file column has that name (DuckDB's names ignore case)."""
    while base.lower() in {c.lower() for c in columns}:
        base = "_" + base
    return base


def _scan(columns: list[str]) -> tuple[str, str, str]:
    """SQL of the files' `columns` with each row's file and row number, and the names of those two columns (names
    no file column has)."""
    file_name, file_column, row_column = (_unused(n, columns) for n in ("_extras_filename", "_extras_file", "_extras_row"))
    listed = ", ".join(quote_identifier(c) for c in columns)
    return (f"SELECT {listed}, {quote_identifier(file_name)} AS {quote_identifier(file_column)}, file_row_number AS "
            f"{quote_identifier(row_column)} FROM read_parquet($files, union_by_name = true, hive_partitioning = false, "
            f"filename = '{file_name}', file_row_number = true)"), file_column, row_column


def load_extras(con: duckdb.DuckDBPyConnection, landing: Path, source: str, day: dt.date,
                stored_file) -> ExtrasLoad:
    """Replace the day's rows of raw.<source>_extras and its entries in raw.extras_quarantine (inside the caller's
    transaction, after the day's impressions were stored). `stored_file(path)` is the path a row's file is stored
    under (relative to the landing root)."""
    files = checked_landing_files(partition_dir(Path(landing) / contract.EXTRAS_DIR, source, day))
    params = {"source": source, "partition_date": day.isoformat()}
    table = f"raw.{quote_identifier(f'{source}_extras')}"
    con.execute(_QUARANTINE_DDL)
    con.execute(f"DELETE FROM {QUARANTINE} WHERE source = $source AND partition_date = $partition_date", params)
    if not files:
        return ExtrasLoad()
    for path in files:
        _refuse_unkeyed(path)
    exists = table_exists(con, "raw", f"{source}_extras")
    stored = _stored_types(con, source) if exists else {}
    target, accepted, refused = _plan(con, files, stored)
    in_files = {name for path in accepted for name in pq.read_schema(path).names}
    columns = [c for c in target if c in in_files]
    added = tuple(c for c in columns if c not in stored) if exists else ()
    widened = tuple(f"{c}: {stored[c]} -> {target[c]}" for c in stored if target[c] != stored[c])
    if not exists and accepted:
        defined = ", ".join(f"{quote_identifier(c)} {target[c]}" for c in columns)
        con.execute(f"CREATE TABLE {table} ({defined}, partition_date DATE)")
    for column in added:  # DuckDB's own type names (from DESCRIBE), not user text
        con.execute(f"ALTER TABLE {table} ADD COLUMN {quote_identifier(column)} {target[column]}")
    for column in (c for c in stored if target[c] != stored[c]):
        con.execute(f"ALTER TABLE {table} ALTER COLUMN {quote_identifier(column)} TYPE {target[column]}")
    if exists or accepted:
        con.execute(f"DELETE FROM {table} WHERE partition_date = $partition_date",
                    {"partition_date": params["partition_date"]})
    for path, reason in refused.items():
        _quarantine_file(con, path, reason, stored_file(path), params)
    rows = 0
    if accepted:
        rows = _insert_keyed_rows(con, table, source, accepted, columns, {c: target[c] for c in columns},
                                  stored_file, params)
    counts = dict(con.execute(f"SELECT reason, count(*) FROM {QUARANTINE} WHERE source = $source AND "
                              "partition_date = $partition_date GROUP BY reason ORDER BY reason", params).fetchall())
    return ExtrasLoad(rows, added, tuple(c for c in stored if c not in in_files), widened, counts)


def _row_values(columns: list[str], alias: str) -> str:
    """A row's values as JSON text (nothing is lost to a failed cast), columns read from the relation `alias`."""
    return "to_json(struct_pack(" + ", ".join(f"{quote_identifier(c)} := {alias}.{quote_identifier(c)}"
                                              for c in columns) + "))"


def _quarantine_file(con, path: Path, reason: str, stored_path: str, params: dict) -> None:
    columns = list(_file_types(con, path))
    con.execute(f"""INSERT INTO {QUARANTINE}
        SELECT $source, CAST($partition_date AS DATE), $file, $reason, CAST(f.request_id AS VARCHAR),
               CAST(f.position AS VARCHAR), {_row_values(columns, "f")}, now()
        FROM read_parquet($path, hive_partitioning = false) AS f""",
                {**params, "file": stored_path, "reason": reason, "path": str(path)})


# The first failing rule wins; among rows whose key is an impression of the day, the first copy of a key (file,
# then row order) is kept.
_CHECKED = """
CREATE OR REPLACE TEMP TABLE _extras_checked AS
WITH keyed AS (
    SELECT {file} AS _file, {row} AS _row, request_id, position,
           row_number() OVER (PARTITION BY request_id, position, (i.request_id IS NULL) ORDER BY {file}, {row}) AS copy,
           i.request_id IS NOT NULL AS known
    FROM ({scan}) AS e
    LEFT JOIN (SELECT DISTINCT request_id, position FROM {impressions} WHERE partition_date = $partition_date) AS i
        USING (request_id, position)
)
SELECT _file, _row, CASE
    WHEN request_id IS NULL OR position IS NULL THEN 'missing key (request_id, position)'
    WHEN NOT known THEN '(request_id, position) not among the day''s impressions'
    WHEN copy > 1 THEN 'duplicate (request_id, position)'
END AS reason
FROM keyed
"""


def _insert_keyed_rows(con, table: str, source: str, files: list[Path], columns: list[str], types: dict[str, str],
                       stored_file, params: dict) -> int:
    scan, file_column, row_column = _scan(columns)
    file_, row = quote_identifier(file_column), quote_identifier(row_column)
    files_param = {"files": [str(f) for f in files]}
    stored_files = {"stored_files": [stored_file(f) for f in files]}
    impressions = f"raw.{quote_identifier(f'{source}_impressions')}"
    day = {"partition_date": params["partition_date"]}
    con.execute(_CHECKED.format(scan=scan, impressions=impressions, file=file_, row=row), {**files_param, **day})
    listed = ", ".join(quote_identifier(c) for c in columns)
    typed = ", ".join(f"CAST(e.{quote_identifier(c)} AS {types[c]})" for c in columns)
    con.execute(f"""INSERT INTO {QUARANTINE}
        SELECT $source, CAST($partition_date AS DATE), $stored_files[list_position($files, e.{file_})], c.reason,
               CAST(e.request_id AS VARCHAR), CAST(e.position AS VARCHAR), {_row_values(columns, "e")}, now()
        FROM ({scan}) AS e JOIN _extras_checked AS c ON c._file = e.{file_} AND c._row = e.{row}
        WHERE c.reason IS NOT NULL""",
                {**files_param, **stored_files, **params})
    rows = con.execute(f"""INSERT INTO {table} ({listed}, partition_date)
        SELECT {typed}, CAST($partition_date AS DATE)
        FROM ({scan}) AS e JOIN _extras_checked AS c ON c._file = e.{file_} AND c._row = e.{row}
        WHERE c.reason IS NULL""",
                       {**files_param, **day}).fetchone()[0]
    con.execute("DROP TABLE _extras_checked")
    return rows
