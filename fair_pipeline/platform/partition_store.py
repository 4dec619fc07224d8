"""Result tables keyed by the asset partition that wrote them (DuckDB glue, no Dagster).

Every trained or audited stage is daily-partitioned: partition D's rows carry `partition_date = D`, and
re-materializing D replaces exactly those rows (all tables of one write in one transaction), so a backfill of
older days adds their own rows and never overwrites the newest day's results. Readers ask for a partition, or
for the newest one stored (`partition=None`).

A stage that ran for D and had nothing to store (e.g. not estimable) says so with `record_skip`: D's rows go and
the reason is kept in `marts.skipped_partitions`, so a reader of D is told "ran, stored nothing: <reason>"
instead of "never ran". A later write of D's rows supersedes the skip.

A table written by a version that kept one result set per table (no `partition_date` column) holds results
that can be recomputed, not data: it is dropped and rebuilt on the first partitioned write.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pandas as pd

from fair_pipeline.platform.warehouse import quote_identifier, table_columns, table_exists, transaction

PARTITION_COLUMN = "partition_date"
SKIPS_TABLE = "marts.skipped_partitions"


def qualified(table: str) -> str:
    return ".".join(quote_identifier(part) for part in table.split("."))


def as_date(partition: dt.date | str) -> dt.date:
    if isinstance(partition, dt.datetime):
        return partition.date()
    if isinstance(partition, dt.date):
        return partition
    try:
        return dt.date.fromisoformat(str(partition)[:10])
    except ValueError as exc:
        raise ValueError(f"partition {partition!r} is not a date (YYYY-MM-DD)") from exc


def _rows(view: str) -> str:
    return f"SELECT * REPLACE (CAST({PARTITION_COLUMN} AS DATE) AS {PARTITION_COLUMN}) FROM {view}"


def _prepare(con, table: str, view: str) -> None:
    """Create `table` from the frame's schema if missing; rebuild a table without `partition_date`; add columns
    the frame has and the table lacks (older rows get NULL)."""
    schema, name = table.split(".")
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(schema)}")
    if table_exists(con, schema, name) and PARTITION_COLUMN not in table_columns(con, schema, name):
        con.execute(f"DROP TABLE {qualified(table)}")
    if not table_exists(con, schema, name):
        con.execute(f"CREATE TABLE {qualified(table)} AS {_rows(view)} LIMIT 0")
        return
    present = set(table_columns(con, schema, name))
    for column, kind in con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {_rows(view)})").fetchall():
        if column not in present:
            con.execute(f"ALTER TABLE {qualified(table)} ADD COLUMN {quote_identifier(column)} {kind}")


def _typed(frame: pd.DataFrame, day: dt.date) -> pd.DataFrame:
    """The rows with their partition; an object column holding only NULLs is text (DuckDB would guess INTEGER and
    refuse the strings a later partition writes)."""
    out = frame.assign(**{PARTITION_COLUMN: pd.Timestamp(day)})
    for column in out.columns:
        if out[column].dtype == object and out[column].isna().all():
            out[column] = out[column].astype("string")
    return out


def replace_partition(con, frames: Mapping[str, pd.DataFrame], partition: dt.date | str) -> dict[str, int]:
    """Replace partition `partition`'s rows of every table in `frames` ({'schema.table': rows}), all or nothing;
    returns rows written per table. The frames need not carry `partition_date`; it is set here."""
    day = as_date(partition)
    written = {}
    with transaction(con):
        for k, (table, frame) in enumerate(frames.items()):
            view = f"_partition_rows_{k}"
            con.register(view, _typed(frame, day))
            try:
                _prepare(con, table, view)
                con.execute(f"DELETE FROM {qualified(table)} WHERE {PARTITION_COLUMN} = $day", {"day": day})
                con.execute(f"INSERT INTO {qualified(table)} BY NAME {_rows(view)}")
            finally:
                con.unregister(view)
            written[table] = len(frame)
        _forget_skips(con, list(frames), day)
    return written


def _forget_skips(con, tables: list[str], day: dt.date) -> None:
    if table_exists(con, *SKIPS_TABLE.split(".")):
        con.execute(f"DELETE FROM {qualified(SKIPS_TABLE)} WHERE {PARTITION_COLUMN} = $day AND table_name IN "
                    "(SELECT unnest($tables))", {"day": day, "tables": tables})


def record_skip(con, tables: list[str], partition: dt.date | str, reason: str) -> None:
    """Partition `partition` of `tables` ran and had nothing to store: their rows of it are removed and `reason`
    is kept (one transaction), so readers can tell "ran, stored nothing: <reason>" from "never ran"."""
    day = as_date(partition)
    with transaction(con):
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        con.execute(f"CREATE TABLE IF NOT EXISTS {qualified(SKIPS_TABLE)} (table_name VARCHAR, "
                    f"{PARTITION_COLUMN} DATE, reason VARCHAR, recorded_at TIMESTAMP)")
        for table in tables:
            schema, name = table.split(".")
            if table_exists(con, schema, name) and PARTITION_COLUMN in table_columns(con, schema, name):
                con.execute(f"DELETE FROM {qualified(table)} WHERE {PARTITION_COLUMN} = $day", {"day": day})
        _forget_skips(con, tables, day)
        con.execute(f"INSERT INTO {qualified(SKIPS_TABLE)} SELECT unnest($tables), $day, $reason, "
                    "now()::TIMESTAMP", {"tables": tables, "day": day, "reason": reason})


def skip_reason(con, table: str, partition: dt.date | str | None) -> str | None:
    """Why partition `partition` of `table` stored nothing (`record_skip`), or None; with `partition` None, the
    newest skip when it is newer than every stored partition."""
    if not table_exists(con, *SKIPS_TABLE.split(".")):
        return None
    if partition is None:
        stored = stored_partitions(con, table)
        row = con.execute(f"SELECT {PARTITION_COLUMN}, reason FROM {qualified(SKIPS_TABLE)} WHERE table_name = $table "
                          f"ORDER BY {PARTITION_COLUMN} DESC LIMIT 1", {"table": table}).fetchone()
        return None if row is None or (stored and stored[-1] >= row[0]) else f"{row[1]} (partition {row[0]})"
    row = con.execute(f"SELECT reason FROM {qualified(SKIPS_TABLE)} WHERE table_name = $table AND "
                      f"{PARTITION_COLUMN} = $day", {"table": table, "day": as_date(partition)}).fetchone()
    return None if row is None else row[0]


def stored_partitions(con, table: str) -> list[dt.date]:
    """Partitions with rows in `table`, ascending (empty when the table is missing or has the old layout)."""
    schema, name = table.split(".")
    if not table_exists(con, schema, name) or PARTITION_COLUMN not in table_columns(con, schema, name):
        return []
    rows = con.execute(f"SELECT DISTINCT CAST({PARTITION_COLUMN} AS DATE) FROM {qualified(table)} "
                       f"WHERE {PARTITION_COLUMN} IS NOT NULL ORDER BY 1").fetchall()
    return [row[0] for row in rows]


def resolve_partition(con, table: str, partition: dt.date | str | None, error: type[Exception] = LookupError,
                      hint: str = "") -> dt.date:
    """`partition` as a date when `table` holds it, else the newest stored partition when `partition` is None;
    raises `error` naming the table (and the partition) when there is none."""
    stored = stored_partitions(con, table)
    suffix = f"; {hint}" if hint else ""
    skipped = skip_reason(con, table, partition)
    if skipped is not None:
        where = "" if partition is None else f" for partition {as_date(partition)}"
        raise error(f"{table}: the asset ran{where} and stored nothing: {skipped}")
    if partition is None:
        if not stored:
            raise error(f"{table} holds no results yet{suffix}")
        return stored[-1]
    day = as_date(partition)
    if day not in stored:
        raise error(f"{table} has no rows for partition {day}{suffix}")
    return day


def load_partition(con, table: str, partition: dt.date | str | None = None, *, error: type[Exception] = LookupError,
                   hint: str = "") -> pd.DataFrame:
    """Rows of one partition of `table` (the newest stored when `partition` is None)."""
    day = resolve_partition(con, table, partition, error, hint)
    return con.execute(f"SELECT * FROM {qualified(table)} WHERE {PARTITION_COLUMN} = $day", {"day": day}).df()


__all__ = ["PARTITION_COLUMN", "SKIPS_TABLE", "as_date", "load_partition", "record_skip", "replace_partition",
           "resolve_partition", "skip_reason", "stored_partitions"]
