"""Daily partitions of the click logs (UTC dates of the serve time `ts`)."""
from __future__ import annotations

import datetime as dt
import os
import warnings

import dagster as dg

from fair_pipeline.platform.windows import DEFAULT_MIN_DAYS, PartitionWindow

# Single-run backfill policies are the documented way to process a date range in one run; Dagster
# still labels the parameter beta, which would print a warning on every import.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
# The daily job mixes single-run log assets with one-partition-per-run stages; it runs one partition at a time.
warnings.filterwarnings("ignore", message=r"Asset job \S+ materializes assets with varying BackfillPolicies")

# Early enough for the shipped Open Bandit sample (November 2019); override for your own logs.
START_DATE_ENV = "FAIR_PIPELINE_START_DATE"
DEFAULT_START_DATE = "2019-11-01"

daily_partitions = dg.DailyPartitionsDefinition(start_date=os.environ.get(START_DATE_ENV, DEFAULT_START_DATE))
single_run = dg.BackfillPolicy.single_run()

# Trained stages read this many calendar days. The partition mappings below are built from it, and the stages
# read their windows from those mappings (`mapped_window`), so the lineage view shows exactly what the code reads.
WINDOW_DAYS_ENV = "FAIR_PIPELINE_WINDOW_DAYS"
MIN_WINDOW_DAYS_ENV = "FAIR_PIPELINE_MIN_WINDOW_DAYS"
DEFAULT_WINDOW_DAYS = 7


def _positive_int_env(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name}={text!r} must be a positive integer (days)")
    return int(text)


def window_days() -> int:
    """The training window's length in days ($FAIR_PIPELINE_WINDOW_DAYS, default 7); read when the definitions
    are built, since the partition mappings are made from it."""
    return _positive_int_env(WINDOW_DAYS_ENV, DEFAULT_WINDOW_DAYS)


def min_window_days() -> int:
    """Days with data a window needs before a stage trains on it ($FAIR_PIPELINE_MIN_WINDOW_DAYS, default 1):
    below it the stage fails with "not enough data" instead of reaching further back."""
    return _positive_int_env(MIN_WINDOW_DAYS_ENV, DEFAULT_MIN_DAYS)


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
