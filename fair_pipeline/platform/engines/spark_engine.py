"""The Spark engine: the same SQL models on Spark (pyspark >= 4, the `[spark]` extra, Java 17).

Tables are versioned Parquet under `root`, a URI (default $FAIR_PIPELINE_SPARK_WAREHOUSE, else
$FAIR_PIPELINE_HOME/spark_warehouse; `file://`, `hdfs://`, any scheme the session's Hadoop client knows), and a
commit log names the live version of every partition, table and view (`spark_tables`, `version_log`). Every write,
listing and read of the warehouse is a Spark DataFrame operation, so a classic session and a Spark Connect client
(no JVM on its side) change it alike, and executors on other hosts see the same tables: nothing of it is a file
operation of the driver's (or the client's) process. A write lands in a new version directory and becomes live by a
commit of one file, so a zero-row, failed or killed write never leaves a mixed or stale partition (plain Parquet
overwrite would keep the old rows on a zero-row write and has no transactions). Queries see each table as the
session view `<schema>__<table>` (re-registered after each write: a DataFrame keeps the file list it was read
with; a new engine rebinds only the views whose live versions differ from the session's binding); SQL arrives in
DuckDB dialect and is rendered by `spark_sql` (parameters stay bound: `spark.sql(args=)`).
One SparkSession per process (`spark_session`): starting the JVM costs 25-45 s here.
"""
from __future__ import annotations

import datetime as dt
import functools
import os
import sys
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, functions
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import LongType, StructType, TimestampType

from fair_pipeline.platform import settings
from fair_pipeline.platform.engines import spark_sql, warehouse_files
from fair_pipeline.platform.engines.base import Params, Table, WarehouseWriteError, table_name
from fair_pipeline.platform.engines.spark_tables import PARTITION_COLUMN, VersionedTables

# A `read_parquet` input given by a driver-local path is read by the driver: bounded (catalogue-sized files).
MAX_DRIVER_FILE_ROWS = 1_000_000

DEFAULT_SESSION_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",  # as the DuckDB warehouse: hour(ts) and dates in UTC
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",  # types come from the commit log
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
    """`Warehouse` on a SparkSession and versioned Parquet tables under a URI (see the module docstring)."""

    name = "spark"

    def __init__(self, spark: SparkSession, root: Path | str | None = None):
        self.spark = spark
        self.root = warehouse_files.location_uri(root or settings.spark_warehouse())
        # Listings of landing folders (ingestion): the warehouse itself is read and changed through Spark only.
        self.files = warehouse_files.files_for(spark, connect=is_connect_session(spark))
        self.tables = VersionedTables(spark, self.root)
        self._register_all()

    def _schema(self, table: Table) -> StructType | None:
        return self.tables.schema(table_name(table))

    def _register_all(self) -> None:
        """Bind every table's and view's session view, skipping those the session already binds to the same live
        versions (or view SQL): a Dagster run constructs an engine per step in one session, and binding a table
        lists its files (a Spark job when it has many partitions)."""
        for name in self.tables.table_names():
            self._register_table(tuple(name.split(".", 1)), unless_bound=True)
        for name, sql in self.tables.views():
            self._define_view(tuple(name.split(".", 1)), sql, unless_bound=True)

    def _register_table(self, table: Table, unless_bound: bool = False) -> None:
        """(Re)bind the session view of a stored table to its live versions."""
        view, binding = spark_sql.spark_view_name(*table), (self.root, self.tables.live_key(table_name(table)))
        if unless_bound and _session_bindings(self.spark).get(view) == binding:
            return
        self.tables.frame(table_name(table)).createOrReplaceTempView(view)
        _session_bindings(self.spark)[view] = binding

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
        return self._schema(table) is not None or table_name(table) in dict(self.tables.views())

    def table_columns(self, table: Table) -> list[str]:
        schema = self._schema(table)
        if schema is not None:
            return schema.names
        if table_name(table) in dict(self.tables.views()):
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
        """Replace partition `partition` of several tables together: each query is written as a new version and
        counted (the queries read the tables as they were), then one commit makes them all live
        (`spark_tables`), so a failure or a crash before the commit leaves every table as it was. Returns each
        one's rows."""
        day = _iso_date(partition)
        frames = [(table_name(table), self.frame(sql, params)) for table, sql in writes]
        counts = self.tables.write_partitions(frames, day)
        for table, _ in writes:
            self._register_table(table)
        return counts

    def replace_table(self, table: Table, sql: str, params: Params = None) -> int:
        rows = self.tables.write_table(table_name(table), self.frame(sql, params))
        self._register_table(table)
        return rows

    def create_view(self, table: Table, sql: str) -> None:
        self._define_view(table, sql)
        self.tables.define_view(table_name(table), sql)

    def _define_view(self, table: Table, sql: str, unless_bound: bool = False) -> None:
        statement = spark_sql.render(sql)
        if statement.named or statement.positional or statement.file_inputs:
            raise WarehouseWriteError(f"view {table_name(table)} cannot take parameters or file inputs")
        view = spark_sql.spark_view_name(*table)
        # A temporary view keeps its SQL text and resolves the views it names when queried, so the same text is
        # the same view whatever the tables it reads are bound to now.
        if unless_bound and _session_bindings(self.spark).get(view) == ("view", statement.sql):
            return
        # Identifiers only (the view's own name, made by spark_view_name from code); no value enters the text.
        self.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{view}` AS {statement.sql}")
        _session_bindings(self.spark)[view] = ("view", statement.sql)

    def register_frame(self, name: str, frame: pd.DataFrame | pa.Table) -> None:
        _session_bindings(self.spark).pop(name, None)
        if isinstance(frame, pa.Table):
            # Types from Arrow: a timestamp without zone stays one (TIMESTAMP_NTZ), one with a zone is an instant.
            spark_frame = self.spark.createDataFrame(frame, schema=from_arrow_schema(frame.schema, prefer_timestamp_ntz=True))
        else:
            spark_frame = self.spark.createDataFrame(frame)
        spark_frame.createOrReplaceTempView(name)

    def unregister_frame(self, name: str) -> None:
        _session_bindings(self.spark).pop(name, None)
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
        _session_bindings(self.spark).pop(name, None)
        functools.reduce(lambda a, b: a.unionByName(b), frames).createOrReplaceTempView(name)


# Per session: the warehouse tables' session views and what each is bound to ((root, live key) or ("view", SQL)).
_BINDINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _session_bindings(spark) -> dict[str, tuple]:
    return _BINDINGS.setdefault(spark, {})


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
