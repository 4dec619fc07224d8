"""Daily partitions of the click logs (UTC dates of the serve time `ts`)."""
from __future__ import annotations

import datetime as dt
import os
import warnings
from pathlib import Path

import dagster as dg

from fair_pipeline.platform import settings
from fair_pipeline.platform.day_folders import DAY_FOLDER_PREFIX, folder_day
from fair_pipeline.platform.engines.warehouse_files import has_scheme
from fair_pipeline.platform.settings import (  # noqa: F401 - re-exported: the mappings' settings live here too
    DEFAULT_WINDOW_DAYS,
    MIN_WINDOW_DAYS_ENV,
    WINDOW_DAYS_ENV,
    min_window_days,
    window_days,
)
from fair_pipeline.platform.windows import PartitionWindow

# Single-run backfill policies are the documented way to process a date range in one run; Dagster
# still labels the parameter beta, which would print a warning on every import.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
# The daily job mixes single-run log assets with one-partition-per-run stages; it runs one partition at a time.
warnings.filterwarnings("ignore", message=r"Asset job \S+ materializes assets with varying BackfillPolicies")

START_DATE_ENV = settings.START_DATE_ENV
# Before anything has landed: the month of the shipped Open Bandit sample, the oldest logs the project ships.
DEFAULT_START_DATE = "2019-11-01"


def first_partition_day(landing: Path | None = None) -> str:
    """The first daily partition: $FAIR_PIPELINE_START_DATE if set, else the first landed day of any source, else
    DEFAULT_START_DATE (a landing URI the spark engine reads is not listed here). Read when the definitions load (a
    Dagster code location fixes its partitions then), so the UI lists the days since the first landed one instead of years of empty partitions; a process (or the UI after
    "Reload definitions") that loads them after older days landed starts there."""
    configured = os.environ.get(START_DATE_ENV, "").strip()
    if configured:
        try:
            return dt.date.fromisoformat(configured).isoformat()
        except ValueError:
            raise ValueError(f"{START_DATE_ENV}={configured!r} is not a date (YYYY-MM-DD)") from None
    location = str(landing) if landing else settings.landing_location()
    # A landing URI is listed through Spark, which loading definitions does not start (20-45 s): the CLI passes the
    # first day it listed as $FAIR_PIPELINE_START_DATE.
    through_spark = has_scheme(location) and settings.engine() == "spark"
    days = [] if through_spark else _landed_days(settings.landing_dir(location))
    return min(days) if days else DEFAULT_START_DATE


def _landed_days(landing: Path) -> list[str]:
    """The days of `<source>/date=D/` folders holding a Parquet file, over every source folder (names starting with
    "." or "_" are writers' bookkeeping; the item catalogues' delivery days are not log days). A `date=` folder not
    named as a day raises LandingFileError naming it, as ingestion does (`day_folders.folder_day`)."""
    if not landing.is_dir():
        return []
    sources = [f for f in landing.iterdir() if f.is_dir() and not f.name.startswith((".", "_")) and f.name != "items"]
    folders = [(folder_day(folder), folder) for source in sources for folder in source.glob(f"{DAY_FOLDER_PREFIX}*")
               if folder.is_dir()]
    return [day.isoformat() for day, folder in folders
            if any(path.suffix.lower() == ".parquet" for path in folder.rglob("*"))]


daily_partitions = dg.DailyPartitionsDefinition(start_date=first_partition_day())
single_run = dg.BackfillPolicy.single_run()

# Trained stages read this many calendar days. The partition mappings below are built from it, and the stages
# read their windows from those mappings (`mapped_window`), so the lineage view shows exactly what the code reads.
WINDOW_DAYS = window_days()


def days_before(days: int = WINDOW_DAYS) -> dg.TimeWindowPartitionMapping:
    """Partition D reads partitions D-days..D-1: a trained stage whose partition D is evaluated on day D."""
    return dg.TimeWindowPartitionMapping(start_offset=-days, end_offset=-1, allow_nonexistent_upstream_partitions=True)


def days_through(days: int = WINDOW_DAYS) -> dg.TimeWindowPartitionMapping:
    """Partition D reads partitions D-days+1..D (a nuisance estimate that may use day D itself)."""
    return dg.TimeWindowPartitionMapping(start_offset=1 - days, end_offset=0, allow_nonexistent_upstream_partitions=True)


def mapped_span(context: dg.AssetExecutionContext, dep: dg.AssetKey, day: dt.date) -> tuple[dt.date, dt.date]:
    """The calendar days partition `day` reads of `dep`, from the asset's own partition mapping: the window the
    lineage view declares is, by construction, the one the stage reads."""
    mapping = context.assets_def.get_partition_mapping(dep)
    if not isinstance(mapping, dg.TimeWindowPartitionMapping):
        raise dg.Failure(description=f"{context.asset_key.to_user_string()} reads {dep.to_user_string()} without a "
                                     f"time-window partition mapping ({type(mapping).__name__})")
    return day + dt.timedelta(days=mapping.start_offset), day + dt.timedelta(days=mapping.end_offset)


def window_metadata(window: PartitionWindow) -> dict[str, dg.MetadataValue]:
    """What a windowed asset reports about its window: the span, the days read, the days without data."""
    return {
        "window": window.span,
        "window_partitions": dg.MetadataValue.json([str(d) for d in window.dates]),
        "window_missing_partitions": dg.MetadataValue.json([str(d) for d in window.missing]),
        "held_out_partitions": dg.MetadataValue.json([str(d) for d in window.held_out]),
    }


def log_missing_days(context: dg.AssetExecutionContext, window: PartitionWindow, what: str) -> None:
    """A warning in the run's output (and the CLI's) naming the days of the window without data."""
    if window.missing:
        context.log.warning(f"{what} window {window.span}: no data on {window.missing_text} "
                            f"({len(window.dates)} of {len(window.dates) + len(window.missing)} days with data)")


def partition_day(context: dg.AssetExecutionContext) -> dt.date:
    """The asset partition being materialized, as a date (these assets run one partition per run)."""
    if not context.has_partition_key:
        raise dg.Failure(description=f"{context.asset_key.to_user_string()} is daily-partitioned: materialize one "
                                     "partition per run (a partition key, not a range)")
    return dt.date.fromisoformat(context.partition_key)
