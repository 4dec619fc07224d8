"""A Spark warehouse written by the earlier layout, before the commit log (`version_log`): adopted in one commit.

That layout kept a table's live rows in place (`<root>/<schema>/<table>/partition_date=YYYY-MM-DD/part-*.parquet`,
an unpartitioned table's under `<table>/current/`), its schema in `<table>/_schema.json` (in `current/` for an
unpartitioned table) and the views in `<root>/_views.json`, and replaced a partition by journaled renames. This
release reads only what the commit log names, so those tables would look absent while Dagster's event log says their
days were ingested. When the log is empty, `adopt` reads each such table through Spark (partition discovery on
`partition_date=`, the schema from `_schema.json`: column order and types as they were), writes it as one new version
and commits every table and view in one commit: until that commit nothing is live, so a run killed midway leaves
the warehouse as it was and the next open adopts again. The earlier files are left in place (no commit names them).

Everything goes through Spark's readers and writers (so it holds over Spark Connect). Spark's readers skip files whose
names start with `_`; the `_schema.json`, `_views.json` and journal reads lift that for their own read
(`ignoredPathSegmentRegex`). A brand-new root fails the first read at once and is left untouched.
"""
from __future__ import annotations

import json
import logging
import re

from pyspark.sql import functions
from pyspark.sql.types import StructType

from fair_pipeline.platform.engines import version_log
from fair_pipeline.platform.engines.base import WarehouseWriteError
from fair_pipeline.platform.engines.version_log import Entry
from fair_pipeline.platform.engines.warehouse_files import join

PARTITION_COLUMN = "partition_date"
UNPARTITIONED_DATA = "current"
_SCHEMAS = "*/*/{_schema.json,current/_schema.json}"
_VIEWS = "_views.json"
_JOURNALS = "{_swap/*.json,*/*/_swap/*.json}"  # an interrupted swap of the earlier layout
_SCHEMA_PATH = r"/([^/]+)/([^/]+)/(current/)?_schema\.json$"
_VISIBLE = {"ignoredPathSegmentRegex": r"^\."}  # `_`-named files read; `.crc` and other dot files still skipped

logger = logging.getLogger(__name__)


class EarlierLayoutError(WarehouseWriteError):
    """The warehouse's earlier-layout tables cannot be adopted as they are."""


def _missing(error) -> bool:
    condition = error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()
    return condition == "PATH_NOT_FOUND"


def _texts(spark, uri: str) -> list[tuple[str, str]]:
    """(path, whole text) of the small files a glob names, read by Spark; none if nothing matches."""
    from pyspark.errors import AnalysisException

    try:
        frame = spark.read.options(**_VISIBLE).text(uri, wholetext=True)
        rows = frame.select(functions.col("_metadata.file_path").alias("path"), "value").collect()
    except AnalysisException as error:
        if _missing(error):
            return []
        raise
    return [(row["path"], row["value"]) for row in rows]


def earlier_schemas(spark, root: str) -> dict[str, tuple[StructType, bool]]:
    """The earlier layout's tables under `root`: "schema.table" -> (schema, partitioned)."""
    tables = {}
    for path, text in _texts(spark, join(root, _SCHEMAS)):
        match = re.search(_SCHEMA_PATH, path)
        if match:
            tables[f"{match[1]}.{match[2]}"] = (StructType.fromJson(json.loads(text)), match[3] is None)
    return tables


def _check_no_interrupted_swap(spark, root: str) -> None:
    from pyspark.errors import AnalysisException

    try:
        journals = [row["path"] for row in spark.read.format("binaryFile").options(**_VISIBLE)
                    .load(join(root, _JOURNALS)).select("path").limit(3).collect()]
    except AnalysisException as error:
        if _missing(error):
            return
        raise
    if journals:
        raise EarlierLayoutError(
            f"the Spark warehouse {root} was written by the earlier storage layout and a partition swap was "
            f"interrupted ({', '.join(journals)}): its tables may be mid-swap, so they are not adopted. Either open "
            f"it once with the earlier release (it completes the swap), or give a new --spark-warehouse location "
            f"and rebuild it from the landing files by a backfill.")


def adopt(tables, root: str) -> list[str]:
    """Adopt the earlier layout's tables and views under `root` into `tables` (a `spark_tables.VersionedTables`
    whose log is empty) in one commit; returns the names adopted (none for a root without them)."""
    spark = tables.spark
    schemas = earlier_schemas(spark, root)
    if not schemas:
        return []
    _check_no_interrupted_swap(spark, root)
    entries: list[Entry] = []
    adopted = []
    for name, (schema, partitioned) in sorted(schemas.items()):
        table_entries = (_adopt_partitioned if partitioned else _adopt_unpartitioned)(tables, name, schema)
        entries += table_entries
        adopted.append((name, table_entries))
    # A partitioned table none of whose days had rows kept no day directory: it is committed as "no rows" on the
    # first adopted day, so that it exists with its schema (as it did) and views over it resolve.
    days = sorted(e.partition for e in entries if e.kind == version_log.PARTITION)
    for index, (name, table_entries) in enumerate(adopted):
        schema, partitioned = schemas[name]
        if partitioned and not table_entries and days:
            adopted[index] = (name, [Entry(version_log.PARTITION, name, days[0], None, 0, schema.json())])
            entries += adopted[index][1]
    views = _texts(spark, join(root, _VIEWS))
    # A view's place among its commit's views is kept in `rows` (views defined on views are registered in order).
    view_sql = json.loads(views[0][1]) if views else {}
    entries += [Entry(version_log.VIEW, name, "", None, place, sql) for place, (name, sql) in enumerate(view_sql.items())]
    if not entries:
        return []
    version_log.commit(spark, root, entries)
    tables.refresh()
    for name, table_entries in adopted:
        rows = sum(e.rows for e in table_entries)
        days = [e.partition for e in table_entries if e.kind == version_log.PARTITION]
        if not table_entries:
            logger.warning("%s of the earlier layout of %s has no rows and no day: not adopted", name, root)
            continue
        logger.warning("adopted %s from the earlier layout of %s: %s rows%s", name, root, f"{rows:,}",
                       f" in {len(days)} days ({days[0]}..{days[-1]})" if days else "")
    for name in view_sql:
        logger.warning("adopted view %s from the earlier layout of %s", name, root)
    return [name for name, table_entries in adopted if table_entries] + list(view_sql)


def _adopt_partitioned(tables, name: str, schema: StructType) -> list[Entry]:
    """Every day of the table as one new version (one partition directory per day); entries per day with rows."""
    from pyspark.errors import AnalysisException

    spark = tables.spark
    table_dir = tables.table_dir(name)
    try:
        frame = spark.read.schema(schema).option("basePath", table_dir).parquet(join(table_dir, f"{PARTITION_COLUMN}=*"))
        frame.schema  # analysed now: a Spark Connect client analyses lazily, and a missing path must raise here
    except AnalysisException as error:
        if _missing(error):  # no day had rows
            return []
        raise
    version = version_log.new_id()
    directory = tables.version_dir(name, version)
    frame.select(*schema.names).write.partitionBy(PARTITION_COLUMN).parquet(directory)
    counts = (spark.read.schema(schema).parquet(directory).groupBy(PARTITION_COLUMN).count()
              .orderBy(PARTITION_COLUMN).collect())
    return [Entry(version_log.PARTITION, name, row[0].isoformat(), version, row[1], schema.json())
            for row in counts if row[1]]


def _adopt_unpartitioned(tables, name: str, schema: StructType) -> list[Entry]:
    spark = tables.spark
    version = version_log.new_id()
    directory = tables.version_dir(name, version)
    spark.read.schema(schema).parquet(join(tables.table_dir(name), UNPARTITIONED_DATA)).select(*schema.names) \
        .write.parquet(directory)
    rows = spark.read.schema(schema).parquet(directory).count()
    return [Entry(version_log.TABLE, name, "", version, rows, schema.json())]
