"""Position-bias estimation (Nandy et al. 2.2): one entry point over impressions, plus the pieces assets use.

    estimate_position_bias(impressions, method="adjacent_pairwise", truncate=30)

`impressions` needs `position`, `click`, and `score` (score-binned methods) or `original_position`
(adjacent_swap); with a `policy` column the rows of the policy the method needs are used (randomized: shuffle,
adjacent_swap: adjacent_swap, the others: production); without one, all rows are taken as that policy.
When `request_id` is present, a (request_id, position) pair must not repeat (a doubly ingested log would).
The math runs on aggregates (`core.position_bias_aggregates`), the same ones the SQL marts produce;
`estimate_position_bias_sql(con, method, first_date, last_date)` is the out-of-core path over those marts.
Markdown table and figure: `fair_pipeline.position_bias_report`. Later stages read the curve the
`position_bias` asset chose with `load_chosen_position_bias(con)` (table `marts.position_bias_curves`).
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.core.position_bias import (
    AUTO_BINS_PER_SD,
    DEFAULT_TRUNCATE,
    METHOD_POLICY,
    METHODS,
    RESULT_COLUMNS,
    PositionBiasWarning,
    auto_bin_factor,
    estimate_from_aggregates,
)
from fair_pipeline.core.position_bias_aggregates import (
    FINE_BIN_WIDTH,
    PositionBiasInputError,
    aggregate_score_bins,
    aggregate_swap_cells,
    require_columns,
)
from fair_pipeline.core.position_bias_compare import compare_estimates
from fair_pipeline.position_bias_sql import estimate_position_bias_sql, window_aggregates
from fair_pipeline.position_bias_store import load_chosen_position_bias

__all__ = [
    "AUTO_BINS_PER_SD",
    "DEFAULT_TRUNCATE",
    "FINE_BIN_WIDTH",
    "METHODS",
    "METHOD_POLICY",
    "RESULT_COLUMNS",
    "PositionBiasInputError",
    "PositionBiasWarning",
    "aggregate_score_bins",
    "aggregate_swap_cells",
    "auto_bin_factor",
    "compare_estimates",
    "estimate_from_aggregates",
    "estimate_position_bias",
    "estimate_position_bias_sql",
    "load_chosen_position_bias",
    "window_aggregates",
]


def _check_unique_requests(impressions: pd.DataFrame) -> None:
    keys = ["request_id", "position"] + (["policy"] if "policy" in impressions.columns else [])
    duplicated = impressions.duplicated(subset=keys)
    if duplicated.any():
        row = impressions.loc[duplicated, keys].iloc[0]
        raise PositionBiasInputError(
            f"{int(duplicated.sum())} impressions repeat a (request_id, position) pair, e.g. request_id="
            f"{row['request_id']!r} position={row['position']!r}; was a log ingested twice?"
        )


def estimate_position_bias(
    impressions: pd.DataFrame,
    method: str = "adjacent_pairwise",
    truncate: int | None = DEFAULT_TRUNCATE,
    bin_width: float | str = "auto",
    level: float = 0.95,
) -> pd.DataFrame:
    """Position-bias curve w_j with delta-method CIs; see `core.position_bias.estimate_from_aggregates`.

    Not-estimable positions get a NaN weight and a `PositionBiasWarning` naming them (also listed in
    `result.attrs["warnings"]`); unusable input raises `PositionBiasInputError` (a ValueError)."""
    if method not in METHODS:
        raise PositionBiasInputError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    if not isinstance(impressions, pd.DataFrame):
        raise PositionBiasInputError(f"impressions must be a pandas DataFrame, got {type(impressions).__name__}")
    if impressions.empty:
        raise PositionBiasInputError("impressions is empty")
    if "request_id" in impressions.columns:
        _check_unique_requests(impressions)
    policy = METHOD_POLICY[method]
    if method == "adjacent_swap":
        require_columns(impressions, ["position", "original_position", "click"], "impressions")
        return estimate_from_aggregates(method, swaps=aggregate_swap_cells(impressions, default_policy=policy),
                                        truncate=truncate, level=level)
    if method in ("randomized", "naive") and "score" not in impressions.columns:
        impressions = impressions.assign(score=float("nan"))  # CTR ratios need no score
    require_columns(impressions, ["position", "score", "click"], "impressions")
    bins = aggregate_score_bins(impressions, default_policy=policy)
    return estimate_from_aggregates(method, bins=bins, truncate=truncate, bin_width=bin_width, level=level)
