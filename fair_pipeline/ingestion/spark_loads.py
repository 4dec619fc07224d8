"""Loading one day's landing files with the Spark engine: the executors read the files and run the contract's
rules (`rules`, the same SQL DuckDB runs, rendered by `engines.spark_sql`); the raw partition and the day's
quarantine rows are written by Spark (`SparkEngine.replace_partition`: staged, checked, swapped in whole).

The driver reads the files' footers (schema, row counts: `loads.check_files`, the same file-level refusals as
DuckDB's loader), and receives per-file and per-reason counts; no row passes through it.
"""
from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract, rules
from fair_pipeline.ingestion.file_checks import check_files
from fair_pipeline.ingestion.landing import LandingFileError, landing_files, partition_dir, partition_files
from fair_pipeline.ingestion.loads import ExtrasLoad, PartitionLoad, stored_paths
from fair_pipeline.platform.engines.base import fetch_rows

ROWS_VIEW = "__landing_rows"
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


def sql_type(arrow_type: pa.DataType) -> str:
    """A file column's type in DuckDB's names (`rules.TARGET_TYPES`' vocabulary), as DuckDB would read it: the
    rules use a column as it is only when this equals its target type."""
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP WITH TIME ZONE" if arrow_type.tz is not None else "TIMESTAMP"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "VARCHAR"
    names = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.float32(): "FLOAT"}
    return names.get(arrow_type, str(arrow_type).upper())


@contextlib.contextmanager
def _case_sensitive(engine) -> Iterator[None]:
    """Column names are matched exactly while a day loads: a file may hold `Score` beside `score` (ignored, as
    DuckDB's loader ignores it), which Spark's default case-insensitive resolution would call ambiguous."""
    key = "spark.sql.caseSensitive"
    previous = engine.spark.conf.get(key, "false")
    engine.spark.conf.set(key, "true")
    try:
        yield
    finally:
        engine.spark.conf.set(key, previous)


def load_partition(engine, landing: Path, source: str, partition_date: str, max_position: int = 50,
                   allow_empty: bool = False) -> PartitionLoad:
    """Replace one day of `raw.<source>_impressions` and its quarantine rows in the Spark engine's tables.

    The same refusals as `loads.load_partition` (a refused file raises LandingFileError before anything is
    written); a day with source-specific extras (landing/_extras) is refused: the Spark loader has no extras
    table yet, and dropping them silently would lose data."""
    day = dt.date.fromisoformat(partition_date)
    files = partition_files(landing, source, day)
    extras = landing_files(partition_dir(Path(landing) / contract.EXTRAS_DIR, source, day))
    if extras:
        raise LandingFileError(f"{extras[0]}: source-specific extras are loaded by the duckdb engine only; "
                               "ingest this day with --engine duckdb")
    rows_by_file, _ = check_files(files, allow_empty)
    schema = pq.read_schema(files[0])
    file_types = {c: sql_type(schema.field(c).type) for c in contract.IMPRESSION_COLUMNS}
    stored = dict(zip((str(f) for f in files), stored_paths(landing, files)))
    params = {"partition_date": partition_date, "source": source}
    with _case_sensitive(engine):
        engine.register_files(ROWS_VIEW, stored, list(contract.IMPRESSION_COLUMNS))
        typed = rules.typed_sql(file_types, ROWS_VIEW, "filename", "stored_file")
        rejected = engine.frame(rules.rejected_sql(typed, _DUPLICATE_KEY), rules.rule_parameters(source, day, max_position))
        rejected = rejected.persist()
        try:
            rejected.createOrReplaceTempView(REJECTED_VIEW)
            _refuse_fully_rejected_files(engine, rows_by_file)
            accepted = engine.replace_partition(("raw", f"{source}_impressions"),
                                                rules.accepted_sql(typed, REJECTED_VIEW), params, partition_date)
            quarantine = rules.quarantine_sql(typed, REJECTED_VIEW)
            if engine.table_exists(QUARANTINE):  # other sources' rejected rows of the day stay
                quarantine = f"{_OTHER_SOURCES_QUARANTINE} UNION ALL {quarantine}"
            engine.replace_partition(QUARANTINE, quarantine, params, partition_date)
        finally:
            rejected.unpersist()
            engine.unregister_frame(REJECTED_VIEW)
            engine.unregister_frame(ROWS_VIEW)
    counts = dict(fetch_rows(engine, _REASON_COUNTS, params))
    return PartitionLoad(source=source, partition_date=partition_date, files=tuple(str(f) for f in files),
                         accepted=accepted, rejected=sum(counts.values()), rejected_by_reason=counts,
                         extras=ExtrasLoad())


def _refuse_fully_rejected_files(engine, rows_by_file: dict[str, int]) -> None:
    """As DuckDB's loader: a file none of whose rows pass is a broken file; fail before anything is replaced."""
    for path, rejected, reason in fetch_rows(engine, rules.rejected_by_file_sql(REJECTED_VIEW)):
        if rejected == rows_by_file[path]:
            raise LandingFileError(f"landing file {path}: all {rejected} rows rejected (most common reason: {reason}); "
                                   "the partition was left unchanged")
