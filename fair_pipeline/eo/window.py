"""The EO transform's training window: the newest N partitions of `marts.eo_score_click_counts` holding data
before the partitions held out for the fairness audit (`fair_pipeline.platform.windows.holdout_window`)."""
from __future__ import annotations

import datetime as dt

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.platform.windows import DEFAULT_HOLDOUT_DAYS, PartitionWindow, holdout_window, window_before

CLICK_COUNTS_TABLE = "marts.eo_score_click_counts"
DEFAULT_WINDOW_DAYS = 7


def eo_training_window(con, window_days: int = DEFAULT_WINDOW_DAYS, end: dt.date | str | None = None,
                       holdout_days: int = DEFAULT_HOLDOUT_DAYS) -> PartitionWindow:
    return holdout_window(con, CLICK_COUNTS_TABLE, window_days, end, holdout_days, error=EOInputError,
                          hint="materialize it for some days first")


def eo_window_before(con, window_days: int, day: dt.date | str) -> PartitionWindow:
    """Asset partition `day`'s training window: the newest `window_days` partitions with data before `day`."""
    return window_before(con, CLICK_COUNTS_TABLE, window_days, day, error=EOInputError,
                         hint="ingest (or backfill) earlier days first")
