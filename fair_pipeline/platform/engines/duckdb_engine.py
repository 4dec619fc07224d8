"""The DuckDB engine: today's warehouse file, one connection, each write one transaction."""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import duckdb
import pandas as pd
import pyarrow as pa

from fair_pipeline.platform.engines.base import Params, Table, Warehouse, WarehouseWriteError, table_name
from fair_pipeline.platform.warehouse import quote_identifier, table_columns, table_exists, transaction


@contextlib.contextmanager
def _db_api_arrow() -> Iterator[None]:
    """Arrow from execute(), not from a relation (con.sql): duckdb 2 refuses to run a relation while the connection
    holds an unfinished result (e.g. after a fetchone), which callers sharing the connection leave. duckdb 2 warns
    that this copies the rows once more; the engine's results are aggregates or batches, so the copy is bounded.
    (duckdb 2 also renamed arrow() / fetch_record_batch to to_arrow_table / to_arrow_reader.)"""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
        yield


def qualified(table: Table) -> str:
    return f"{quote_identifier(table[0])}.{quote_identifier(table[1])}"


class DuckDBEngine:
    """`Warehouse` over an open DuckDB connection (`warehouse.connect` / the `DuckDBWarehouse` resource)."""

    name = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def query_df(self, sql: str, params: Params = None) -> pd.DataFrame:
        return self.con.execute(sql, params).df()

    def query_arrow(self, sql: str, params: Params = None) -> pa.Table:
        with _db_api_arrow():
            result = self.con.execute(sql, params)
            return result.to_arrow_table() if hasattr(result, "to_arrow_table") else result.arrow()

    def stream_batches(self, sql: str, params: Params = None, batch_rows: int = 100_000) -> Iterator[pa.RecordBatch]:
        with _db_api_arrow():
            result = self.con.execute(sql, params)
            reader = (result.to_arrow_reader(batch_rows) if hasattr(result, "to_arrow_reader")
                      else result.fetch_record_batch(batch_rows))
        yield from reader

    def table_exists(self, table: Table) -> bool:
        return table_exists(self.con, *table)

    def table_columns(self, table: Table) -> list[str]:
        return table_columns(self.con, *table)

    def _query_columns(self, sql: str, params: Params) -> list[str]:
        return [row[0] for row in self.con.execute(f"DESCRIBE SELECT * FROM ({sql})", params).fetchall()]

    def replace_partition(self, table: Table, sql: str, params: Params, partition: str) -> int:
        target = qualified(table)
        with transaction(self.con):
            self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(table[0])}")
            if not self.table_exists(table):
                self.con.execute(f"CREATE TABLE {target} AS SELECT * FROM ({sql}) LIMIT 0", params)
            expected = self._query_columns(sql, params)
            actual = [row[0] for row in self.con.execute(f"DESCRIBE {target}").fetchall()]
            if expected != actual:
                raise WarehouseWriteError(
                    f"the query now returns columns {expected} but {table_name(table)} has {actual}; "
                    f"drop {table_name(table)} (derived data) and backfill its partitions"
                )
            self.con.execute(f"DELETE FROM {target} WHERE partition_date = $partition_date", {"partition_date": partition})
            before = self.con.execute(f"SELECT count(*) FROM {target}").fetchone()[0]
            self.con.execute(f"INSERT INTO {target} BY NAME SELECT * FROM ({sql})", params)
            inserted = self.con.execute(f"SELECT count(*) FROM {target}").fetchone()[0] - before
            in_partition = self.row_count(table, partition)
            if inserted != in_partition:
                raise WarehouseWriteError(
                    f"{table_name(table)}: the query wrote {inserted - in_partition} rows whose partition_date is not "
                    f"{partition}; filter every partitioned input on $partition_date"
                )
            return inserted

    def replace_table(self, table: Table, sql: str, params: Params = None) -> int:
        with transaction(self.con):
            self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(table[0])}")
            self.con.execute(f"CREATE OR REPLACE TABLE {qualified(table)} AS {sql}", params)
            return self.row_count(table)

    def create_view(self, table: Table, sql: str) -> None:
        with transaction(self.con):
            self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(table[0])}")
            self.con.execute(f"CREATE OR REPLACE VIEW {qualified(table)} AS {sql}")

    def register_frame(self, name: str, frame: pd.DataFrame | pa.Table) -> None:
        self.con.register(name, frame)

    def unregister_frame(self, name: str) -> None:
        self.con.unregister(name)

    def row_count(self, table: Table, partition: str | None = None) -> int:
        if partition is None:
            return self.con.execute(f"SELECT count(*) FROM {qualified(table)}").fetchone()[0]
        return self.con.execute(f"SELECT count(*) FROM {qualified(table)} WHERE partition_date = $partition_date",
                                {"partition_date": partition}).fetchone()[0]


def as_warehouse(source: Warehouse | duckdb.DuckDBPyConnection) -> Warehouse:
    """`source` itself when it is an engine; a DuckDB connection (tests, notebooks, `fair-pipeline audit`) wrapped."""
    return source if isinstance(source, Warehouse) else DuckDBEngine(source)
