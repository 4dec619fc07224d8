"""Loading one day's landing files with the Spark engine: the executors read the files and run the contract's
rules (`rules`, the same SQL DuckDB runs, rendered by `engines.spark_sql`); the raw partition and the day's
quarantine rows are written by Spark (`SparkEngine.replace_partitions`: both written and checked, then made live by
one commit).

The landing is a folder of this machine (a plain path: listed and its footers read here, with the same refusals as
DuckDB's loader, `file_checks.check_files`) or a URI (`file://`, `hdfs://`, ...: listed through the session's Hadoop
FileSystem, `landing_uris`, and its footers read by Spark, `spark_footers`; nothing is read from this machine's
paths). Either way the checks are `file_checks.check_footers` and the driver receives per-file and per-reason
counts; no row passes through it.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import functools
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract, landing_uris, rules, spark_footers
from fair_pipeline.ingestion.file_checks import (
    check_files,
    check_footers,
    raise_naming_the_damaged_file,
    refuse_fully_rejected_files,
    refuse_invalid_utf8,
)
from fair_pipeline.ingestion.landing import LandingFileError, landing_files, partition_dir, partition_files
from fair_pipeline.ingestion.loads import ExtrasLoad, PartitionLoad, stored_paths
from fair_pipeline.platform.engines.base import fetch_rows

ROWS_VIEW = "__landing_rows"
# Parquet's TIMESTAMP(NANOS) (pandas' writer) is read as its number: Spark has no nanosecond type and refuses the
# file otherwise; `SparkEngine.register_files` makes it an instant.
NANOS_AS_LONG = spark_footers.NANOS_AS_LONG
REJECTED_VIEW = "__landing_rejected"
QUARANTINE = ("raw", "quarantine")
# One text key: DuckDB's hash() has no Spark equivalent with the same values (the renderer refuses it); a collision
# of two keys' texts would only add rows to the exact ranking.
_DUPLICATE_KEY = "concat(t_request_id, '|', CAST(t_position AS VARCHAR))"

_REASON_COUNTS = """
SELECT reason, count(*) AS n FROM raw.quarantine WHERE source = $source AND partition_date = $partition_date
GROUP BY reason ORDER BY reason
"""
_OTHER_SOURCES_QUARANTINE = """
SELECT * FROM raw.quarantine WHERE partition_date = $partition_date AND (source IS NULL OR source <> $source)
"""


# Spark's types of the files' columns in DuckDB's names (`rules.TARGET_TYPES`' vocabulary): the rules use a column
# as it is only when its type is the target's, and read bytes and floats as DuckDB's loader does.
_SPARK_TYPES = {"StringType": "VARCHAR", "IntegerType": "INTEGER", "LongType": "BIGINT", "ShortType": "SMALLINT",
                "ByteType": "TINYINT", "DoubleType": "DOUBLE", "FloatType": "FLOAT", "BinaryType": "BLOB",
                "TimestampType": "TIMESTAMP WITH TIME ZONE", "TimestampNTZType": "TIMESTAMP", "NullType": "NULL",
                "BooleanType": "BOOLEAN", "DateType": "DATE"}


def sql_type(spark_type) -> str:
    """A Spark column type in DuckDB's names (a type not listed keeps Spark's name: never a target type)."""
    name = type(spark_type).__name__
    return _SPARK_TYPES.get(name, spark_type.simpleString().upper())


@contextlib.contextmanager
def _damaged_files_named(files: list, read_whole=None) -> Iterator[None]:
    """A file whose footer reads but whose pages are damaged fails a Spark job with an error about a task; the
    file is found by reading each one (`read_whole`: pyarrow by default) and named, as DuckDB's loader names it."""
    try:
        yield
    except LandingFileError:
        raise
    except Exception as error:  # noqa: BLE001 - Spark's errors have no common class over Py4J and Connect
        if read_whole is None:
            raise_naming_the_damaged_file(files, error, "Spark")
        else:
            raise_naming_the_damaged_file(files, error, "Spark", read_whole)
        raise


@contextlib.contextmanager
def _reading_settings(engine) -> Iterator[None]:
    """While a day loads: column names are matched exactly (a file may hold `Score` beside `score`, ignored as
    DuckDB's loader ignores it, which Spark's default case-insensitive resolution would call ambiguous), and a
    nanosecond timestamp is read as its number (`SparkEngine.register_files` makes it an instant)."""
    wanted = {"spark.sql.caseSensitive": "true", NANOS_AS_LONG: "true"}
    previous = {key: engine.spark.conf.get(key, "false") for key in wanted}
    for key, value in wanted.items():
        engine.spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            engine.spark.conf.set(key, value)


def spark_column_types(schemas: list[pa.Schema]) -> dict[str, str]:
    """The Spark SQL type each contract column is read as over all of a day's files (their Arrow schemas, whose types
    agree by family, `file_checks.check_footers`), the widest as DuckDB's union of the files reads it: text, bytes,
    32-bit integers when every file has them (else 64-bit), floats (double unless every file has float), timestamps
    (an instant if any file's has a zone). A file's all-NULL column takes the others' type."""
    by_column: dict[str, list[pa.DataType]] = {c: [] for c in contract.IMPRESSION_COLUMNS}
    for schema in schemas:
        for column in by_column:
            arrow_type = schema.field(column).type
            arrow_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
            if not pa.types.is_null(arrow_type):
                by_column[column].append(arrow_type)
    return {column: _widest(types) for column, types in by_column.items()}


def _widest(types: list[pa.DataType]) -> str:
    if not types:
        return "string"  # every value NULL: any type reads them alike
    if all(pa.types.is_binary(t) or pa.types.is_large_binary(t) for t in types):
        return "binary"
    if all(pa.types.is_timestamp(t) for t in types):
        return "timestamp" if any(t.tz is not None for t in types) else "timestamp_ntz"
    if all(pa.types.is_floating(t) or pa.types.is_integer(t) for t in types):
        if any(pa.types.is_floating(t) for t in types):
            return "float" if all(t == pa.float32() for t in types) else "double"
        return "int" if all(t == pa.int32() for t in types) else "bigint"
    return "string"


def load_partition(engine, landing: Path | str, source: str, partition_date: str, max_position: int = 50,
                   allow_empty: bool = False) -> PartitionLoad:
    """Replace one day of `raw.<source>_impressions` and its quarantine rows in the Spark engine's tables.

    `landing` is a folder of this machine or a URI (see the module docstring). The same refusals as
    `loads.load_partition` (a refused file raises LandingFileError before anything is written); a day with
    source-specific extras (landing/_extras) is refused: the Spark loader has no extras table yet, and dropping them
    silently would lose data."""
    day = dt.date.fromisoformat(partition_date)
    params = {**rules.rule_parameters(source, day, max_position), "partition_date": partition_date, "source": source}
    with _reading_settings(engine):
        if landing_uris.is_uri(landing):
            files = landing_uris.partition_files(engine.files, str(landing), source, day)
            extras = landing_uris.extras_files(engine.files, str(landing), source, day)
            _refuse_extras(extras)
            footers = spark_footers.read_footers(engine.spark, files)
            rows_by_file, _ = check_footers(footers, allow_empty)
            schemas = [schema for _, schema, _ in footers]
            stored = landing_uris.stored_paths(str(landing), files)
            read_whole = functools.partial(spark_footers.read_whole, engine.spark)
        else:
            files = partition_files(landing, source, day)
            _refuse_extras(landing_files(partition_dir(Path(landing) / contract.EXTRAS_DIR, source, day)))
            rows_by_file, _ = check_files(files, allow_empty)  # pyarrow's footers: DuckDB's loader's words and order
            schemas = [pq.read_schema(path) for path in files]
            stored = stored_paths(landing, files)
            read_whole = None
        labels = {str(f): stored_file for f, stored_file in zip(files, stored)}
        with _damaged_files_named(files, read_whole):
            accepted = _validate_and_write(engine, labels, spark_column_types(schemas), rows_by_file, source, params)
    counts = dict(fetch_rows(engine, _REASON_COUNTS, params))
    return PartitionLoad(source=source, partition_date=partition_date, files=tuple(str(f) for f in files),
                         accepted=accepted, rejected=sum(counts.values()), rejected_by_reason=counts,
                         extras=ExtrasLoad())


def _refuse_extras(extras: list) -> None:
    if extras:
        raise LandingFileError(f"{extras[0]}: source-specific extras are loaded by the duckdb engine only; "
                               "ingest this day with --engine duckdb")


def _validate_and_write(engine, files: dict[str, str], column_types: dict[str, str], rows_by_file: dict[str, int],
                        source: str, params: dict) -> int:
    """Register the day's files (read by the executors), refuse bad text and fully rejected files, then replace the
    raw partition and the quarantine rows together; returns the accepted rows."""
    try:
        engine.register_files(ROWS_VIEW, files, column_types)
        # The type of each column over all files (Spark widens as DuckDB's union does); schema only, no rows.
        schema = engine.spark.table(ROWS_VIEW).schema
        file_types = {c: sql_type(schema[c].dataType) for c in contract.IMPRESSION_COLUMNS}
        utf8 = rules.invalid_utf8_sql(file_types, ROWS_VIEW, "filename")
        if utf8:
            refuse_invalid_utf8(fetch_rows(engine, utf8))
        typed = rules.typed_sql(file_types, ROWS_VIEW, "filename", "stored_file")
        rejected = engine.frame(rules.rejected_sql(typed, _DUPLICATE_KEY), params)
        rejected = rejected.persist()
        try:
            rejected.createOrReplaceTempView(REJECTED_VIEW)
            refuse_fully_rejected_files(fetch_rows(engine, rules.rejected_by_file_sql(REJECTED_VIEW)), rows_by_file)
            quarantine = rules.quarantine_sql(typed, REJECTED_VIEW)
            if engine.table_exists(QUARANTINE):  # other sources' rejected rows of the day stay
                quarantine = f"{_OTHER_SOURCES_QUARANTINE} UNION ALL {quarantine}"
            # One commit for both: a failure or a crash before it leaves the day's raw rows and quarantine rows as
            # they were; after it, both are new.
            accepted, _ = engine.replace_partitions(
                [(("raw", f"{source}_impressions"), rules.accepted_sql(typed, REJECTED_VIEW)), (QUARANTINE, quarantine)],
                params, params["partition_date"])
        finally:
            rejected.unpersist()
            engine.unregister_frame(REJECTED_VIEW)
    finally:
        engine.unregister_frame(ROWS_VIEW)
    return accepted
