"""Explicit promotion: move `fair-ranker@champion` to the model a model_selection partition chose.

Each model_selection partition registers its winner as a version tagged with the partition; the asset itself
moves `champion` only for the newest partition with data. `promote` is the deliberate path: it refuses a
partition older than the newest with data (that would roll production back) unless `force` is given, and a
partition whose selection registered nothing (no estimable candidate, i.e. its blocking check failed).
"""
from __future__ import annotations

import datetime as dt

from fair_pipeline.platform import settings
from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, TAG_MODEL_PARTITION, MLflowTracking
from fair_pipeline.platform.warehouse import session
from fair_pipeline.platform.engines import log_snapshot, version_log, warehouse_files
from fair_pipeline.platform.windows import OBSERVATIONAL_TABLES, newest_partition


class PromotionError(Exception):
    """The partition has no selected model, or is older than the newest partition with data (without force)."""


def selected_versions(tracking: MLflowTracking, day: dt.date) -> list:
    """fair-ranker versions registered by model_selection for partition `day`, newest first."""
    client = tracking.client()
    found = tracking.retry(
        lambda: client.search_model_versions(f"name = '{FAIR_RANKER}' and tags.`{TAG_MODEL_PARTITION}` = "
                                             f"'{day.isoformat()}'"),
        f"find {FAIR_RANKER} versions of partition {day}")
    chosen = [v for v in found if "selection_run" in (v.tags or {})]
    return sorted(chosen, key=lambda v: int(v.version), reverse=True)


def newest_partition_with_data() -> dt.date | None:
    """The newest day holding observational impressions on either engine: a home run with `--engine spark` keeps
    its raw days in the Spark warehouse's partitions, not in the DuckDB file (whose raw tables stay empty), and
    `promote` takes no engine option, so both are read. Spark's live partitions come from its commit log (its
    latest checkpoint and the commits after it): read on this machine for a `file://` warehouse (no JVM,
    pyarrow), else through the configured Spark session."""
    with session(settings.warehouse_path(), read_only=True) as con:
        duckdb_newest = newest_partition(con)
    root = warehouse_files.location_uri(settings.spark_warehouse())
    entries = (list(log_snapshot.read_local(root).state.values()) if warehouse_files.is_local(root)
               else _spark_log(root))
    spark_days = [dt.date.fromisoformat(day) for table in OBSERVATIONAL_TABLES
                  for day in version_log.live_partition_dates(entries, table)]
    return max([*spark_days, *([duckdb_newest] if duckdb_newest else [])], default=None)


def _spark_log(root: str) -> list[version_log.Entry]:
    """The commit log of a warehouse only Spark's Hadoop client reads (hdfs://, ...), through the configured session
    (--spark-master and --spark-conf of the runs, from their environment variables; 20-45 s to start a JVM)."""
    from fair_pipeline.platform.engines.select import require_engine
    from fair_pipeline.platform.engines.spark_engine import spark_session

    require_engine("spark")
    spark = spark_session(master=settings.spark_master(), driver_memory=settings.spark_driver_memory(),
                          config=settings.spark_conf())
    return list(log_snapshot.read(spark, root).state.values())


def promote(day: dt.date, *, force: bool = False, tracking: MLflowTracking | None = None) -> str:
    """Move `fair-ranker@champion` to partition `day`'s selected model; returns one line saying what moved."""
    tracking = tracking or MLflowTracking()
    versions = selected_versions(tracking, day)
    if not versions:
        raise PromotionError(
            f"no {FAIR_RANKER} version was selected for partition {day}: its model_selection never ran or found no "
            f"estimable candidate (fair-pipeline backfill --start {day} --end {day} materializes it)")
    newest = newest_partition_with_data()
    if newest is not None and day < newest and not force:
        raise PromotionError(
            f"partition {day} is older than the newest partition with data ({newest}): promoting it would roll "
            f"{FAIR_RANKER}@{CHAMPION} back; pass --force to do that deliberately")
    version = versions[0]
    previous = tracking.set_champion(FAIR_RANKER, version.version)
    was = f"v{previous}" if previous else "unset"
    return (f"{FAIR_RANKER}@{CHAMPION} -> v{version.version} (partition {day}, candidate "
            f"{version.tags.get('candidate', '?')}); was {was}")


__all__ = ["PromotionError", "promote", "selected_versions"]
