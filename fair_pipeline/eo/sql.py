"""Reads the EO sufficient statistics of a training window from the warehouse (glue for the asset)."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from fair_pipeline.eo.aggregate import check_click_positions, position_weight_lookup
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

# Clicks per group and position over the window: the positions the weights must cover (groups x positions rows).
WINDOW_CLICKED_POSITIONS_SQL = """
SELECT group_id, position, CAST(SUM(clicks) AS BIGINT) AS clicks
FROM marts.eo_score_click_counts
WHERE partition_date BETWEEN $start AND $end
GROUP BY group_id, position
HAVING SUM(clicks) > 0
ORDER BY group_id NULLS LAST, position
"""

POSITION_WEIGHTS_VIEW = "_eo_position_weights"

# The transform's statistic per group and score value, the weights 1 / w_position applied where the rows are: the
# window's counts are summed per (group, position, score) first (integers, as the in-memory path does), then over
# positions with each click weighed 1 / w. The weighted sums are DECIMAL(38, 18): exact integer arithmetic, so they
# do not depend on the order threads or executors add them, and a value past 1e20 fails instead of rounding.
WINDOW_WEIGHTED_SUMS_SQL = f"""
WITH cells AS (
    SELECT group_id, position, score_value, SUM(impressions) AS impressions, SUM(clicks) AS clicks
    FROM marts.eo_score_click_counts
    WHERE partition_date BETWEEN $start AND $end
    GROUP BY group_id, position, score_value
)
SELECT c.group_id, c.score_value,
       CAST(SUM(c.impressions) AS BIGINT) AS impressions,
       CAST(SUM(c.clicks) AS BIGINT) AS clicks,
       CAST(COALESCE(SUM(CAST(CASE WHEN c.clicks > 0 THEN c.clicks / w.weight END AS DECIMAL(38, 18))), 0)
            AS DOUBLE) AS weighted_clicks,
       CAST(COALESCE(SUM(CAST(CASE WHEN c.clicks > 0 THEN c.clicks / (w.weight * w.weight) END
                              AS DECIMAL(38, 18))), 0) AS DOUBLE) AS weighted_click_squares
FROM cells c LEFT JOIN {POSITION_WEIGHTS_VIEW} w ON w.position = c.position
GROUP BY c.group_id, c.score_value
ORDER BY group_id NULLS LAST, score_value
"""


def read_click_counts(connection, start: dt.date, end: dt.date) -> pd.DataFrame:
    """Click counts per group x position x score value over the window (a `Warehouse` or a DuckDB connection)."""
    frame = as_warehouse(connection).query_df(WINDOW_CLICK_COUNTS_SQL, {"start": start, "end": end})
    if frame.empty:
        raise ValueError(f"marts.eo_score_click_counts has no rows for partitions {start} .. {end}")
    return frame


def read_weighted_sums(connection, start: dt.date, end: dt.date, position_weights) -> pd.DataFrame:
    """The window's WEIGHTED_SUM_COLUMNS (group_id, score_value, impressions, clicks, weighted_clicks,
    weighted_click_squares: one row per group and score value, whatever the positions) with clicks weighed
    1 / w_position of `position_weights` (array, index 0 = position 1; Mapping; or a (position, weight) frame),
    summed by the engine: what comes to the driver is bounded by groups x score bins, not by the positions or
    the rows. Raises EOInputError (naming positions, weights, groups and clicks) when a clicked position has no
    finite positive weight, ValueError when the window has no rows."""
    engine = as_warehouse(connection)
    params = {"start": start, "end": end}
    check_click_positions(engine.query_df(WINDOW_CLICKED_POSITIONS_SQL, params), position_weights)
    lookup = position_weight_lookup(position_weights)
    weights = pd.DataFrame({"position": np.array(list(lookup), dtype=np.int64),
                            "weight": np.array(list(lookup.values()), dtype=float)})
    # Only valid weights are joined (a clicked position without one was refused above).
    engine.register_frame(POSITION_WEIGHTS_VIEW,
                          weights[np.isfinite(weights["weight"]) & (weights["weight"] > 0)].reset_index(drop=True))
    try:
        frame = engine.query_df(WINDOW_WEIGHTED_SUMS_SQL, params)
    finally:
        engine.unregister_frame(POSITION_WEIGHTS_VIEW)
    if frame.empty:
        raise ValueError(f"marts.eo_score_click_counts has no rows for partitions {start} .. {end}")
    return frame.astype({"impressions": np.int64, "clicks": np.int64, "weighted_clicks": float,
                         "weighted_click_squares": float})
