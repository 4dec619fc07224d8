"""The item catalogue on the Spark engine, written from the landing files by the executors: no catalogue row passes
through the driver.

DuckDB still validates the catalogue (`catalogue.load_items`: the refusals, the load's counts, the quarantined
items, which have no partition to live in on Spark) and its `raw.items` fixes each column's type (DuckDB's union of
the files). Spark then reads the same files, each column cast to that type (a column a file lacks is NULL), with
each file's delivery day and validity, classifies the rows with the same SQL (`catalogue.CLASSIFY_ITEMS`, rendered
for Spark) and replaces its `raw.items` with the rows kept, in DuckDB's column order. Its count must equal DuckDB's,
or nothing is written.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import sqlglot

from fair_pipeline.ingestion import landing_uris
from fair_pipeline.ingestion.catalogue import CLASSIFY_ITEMS, CONFLICTING_ID, EXACT_COPY, MISSING_ID
from fair_pipeline.ingestion.catalogue_dates import CATALOGUE_DATE, DATE_COLUMNS, VALID_FROM, VALID_UNTIL, deliveries
from fair_pipeline.ingestion.loads import BLANK_CHARACTERS, unused_name
from fair_pipeline.platform.engines.base import WarehouseWriteError
from fair_pipeline.platform.warehouse import quote_identifier

ITEMS = ("raw", "items")
_ITEMS_VIEW = "_items"
_CLASSIFIED_VIEW = "_classified_items"


# Spark has no unsigned or 128-bit integers: the narrowest Spark type holding every value.
_WIDER = {"UTINYINT": "SMALLINT", "USMALLINT": "INT", "UINTEGER": "BIGINT", "UBIGINT": "DECIMAL(20, 0)",
          "HUGEINT": "DECIMAL(38, 0)", "UHUGEINT": "DECIMAL(38, 0)"}


def spark_type(duckdb_type: str) -> str:
    """A DuckDB column type as Spark SQL's (sqlglot's mapping); raises ValueError naming a type it cannot map."""
    if duckdb_type.upper() in _WIDER:
        return _WIDER[duckdb_type.upper()]
    try:
        return sqlglot.exp.DataType.build(duckdb_type, dialect="duckdb").sql(dialect="spark")
    except (sqlglot.errors.ParseError, ValueError) as error:
        raise ValueError(f"raw.items column type {duckdb_type} has no Spark equivalent") from error


def write_items(engine, con: duckdb.DuckDBPyConnection, landing: Path | str) -> int:
    """Replace the Spark engine's raw.items from the catalogue files under `landing`, a folder or a URI listed through
    the engine's file system (after `load_items` loaded the same files into DuckDB over `con`); returns its rows."""
    from pyspark.sql import functions  # here: the ingestion assets import this module on either engine

    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE raw.items)").fetchall())
    delivered = [name for name in types if name not in DATE_COLUMNS]
    file_column = unused_name("_landing_file", set(types))
    frames = []
    found = (landing_uris.catalogue_deliveries(engine.files, str(landing)) if landing_uris.is_uri(landing)
             else deliveries(landing))
    for delivery in found:
        for path in delivery.files:
            read = engine.spark.read.parquet(str(path))
            columns = [(functions.col(f"`{name}`") if name in read.columns else functions.lit(None))
                       .cast(spark_type(types[name])).alias(name) for name in delivered]
            frames.append(read.select(
                *columns, functions.lit(str(path)).alias(file_column),
                # As text: py4j's conversion of a Python date refuses year 1 (ALWAYS_FROM)
                *(functions.lit(day.isoformat() if day else None).cast("date").alias(name) for name, day in
                  ((CATALOGUE_DATE, delivery.day), (VALID_FROM, delivery.valid_from),
                   (VALID_UNTIL, delivery.valid_until)))))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    union.createOrReplaceTempView(_ITEMS_VIEW)
    classify = CLASSIFY_ITEMS.format(columns=", ".join(quote_identifier(n) for n in sorted(delivered)),
                                     file=quote_identifier(file_column), missing=MISSING_ID,
                                     conflicting=CONFLICTING_ID, copy=EXACT_COPY)
    keep = f"SELECT {', '.join(quote_identifier(n) for n in types)} FROM {_CLASSIFIED_VIEW} WHERE _item_reason IS NULL"
    try:
        engine.frame(classify, {"blank": BLANK_CHARACTERS}).createOrReplaceTempView(_CLASSIFIED_VIEW)
        expected = con.execute("SELECT count(*) FROM raw.items").fetchone()[0]
        kept = engine.frame(f"SELECT count(*) AS n FROM ({keep})").collect()[0][0]
        if kept != expected:
            raise WarehouseWriteError(f"raw.items: Spark keeps {kept} catalogue rows where DuckDB keeps {expected}; "
                                      "the Spark catalogue was left as it was")
        return engine.replace_table(ITEMS, keep)
    finally:
        engine.unregister_frame(_CLASSIFIED_VIEW)
        engine.unregister_frame(_ITEMS_VIEW)
