"""DuckDB warehouse: connections and the raw-layer DDL.

DuckDB allows one writer process per file; Dagster serializes writers with the `duckdb` pool, and
`connect` also retries briefly on a lock held by another process (e.g. a UI query).
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb

RAW_IMPRESSION_COLUMNS_DDL = """
    ts TIMESTAMP WITH TIME ZONE NOT NULL,  -- serve time, UTC
    request_id VARCHAR NOT NULL,
    query_id VARCHAR NOT NULL,
    policy VARCHAR NOT NULL,
    position INTEGER NOT NULL,
    original_position INTEGER,  -- NULL where no production ranking exists (e.g. Open Bandit's random log)
    item_id VARCHAR NOT NULL,
    group_id VARCHAR,
    score DOUBLE NOT NULL,
    click INTEGER NOT NULL,
    partition_date DATE NOT NULL,
    source_file VARCHAR NOT NULL
"""

DDL = [
    "CREATE SCHEMA IF NOT EXISTS raw",
    "CREATE SCHEMA IF NOT EXISTS staging",
    "CREATE SCHEMA IF NOT EXISTS marts",
    f"CREATE TABLE IF NOT EXISTS raw.observational_impressions ({RAW_IMPRESSION_COLUMNS_DDL})",
    f"CREATE TABLE IF NOT EXISTS raw.randomized_impressions ({RAW_IMPRESSION_COLUMNS_DDL})",
    # Rejected rows keep their original values as text, so nothing is lost to a failed cast.
    """CREATE TABLE IF NOT EXISTS raw.quarantine (
        source VARCHAR NOT NULL,
        partition_date DATE,
        source_file VARCHAR NOT NULL,
        reason VARCHAR NOT NULL,
        ts VARCHAR, request_id VARCHAR, query_id VARCHAR, policy VARCHAR, position VARCHAR,
        original_position VARCHAR, item_id VARCHAR, group_id VARCHAR, score VARCHAR, click VARCHAR,
        quarantined_at TIMESTAMP NOT NULL
    )""",
]

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock")


def connect(path: Path, read_only: bool = False, timeout_s: float = 60.0) -> duckdb.DuckDBPyConnection:
    """Open the warehouse (UTC session, schemas ensured), waiting up to `timeout_s` for another writer."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as error:
            if not any(marker in str(error) for marker in _LOCK_MARKERS) or time.monotonic() > deadline:
                raise RuntimeError(f"cannot open DuckDB warehouse {path}: {error}") from error
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    if not read_only:
        for statement in DDL:
            con.execute(statement)
    return con


@contextlib.contextmanager
def session(path: Path, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(path, read_only=read_only)
    try:
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All-or-nothing: any exception rolls back every statement of the block."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


NUMERIC_TYPES = ("DOUBLE", "FLOAT", "REAL", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "HUGEINT", "DECIMAL")


def is_numeric_type(column_type: str) -> bool:
    """Whether a DuckDB column type (as DESCRIBE prints it) holds numbers a model can use as a feature."""
    return column_type.upper().startswith(NUMERIC_TYPES)


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_exists(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", [schema, table]
        ).fetchone()[0]
    )


def table_columns(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
        [schema, table],
    ).fetchall()
    return [r[0] for r in rows]
