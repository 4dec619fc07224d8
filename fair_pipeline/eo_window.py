"""The EO transform's training window: the newest N partitions of `marts.eo_score_click_counts` holding data,
ending at a given day (the run's newest partition) or at the newest partition overall. Counting days with
data means a gap in the logs widens the calendar span instead of shrinking the sample."""
from __future__ import annotations

import datetime as dt

from fair_pipeline.core.eo_aggregate import EOInputError
from fair_pipeline.position_bias_window import TrainingWindow
from fair_pipeline.warehouse import table_exists

CLICK_COUNTS_TABLE = "marts.eo_score_click_counts"
DEFAULT_WINDOW_DAYS = 7


def eo_training_window(con, window_days: int = DEFAULT_WINDOW_DAYS, end: dt.date | str | None = None) -> TrainingWindow:
    if int(window_days) != window_days or window_days < 1:
        raise EOInputError(f"window_days={window_days!r} must be a positive integer")
    if not table_exists(con, *CLICK_COUNTS_TABLE.split(".")):
        raise EOInputError(f"{CLICK_COUNTS_TABLE} does not exist; materialize it for some days first")
    end_date = None
    if end is not None:
        try:
            end_date = dt.date.fromisoformat(str(end)[:10])
        except ValueError as error:
            raise EOInputError(f"window end {end!r} is not a date (YYYY-MM-DD)") from error
    rows = con.execute(
        f"SELECT DISTINCT partition_date FROM {CLICK_COUNTS_TABLE}"
        " WHERE $end IS NULL OR partition_date <= $end ORDER BY 1",
        {"end": end_date},
    ).fetchall()
    if not rows:
        where = f" on or before {end_date}" if end_date else ""
        raise EOInputError(f"no partitions{where} in {CLICK_COUNTS_TABLE}; materialize it for some days first")
    dates = tuple(row[0] for row in rows[-int(window_days):])
    return TrainingWindow(first=dates[0], last=dates[-1], dates=dates)
