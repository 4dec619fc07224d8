"""The warehouse engine interface: what the SQL models (and, stage by stage, the rest of the pipeline) need
from a warehouse, independent of DuckDB or Spark.

Every SQL text handed to an engine is DuckDB dialect with bound parameters (`$name`, or `?` with a list):
DuckDB runs it as written, Spark renders it with `engines.spark_sql` first. Tables are named
`(schema, table)`, as in the DuckDB file (`raw`, `staging`, `marts`).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

import pandas as pd
import pyarrow as pa

Table = tuple[str, str]
Params = Mapping[str, object] | Sequence[object] | None


class WarehouseWriteError(ValueError):
    """A write the engine refused or could not complete (schema change, rows outside the partition,
    failed write); the message names the table and the partition. The table is left as it was."""


def table_name(table: Table) -> str:
    return f"{table[0]}.{table[1]}"


@runtime_checkable
class Warehouse(Protocol):
    """One engine session. Implementations: `DuckDBEngine` (default, one DuckDB file) and `SparkEngine`
    (Parquet tables partitioned by partition_date, one SparkSession per process)."""

    name: str

    def query_df(self, sql: str, params: Params = None) -> pd.DataFrame:
        """Run a query and return its (small, aggregated) result on the driver."""

    def query_arrow(self, sql: str, params: Params = None) -> pa.Table:
        """As query_df, as an Arrow table (types kept exactly: dates stay dates)."""

    def stream_batches(self, sql: str, params: Params = None, batch_rows: int = 100_000) -> Iterator[pa.RecordBatch]:
        """Run a query and stream its result to the driver in order, `batch_rows` rows at a time."""

    def table_exists(self, table: Table) -> bool: ...

    def table_columns(self, table: Table) -> list[str]:
        """Column names in table order; [] for a table that does not exist."""

    def replace_partition(self, table: Table, sql: str, params: Params, partition: str) -> int:
        """Replace partition `partition` (partition_date) of `table` by the rows of `sql`, all or nothing;
        creates the table on first write. Raises WarehouseWriteError when the query's columns differ from
        the table's or a row's partition_date is not `partition`. Returns the partition's row count."""

    def replace_table(self, table: Table, sql: str, params: Params = None) -> int:
        """Replace an unpartitioned table by the rows of `sql`, all or nothing; returns its row count."""

    def create_view(self, table: Table, sql: str) -> None:
        """(Re)define a view (no parameters)."""

    def register_frame(self, name: str, frame: pd.DataFrame | pa.Table) -> None:
        """Make an in-memory frame queryable as the unqualified table `name` for this session."""

    def unregister_frame(self, name: str) -> None:
        """Forget a frame registered with `register_frame` (no error if there is none)."""

    def row_count(self, table: Table, partition: str | None = None) -> int: ...


def fetch_rows(engine: Warehouse, sql: str, params: Params = None) -> list[tuple]:
    """A small result as tuples of Python values (dates stay dates), as a DB-API fetchall would give."""
    table = engine.query_arrow(sql, params)
    return list(zip(*(column.to_pylist() for column in table.columns))) if table.num_columns else []
