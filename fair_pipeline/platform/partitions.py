"""Daily partitions of the click logs (UTC dates of the serve time `ts`)."""
from __future__ import annotations

import os
import warnings

import dagster as dg

# Single-run backfill policies are the documented way to process a date range in one run; Dagster
# still labels the parameter beta, which would print a warning on every import.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
# The daily job mixes single-run log assets with one-partition-per-run stages; it runs one partition at a time.
warnings.filterwarnings("ignore", message="Found multiple backfill policies")

# Early enough for the shipped Open Bandit sample (November 2019); override for your own logs.
START_DATE_ENV = "FAIR_PIPELINE_START_DATE"
DEFAULT_START_DATE = "2019-11-01"

daily_partitions = dg.DailyPartitionsDefinition(start_date=os.environ.get(START_DATE_ENV, DEFAULT_START_DATE))
single_run = dg.BackfillPolicy.single_run()

# Trained stages read this many daily partitions (the default `window_days` of their configs); the partition
# mappings below declare it for the lineage view, the configs may read fewer or more days.
DEFAULT_WINDOW_DAYS = 7


def days_before(days: int = DEFAULT_WINDOW_DAYS) -> dg.TimeWindowPartitionMapping:
    """Partition D reads partitions D-days..D-1: a trained stage whose partition D is evaluated on day D."""
    return dg.TimeWindowPartitionMapping(start_offset=-days, end_offset=-1, allow_nonexistent_upstream_partitions=True)


def days_through(days: int = DEFAULT_WINDOW_DAYS) -> dg.TimeWindowPartitionMapping:
    """Partition D reads partitions D-days+1..D (a nuisance estimate that may use day D itself)."""
    return dg.TimeWindowPartitionMapping(start_offset=1 - days, end_offset=0, allow_nonexistent_upstream_partitions=True)


def partition_day(context: dg.AssetExecutionContext):
    """The asset partition being materialized, as a date (these assets run one partition per run)."""
    import datetime as dt

    if not context.has_partition_key:
        raise dg.Failure(description=f"{context.asset_key.to_user_string()} is daily-partitioned: materialize one "
                                     "partition per run (a partition key, not a range)")
    return dt.date.fromisoformat(context.partition_key)
