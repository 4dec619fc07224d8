"""The EO transform's training window over `marts.eo_score_click_counts`: an asset partition's calendar days
(`eo_partition_window`, the span its partition mapping declares), or, without a partition, the newest N partitions
holding data before those held out for the fairness audit (`fair_pipeline.platform.windows.holdout_window`)."""
from __future__ import annotations

import datetime as dt

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.platform.windows import (
    DEFAULT_HOLDOUT_DAYS,
    DEFAULT_MIN_DAYS,
    PartitionWindow,
    calendar_window,
    holdout_window,
    window_before,
)

CLICK_COUNTS_TABLE = "marts.eo_score_click_counts"
DEFAULT_WINDOW_DAYS = 7


def eo_training_window(con, window_days: int = DEFAULT_WINDOW_DAYS, end: dt.date | str | None = None,
                       holdout_days: int = DEFAULT_HOLDOUT_DAYS) -> PartitionWindow:
    return holdout_window(con, CLICK_COUNTS_TABLE, window_days, end, holdout_days, error=EOInputError,
                          hint="materialize it for some days first")


def eo_partition_window(con, first: dt.date, last: dt.date, day: dt.date,
                        min_days: int = DEFAULT_MIN_DAYS) -> PartitionWindow:
    """Asset partition `day`'s training window: the calendar days first..last (before `day`, which is held out)."""
    return calendar_window(con, CLICK_COUNTS_TABLE, first, last, min_days=min_days, held_out=(day,),
                           error=EOInputError, hint="ingest (or backfill) earlier days first")


def eo_window_before(con, window_days: int, day: dt.date | str) -> PartitionWindow:
    """Asset partition `day`'s training window: the calendar days `day`-`window_days`..`day`-1."""
    return window_before(con, CLICK_COUNTS_TABLE, window_days, day, error=EOInputError,
                         hint="ingest (or backfill) earlier days first")
