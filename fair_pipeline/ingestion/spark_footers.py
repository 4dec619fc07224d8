"""What the file-level checks need of landing files given by URI, read by Spark: each file's schema (as Arrow
types, the vocabulary of `file_checks.check_footers`) and its row count. Spark resolves each schema from the file's
footer through the session's Hadoop client and counts rows from the footers on the executors (one job for the
day); only names, types and counts reach this process. Works alike on a classic session and over Spark Connect.

pyspark is imported where it is used (the loaders import this module on either engine; pyspark is an extra).
Run while `spark_loads` reads a day (nanosecond timestamps read as their number, column names case-sensitive).
Spark has no nanosecond type, so a nanosecond `ts` is read as a 64-bit number; it is told from a plain integer by
reading the schema once more without that setting (Spark then names the file's TIMESTAMP(NANOS, zoned?) type).
A nanosecond timestamp in another contract column reads as its number (and fails that column's type as a number
would).
"""
from __future__ import annotations

import functools

import pyarrow as pa

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import LandingFileError

NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
_NANOS = {"TIMESTAMP(NANOS,true)": pa.timestamp("ns", tz="UTC"), "TIMESTAMP(NANOS,false)": pa.timestamp("ns")}


def read_footers(spark, files: list[str]) -> list[tuple[str, pa.Schema, int]]:
    """(file, Arrow schema, rows) of each file; a file Spark cannot read as Parquet raises LandingFileError naming it."""
    schemas = [(uri, _arrow_schema(spark, uri)) for uri in files]
    counts = _row_counts(spark, files)
    return [(uri, schema, counts.get(uri, 0)) for uri, schema in schemas]


def read_whole(spark, uri: str) -> None:
    """Read every contract column of every row of one file on the executors (nothing is returned): raises when a
    page is damaged."""
    from pyspark.sql import functions

    frame = spark.read.parquet(uri).select(*(functions.col(f"`{c}`") for c in contract.IMPRESSION_COLUMNS))
    frame.write.format("noop").mode("overwrite").save()


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _arrow_schema(spark, uri: str) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import LongType

    try:
        schema = spark.read.parquet(uri).schema
    except Exception as error:  # noqa: BLE001 - Spark's errors have no common class over Py4J and Connect
        raise LandingFileError(f"unreadable landing file {uri}: {_first_line(error)}") from error
    nanos = _nanos_type(spark, uri) if "ts" in schema.names and isinstance(schema["ts"].dataType, LongType) else None
    fields = []
    for field in schema.fields:
        if field.name == "ts" and nanos is not None:
            fields.append(pa.field("ts", nanos))
            continue
        try:
            fields.append(pa.field(field.name, to_arrow_type(field.dataType, timezone="UTC")))
        except Exception as error:  # noqa: BLE001 - pyspark raises several kinds for types Arrow lacks
            if field.name in contract.IMPRESSION_COLUMNS:
                raise LandingFileError(f"landing file {uri}: column {field.name!r} is {field.dataType.simpleString()}; "
                                       f"expected {contract.IMPRESSION_SCHEMA.field(field.name).type}") from error
            fields.append(pa.field(field.name, pa.binary()))  # never read: only its name is checked
    return pa.schema(fields)


def _nanos_type(spark, uri: str) -> pa.DataType | None:
    """The Arrow type of a file's nanosecond timestamp, or None when it has none."""
    spark.conf.set(NANOS_AS_LONG, "false")
    try:
        spark.read.parquet(uri).schema
    except Exception as error:  # noqa: BLE001 - see _arrow_schema
        return next((arrow for text, arrow in _NANOS.items() if text in str(error).replace(" ", "")), None)
    finally:
        spark.conf.set(NANOS_AS_LONG, "true")
    return None


def _row_counts(spark, files: list[str]) -> dict[str, int]:
    """Rows per file, from the footers (no column is read), in one job; a file with no rows is absent."""
    from pyspark.sql import functions

    if not files:
        return {}
    frames = [spark.read.parquet(uri).select(functions.lit(uri).alias("file")) for uri in files]
    counted = functools.reduce(lambda a, b: a.unionByName(b), frames).groupBy("file").count()
    return {row["file"]: int(row["count"]) for row in counted.collect()}
