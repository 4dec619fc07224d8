"""A Spark warehouse written by the earlier layout, before the commit log (`version_log`): refused by name.

That layout kept a table's live rows in place (`<root>/<schema>/<table>/partition_date=YYYY-MM-DD/part-*.parquet`,
an unpartitioned table's under `<table>/current/`), its schema in `<table>/_schema.json` and the views in
`<root>/_views.json`. This release reads only what the commit log names, so those tables would look absent while
Dagster's event log says their days were ingested. Adopting them needs the schemas' column order, which only the
`_schema.json` files hold, and Spark's readers skip every file whose name starts with `_` (no DataFrame read can
reach them); rather than guess an order, opening such a warehouse with an empty commit log stops with one error
naming the warehouse, the tables and days found and what to do. The probe is one listing through Spark (its
readers, so it holds over Spark Connect): a brand-new root fails it at once and is left untouched.
"""
from __future__ import annotations

from fair_pipeline.platform.engines.base import WarehouseWriteError
from fair_pipeline.platform.engines.warehouse_files import join

# The earlier layout's data directories, three levels under the root (the commit log's versions sit one level
# deeper, under `write_id=`, so a glob of these never matches them).
_DATA_DIRS = "*/*/{partition_date=*,current}"
_TABLE_AND_DAY = r"/([^/]+)/([^/]+)/(?:partition_date=(\d{4}-\d{2}-\d{2})|current)/[^/]*$"


class EarlierLayoutError(WarehouseWriteError):
    """The warehouse holds tables of the earlier layout and no commit log."""


def earlier_tables(spark, root: str) -> dict[str, tuple[str | None, str | None]]:
    """The earlier layout's tables under `root` with data files ("schema.table" -> first and last day, None for an
    unpartitioned table): one row per table reaches the driver; file contents are never read."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions

    try:
        files = spark.read.format("binaryFile").load(join(root, _DATA_DIRS)).select("path")
    except AnalysisException as error:
        condition = error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()
        if condition == "PATH_NOT_FOUND":  # nothing of that layout (a brand-new or commit-log warehouse)
            return {}
        raise
    parts = files.select(
        functions.concat_ws(".", functions.regexp_extract("path", _TABLE_AND_DAY, 1),
                            functions.regexp_extract("path", _TABLE_AND_DAY, 2)).alias("table"),
        functions.nullif(functions.regexp_extract("path", _TABLE_AND_DAY, 3), functions.lit("")).alias("day"))
    rows = (parts.where(functions.col("table") != ".").groupBy("table")
            .agg(functions.min("day").alias("first"), functions.max("day").alias("last")).collect())
    return {row["table"]: (row["first"], row["last"]) for row in rows}


def refuse_earlier_layout(spark, root: str) -> None:
    """Raise `EarlierLayoutError` if `root` (whose commit log is empty) holds tables of the earlier layout."""
    tables = earlier_tables(spark, root)
    if not tables:
        return
    days = [day for span in tables.values() for day in span if day]
    named = ", ".join(f"{name} ({first}..{last})" if first else name for name, (first, last) in sorted(tables.items()))
    backfill = (f"fair-pipeline backfill --engine spark --spark-warehouse NEW_URI --start {min(days)} --end {max(days)}"
                if days else "fair-pipeline backfill --engine spark --spark-warehouse NEW_URI --start D1 --end D2")
    raise EarlierLayoutError(
        f"the Spark warehouse {root} was written by the earlier storage layout (tables in place, no commit log "
        f"under {join(root, '_commits')}): {named}. This release reads only the tables its commit log names, so "
        f"they would look absent. Give a new --spark-warehouse location (or $FAIR_PIPELINE_SPARK_WAREHOUSE) and "
        f"rebuild it from the landing files: {backfill}. The earlier warehouse is not changed; remove it once the "
        f"backfill is done.")
