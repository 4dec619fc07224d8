"""The Spark engine: the same SQL models on Spark (pyspark >= 4, the `[spark]` extra, Java 17).

Tables are plain Parquet under `root`, a URI (default $FAIR_PIPELINE_SPARK_WAREHOUSE, else
$FAIR_PIPELINE_HOME/spark_warehouse; `file://`, `hdfs://`, any scheme the session's Hadoop client knows):
    <root>/<schema>/<table>/_schema.json                 Spark schema (column order and types)
    <root>/<schema>/<table>/partition_date=YYYY-MM-DD/   one directory per partition (daily tables)
    <root>/<schema>/<table>/current/                     the rows (and _schema.json) of an unpartitioned table
    <root>/_views.json                                   view definitions (DuckDB-dialect SQL), in creation order
Each partition (or `current`) is replaced all or nothing by `partition_dirs` (write to a staging directory,
check it, swap directories; several tables' partitions in one journaled swap), so a zero-row or failed write never
leaves a mixed or stale partition; plain Parquet overwrite would keep the old rows on a zero-row write and has no
transactions. Spark writes the files; the swaps, listings and small files (schemas, views, journals) go through
`warehouse_files`: the session's Hadoop FileSystem on a classic session, so executors on other hosts see the same
tables; a Spark Connect client (no JVM) changes a `file://` warehouse it shares with its server. Queries see each table as the
session view `<schema>__<table>` (re-registered after each write: a DataFrame keeps the file list it was read
with); SQL arrives in DuckDB dialect and is rendered by `spark_sql` (parameters stay bound: `spark.sql(args=)`).
One SparkSession per process (`spark_session`): starting the JVM costs 25-45 s here.
"""
from __future__ import annotations

import datetime as dt
import functools
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, functions
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import LongType, StructType, TimestampType

from fair_pipeline.platform import settings
from fair_pipeline.platform.engines import partition_dirs, spark_sql, warehouse_files
from fair_pipeline.platform.engines.base import Params, Table, WarehouseWriteError, table_name
from fair_pipeline.platform.engines.warehouse_files import join

PARTITION_COLUMN = "partition_date"
UNPARTITIONED_DATA = "current"
SCHEMA_FILE = "_schema.json"
VIEWS_FILE = "_views.json"
# A `read_parquet` input given by a driver-local path is read by the driver: bounded (catalogue-sized files).
MAX_DRIVER_FILE_ROWS = 1_000_000

DEFAULT_SESSION_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",  # as the DuckDB warehouse: hour(ts) and dates in UTC
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",  # types come from _schema.json
    # A fixed number of tasks per stage, whatever a day's rows: every task returns its status and metrics to the
    # driver, so a task count that grew with the files' bytes made the driver's traffic grow with the day.
    # Each shuffle runs spark.sql.shuffle.partitions tasks (AQE would coalesce fewer for small data, more for
    # large), and each scan as many as spark.sql.files.minPartitionNum (default: the cluster's cores): no byte cap
    # on a split, and opening a file costs nothing extra, so a split is the scanned bytes over that number.
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    "spark.sql.files.maxPartitionBytes": str(2**50),
    "spark.sql.files.openCostInBytes": "1",
    # No broadcast joins: the driver collects a broadcast side, which for a table derived from the day's rows (the
    # rejected rows a load joins back) is row-sized up to the threshold, and the plan changing at the threshold
    # changes the stages a day runs.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


def is_connect_url(master: str) -> bool:
    """A Spark Connect server (sc://host:port): the session is a thin client and only DataFrame and SQL APIs exist."""
    return master.startswith("sc://")


def is_connect_session(spark) -> bool:
    """A Spark Connect client session (no JVM on this side; its class lives in pyspark.sql.connect)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_session(master: str = "local[*]", driver_memory: str = "1g", shuffle_partitions: int = 8,
                  config: Mapping[str, str] | None = None) -> SparkSession:
    """The process's SparkSession (created once; later calls return it with its original settings).

    `master` is any master URL (local[N], spark://host:port, yarn, k8s://...) or a Spark Connect server (sc://...).
    Over Connect the server owns the driver, so its memory and static settings are the server's; the runtime SQL
    settings here are set on the session."""
    settings_ = {**DEFAULT_SESSION_CONFIG, "spark.sql.shuffle.partitions": str(shuffle_partitions), **(config or {})}
    if is_connect_url(master):
        session = SparkSession.builder.remote(master).getOrCreate()
        for key, value in settings_.items():
            if session.conf.isModifiable(key):
                session.conf.set(key, value)
        return session
    # Python UDFs (the audit's scoring and sweep) run in workers started with PYSPARK_PYTHON, read when the context
    # starts; unset, that is whatever `python3` the PATH finds, which may lack this package: default to ours
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("fair_pipeline").master(master).config("spark.driver.memory", driver_memory)
    for key, value in settings_.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


class SparkEngine:
    """`Warehouse` on a SparkSession and a directory of Parquet tables (see the module docstring)."""

    name = "spark"

    def __init__(self, spark: SparkSession, root: Path | str | None = None):
        self.spark = spark
        self.root = warehouse_files.location_uri(root or settings.spark_warehouse())
        try:
            self.files = warehouse_files.files_for(spark, self.root, connect=is_connect_session(spark))
        except ValueError as error:
            raise WarehouseWriteError(str(error)) from error
        self.files.mkdirs(self.root)
        self._register_all()

    # -- layout ---------------------------------------------------------------------------------------------
    def _dir(self, table: Table) -> str:
        return join(self.root, table[0], table[1])

    def _schema(self, table: Table) -> StructType | None:
        """A partitioned table's schema sits beside its partitions; an unpartitioned table's inside `current`, so
        that it is swapped in with the rows it describes."""
        for uri in (join(self._dir(table), SCHEMA_FILE), join(self._dir(table), UNPARTITIONED_DATA, SCHEMA_FILE)):
            text = self.files.read_text(uri)
            if text is not None:
                return StructType.fromJson(json.loads(text))
        return None

    def _write_schema(self, directory: str, schema: StructType) -> None:
        self.files.write_text(join(directory, SCHEMA_FILE), schema.json())

    def _views(self) -> dict[str, str]:
        text = self.files.read_text(join(self.root, VIEWS_FILE))
        return json.loads(text) if text is not None else {}

    def _recover(self, directory: str) -> None:
        """Complete interrupted swaps: those of several tables (journaled at the root), then the table's own."""
        partition_dirs.recover(self.files, self.root)
        partition_dirs.recover(self.files, directory)

    def _register_all(self) -> None:
        partition_dirs.recover(self.files, self.root)
        for schema_name in self.files.list_dirs(self.root):
            if schema_name.startswith(("_", ".")):
                continue
            for table_dir in self.files.list_dirs(join(self.root, schema_name)):
                table = (schema_name, table_dir)
                partition_dirs.recover(self.files, self._dir(table))
                if self._schema(table) is not None:
                    self._register_table(table)
        for name, sql in self._views().items():
            self._define_view(tuple(name.split(".", 1)), sql)

    def _register_table(self, table: Table) -> None:
        """(Re)bind the session view of a stored table to its current files."""
        directory = self._dir(table)
        self._recover(directory)
        schema = self._schema(table)
        if PARTITION_COLUMN in schema.names:
            frame = self.spark.read.schema(schema).option("basePath", directory).parquet(directory)
        elif self.files.exists(join(directory, UNPARTITIONED_DATA)):
            frame = self.spark.read.schema(schema).parquet(join(directory, UNPARTITIONED_DATA))
        else:
            frame = self.spark.createDataFrame([], schema)
        # Spark puts partition columns last; the view keeps the table's own column order (as DuckDB's).
        frame.select(*schema.names).createOrReplaceTempView(spark_sql.spark_view_name(*table))

    # -- queries --------------------------------------------------------------------------------------------
    def frame(self, sql: str, params: Params = None) -> DataFrame:
        """The lazy Spark DataFrame of a DuckDB-dialect query (rendered, inputs registered, parameters bound)."""
        statement = spark_sql.render(sql)
        args = self._arguments(statement, params, sql)
        return self.spark.sql(statement.sql, args=args)

    def _arguments(self, statement: spark_sql.SparkStatement, params: Params, sql: str):
        if statement.positional:
            values = list(params or [])
            if len(values) != statement.positional:
                raise ValueError(f"{statement.positional} ? parameters but {len(values)} values: {sql.strip()[:200]}")
            return values
        given = dict(params or {})
        missing = [name for name in (*statement.named, *(p for _, p in statement.file_inputs)) if name not in given]
        if missing:
            raise ValueError(f"parameters {missing} are not bound: {sql.strip()[:200]}")
        for view, parameter in statement.file_inputs:
            self._register_file_input(view, given[parameter])
        return {name: given[name] for name in statement.named} or None

    def _register_file_input(self, view: str, location) -> None:
        """A `read_parquet($p)` input: a URI (hdfs://, s3a://, file://...) is read by the executors; a plain path
        names a file on the driver's machine, which executors on other hosts cannot see, so the driver reads it
        (such inputs are small: the simulator's truth file is one row per item) and hands it over as a frame."""
        location = str(location)
        if warehouse_files.has_scheme(location):
            self.spark.read.parquet(location).createOrReplaceTempView(view)
            return
        table = pq.read_table(location)
        if table.num_rows > MAX_DRIVER_FILE_ROWS:
            raise WarehouseWriteError(
                f"{location}: {table.num_rows:,} rows are too many to pass through the Spark driver (at most "
                f"{MAX_DRIVER_FILE_ROWS:,}); give its URI (e.g. file://{Path(location).resolve()} on a shared file "
                "system, hdfs://...) so that the executors read it")
        self.register_frame(view, table)

    def query_df(self, sql: str, params: Params = None) -> pd.DataFrame:
        """As DuckDB's: TIMESTAMP (an instant) comes back UTC-aware; Spark hands it over naive in session time."""
        frame = self.frame(sql, params)
        result = frame.toPandas()
        for field in frame.schema.fields:
            if isinstance(field.dataType, TimestampType):
                result[field.name] = pd.to_datetime(result[field.name]).dt.tz_localize("UTC")
        return result

    def query_arrow(self, sql: str, params: Params = None) -> pa.Table:
        return self.frame(sql, params).toArrow()

    def stream_batches(self, sql: str, params: Params = None, batch_rows: int = 100_000) -> Iterator[pa.RecordBatch]:
        """Rows in the query's order (Spark hands partitions to the driver one at a time, in order)."""
        frame = self.frame(sql, params)
        schema = to_arrow_schema(frame.schema)
        rows: list[tuple] = []
        for row in frame.toLocalIterator(prefetchPartitions=True):
            rows.append(tuple(row))
            if len(rows) == batch_rows:
                yield _batch(rows, schema)
                rows = []
        if rows:
            yield _batch(rows, schema)

    def table_exists(self, table: Table) -> bool:
        return self._schema(table) is not None or table_name(table) in self._views()

    def table_columns(self, table: Table) -> list[str]:
        schema = self._schema(table)
        if schema is not None:
            return schema.names
        if table_name(table) in self._views():
            return self.spark.table(spark_sql.spark_view_name(*table)).columns
        return []

    def row_count(self, table: Table, partition: str | None = None) -> int:
        view = spark_sql.spark_view_name(*table)
        if partition is None:
            return self.spark.table(view).count()
        day = dt.date.fromisoformat(_iso_date(partition))
        return self.spark.table(view).where(functions.col(PARTITION_COLUMN) == functions.lit(day)).count()

    # -- writes ---------------------------------------------------------------------------------------------
    def replace_partition(self, table: Table, sql: str, params: Params, partition: str) -> int:
        return self.replace_partitions([(table, sql)], params, partition)[0]

    def replace_partitions(self, writes: Sequence[tuple[Table, str]], params: Params, partition: str) -> list[int]:
        """Replace partition `partition` of several tables together: every query is written and checked first
        (queries read the tables as they were), then all are swapped in one journaled swap (`partition_dirs`), so
        a failure leaves every table as it was and a crash is completed for all of them. Returns each one's rows."""
        name = f"{PARTITION_COLUMN}={_iso_date(partition)}"
        staged: list[tuple[Table, str, str | None]] = []
        try:
            for table, sql in writes:
                staging, rows_dir, schema = self._stage_partition(table, sql, params, partition, name)
                staged.append((table, staging, rows_dir))
                if self._schema(table) is None:
                    self._write_schema(self._dir(table), schema)
            counts = [self.spark.read.parquet(rows_dir).count() if rows_dir else 0 for _, _, rows_dir in staged]
        except BaseException:
            for _, staging, _ in staged:
                partition_dirs.discard(self.files, staging)
            raise
        # From here the swap is journaled: a crash leaves the staged data for `recover` to finish the swap.
        swaps = [partition_dirs.Swap(self._dir(table), name, rows_dir) for table, _, rows_dir in staged]
        home = swaps[0].table if len(swaps) == 1 else self.root
        partition_dirs.swap_together(self.files, home, swaps)
        for table, staging, _ in staged:
            partition_dirs.discard(self.files, staging)
            self._register_table(table)
        return counts

    def _stage_partition(self, table: Table, sql: str, params: Params, partition: str,
                         name: str) -> tuple[str, str | None, StructType]:
        """Write the query's rows to a new staging directory of `table`; returns it and its partition directory (None:
        no rows). Rows of another partition are refused (the staging directory is removed)."""
        frame = self.frame(sql, params)
        if PARTITION_COLUMN not in frame.columns:
            raise WarehouseWriteError(f"{table_name(table)}: the query has no {PARTITION_COLUMN} column")
        directory = self._dir(table)
        self._recover(directory)
        self._check_columns(table, frame)
        staging = partition_dirs.new_staging_dir(self.files, directory)
        try:
            frame.write.partitionBy(PARTITION_COLUMN).parquet(staging)
            written = self.files.list_dirs(staging)
            strays = [p for p in written if p != name]
            if strays:
                stray_rows = sum(self.spark.read.parquet(join(staging, p)).count() for p in strays)
                raise WarehouseWriteError(
                    f"{table_name(table)}: the query wrote {stray_rows} rows whose partition_date is not {partition} "
                    f"(partitions {strays}); filter every partitioned input on $partition_date")
        except BaseException:
            partition_dirs.discard(self.files, staging)
            raise
        return staging, (join(staging, name) if name in written else None), frame.schema

    def replace_table(self, table: Table, sql: str, params: Params = None) -> int:
        frame = self.frame(sql, params)
        directory = self._dir(table)
        self._recover(directory)
        staging = partition_dirs.new_staging_dir(self.files, directory)
        try:
            frame.write.parquet(staging)
            rows = self.spark.read.parquet(staging).count()
            self._write_schema(staging, frame.schema)  # rebuilt whole: the schema may change, with the rows
        except BaseException:
            partition_dirs.discard(self.files, staging)
            raise
        partition_dirs.swap_in(self.files, directory, UNPARTITIONED_DATA, staging)
        self._register_table(table)
        return rows

    def _check_columns(self, table: Table, frame: DataFrame) -> None:
        schema = self._schema(table)
        if schema is not None and schema.names != frame.columns:
            raise WarehouseWriteError(
                f"the query now returns columns {frame.columns} but {table_name(table)} has {schema.names}; "
                f"drop {table_name(table)} (derived data) and backfill its partitions")

    def create_view(self, table: Table, sql: str) -> None:
        self._define_view(table, sql)
        views = {k: v for k, v in self._views().items() if k != table_name(table)}
        views[table_name(table)] = sql
        self.files.write_text(join(self.root, VIEWS_FILE), json.dumps(views, indent=1))

    def _define_view(self, table: Table, sql: str) -> None:
        statement = spark_sql.render(sql)
        if statement.named or statement.positional or statement.file_inputs:
            raise WarehouseWriteError(f"view {table_name(table)} cannot take parameters or file inputs")
        # Identifiers only (the view's own name, made by spark_view_name from code); no value enters the text.
        self.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{spark_sql.spark_view_name(*table)}` AS {statement.sql}")

    def register_frame(self, name: str, frame: pd.DataFrame | pa.Table) -> None:
        if isinstance(frame, pa.Table):
            # Types from Arrow: a timestamp without zone stays one (TIMESTAMP_NTZ), one with a zone is an instant.
            spark_frame = self.spark.createDataFrame(frame, schema=from_arrow_schema(frame.schema, prefer_timestamp_ntz=True))
        else:
            spark_frame = self.spark.createDataFrame(frame)
        spark_frame.createOrReplaceTempView(name)

    def unregister_frame(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)

    def register_files(self, name: str, files: Mapping[str, str], columns: Mapping[str, str]) -> None:
        """Make Parquet files queryable as the unqualified table `name`, read by the executors: `columns` (by name,
        each cast to the Spark SQL type it maps to, so that files of other writers union alike; other columns of
        the files are never read), `filename` (the file as `files` names it), `file_row_number` (the row's place in
        its file) and `stored_file` (the value `files` maps the file to). Each file is its own scan, so files whose
        other columns differ need no merged schema; only names pass through the driver. A timestamp column in
        nanoseconds (pandas' writer; Spark reads no such type) is read as its number and made an instant of
        microseconds, as DuckDB's reader makes it (with spark.sql.legacy.parquet.nanosAsLong set by the caller while
        the files are read: Spark has no nanosecond type)."""
        frames = []
        for path, stored in files.items():
            frame = self.spark.read.parquet(path)
            read = {field.name: field.dataType for field in frame.schema.fields}
            selected = [_typed_column(c, read[c], spark_type) for c, spark_type in columns.items()]
            frames.append(frame.select(
                *selected, functions.lit(path).alias("filename"),
                functions.col("_metadata.row_index").alias("file_row_number"), functions.lit(stored).alias("stored_file")))
        functools.reduce(lambda a, b: a.unionByName(b), frames).createOrReplaceTempView(name)


def _typed_column(name: str, read_type, spark_type: str):
    column = functions.col(f"`{name}`")
    if spark_type.startswith("timestamp") and isinstance(read_type, LongType):  # nanoseconds, read as a number
        # Integer division toward zero, as DuckDB's cast of TIMESTAMP_NS (a double would lose microseconds).
        instant = functions.timestamp_micros(functions.expr(f"`{name}` div 1000"))
        return instant.cast(spark_type).alias(name)
    return column.cast(spark_type).alias(name)


def _iso_date(partition: str) -> str:
    """A partition key as YYYY-MM-DD; anything else is refused (it names a directory)."""
    try:
        return dt.date.fromisoformat(str(partition)).isoformat()
    except ValueError as error:
        raise WarehouseWriteError(f"partition {partition!r} is not a date YYYY-MM-DD") from error


def _batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    columns = list(zip(*rows))
    return pa.RecordBatch.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, schema)], schema=schema)
