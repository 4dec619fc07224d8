"""The SQL path of position-bias estimation: sum the daily marts over a window, then the same numpy math.

`marts.position_score_bins` and `marts.position_swap_cells` (dbt_like_sql/marts/) are daily and additive, so a
training window is one GROUP BY over its partitions; only the aggregates (a few thousand rows) leave the warehouse
engine (DuckDB or Spark, through the `Warehouse` interface; a DuckDB connection is wrapped).
"""
from __future__ import annotations

import datetime as dt

import pandas as pd

from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.position_bias.estimators import DEFAULT_TRUNCATE, METHOD_POLICY, METHODS, estimate_from_aggregates

SCORE_BINS_TABLE = "marts.position_score_bins"
SWAP_CELLS_TABLE = "marts.position_swap_cells"

_WINDOW_SQL = {
    SCORE_BINS_TABLE: """
        SELECT policy, position, score_bin, sum(impressions) AS impressions, sum(clicks) AS clicks
        FROM marts.position_score_bins
        WHERE partition_date BETWEEN ? AND ? AND policy = ?
        GROUP BY policy, position, score_bin
        ORDER BY policy, position, score_bin
    """,
    SWAP_CELLS_TABLE: """
        SELECT policy, position, original_position, sum(impressions) AS impressions, sum(clicks) AS clicks
        FROM marts.position_swap_cells
        WHERE partition_date BETWEEN ? AND ? AND policy = ?
        GROUP BY policy, position, original_position
        ORDER BY policy, position, original_position
    """,
}


def window_aggregates(con, table: str, first_date: dt.date | str, last_date: dt.date | str, policy: str) -> pd.DataFrame:
    """One policy's aggregates summed over partitions first_date..last_date (inclusive) of a mart table."""
    if table not in _WINDOW_SQL:
        raise PositionBiasInputError(f"unknown aggregate table {table!r}; expected one of {sorted(_WINDOW_SQL)}")
    first, last = pd.Timestamp(first_date).date(), pd.Timestamp(last_date).date()
    if first > last:
        raise PositionBiasInputError(f"empty window: first_date {first} is after last_date {last}")
    return as_warehouse(con).query_df(_WINDOW_SQL[table], [first, last, policy])


def estimate_position_bias_sql(
    con,
    method: str,
    first_date: dt.date | str,
    last_date: dt.date | str,
    truncate: int | None = DEFAULT_TRUNCATE,
    bin_width: float | str = "auto",
    level: float = 0.95,
) -> pd.DataFrame:
    """`estimate_position_bias` over the mart partitions of a window (same numbers as the in-memory path)."""
    if method not in METHODS:
        raise PositionBiasInputError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    policy = METHOD_POLICY[method]
    if method == "adjacent_swap":
        swaps = window_aggregates(con, SWAP_CELLS_TABLE, first_date, last_date, policy)
        result = estimate_from_aggregates(method, swaps=swaps, truncate=truncate, level=level)
    else:
        bins = window_aggregates(con, SCORE_BINS_TABLE, first_date, last_date, policy)
        result = estimate_from_aggregates(method, bins=bins, truncate=truncate, bin_width=bin_width, level=level)
    result.attrs.update(first_date=str(first_date), last_date=str(last_date))
    return result
