"""Reads the EO sufficient statistics of a training window from the warehouse (glue for the asset)."""
from __future__ import annotations

import datetime as dt

import pandas as pd

from fair_pipeline.platform.engines import as_warehouse

# Sums the daily model `marts.eo_score_click_counts` over [start, end]: one small GROUP BY, run by the engine.
WINDOW_CLICK_COUNTS_SQL = """
SELECT group_id, position, score_value,
       CAST(SUM(impressions) AS BIGINT) AS impressions,
       CAST(SUM(clicks) AS BIGINT) AS clicks
FROM marts.eo_score_click_counts
WHERE partition_date BETWEEN $start AND $end
GROUP BY group_id, position, score_value
ORDER BY group_id NULLS LAST, position, score_value
"""


def read_click_counts(connection, start: dt.date, end: dt.date) -> pd.DataFrame:
    """Click counts per group x position x score value over the window (a `Warehouse` or a DuckDB connection)."""
    frame = as_warehouse(connection).query_df(WINDOW_CLICK_COUNTS_SQL, {"start": start, "end": end})
    if frame.empty:
        raise ValueError(f"marts.eo_score_click_counts has no rows for partitions {start} .. {end}")
    return frame
