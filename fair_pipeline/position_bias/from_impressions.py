"""`estimate_position_bias`: one entry point from impressions (a DataFrame) to a position-bias curve.

`impressions` needs `position`, `click`, and `score` (score-binned methods) or `original_position`
(adjacent_swap); with a `policy` column the rows of the policy the method needs are used (randomized: shuffle,
adjacent_swap: adjacent_swap, the others: production); without one, all rows are taken as that policy.
When `request_id` is present, a (request_id, position) pair must not repeat (a doubly ingested log would).
The math runs on aggregates (`position_bias.aggregates`), the same ones the SQL marts produce.
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.position_bias.aggregates import (
    PositionBiasInputError,
    aggregate_score_bins,
    aggregate_swap_cells,
    require_columns,
)
from fair_pipeline.position_bias.estimators import DEFAULT_TRUNCATE, METHOD_POLICY, METHODS, estimate_from_aggregates


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
    """Position-bias curve w_j with delta-method CIs; see `estimators.estimate_from_aggregates`.

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
