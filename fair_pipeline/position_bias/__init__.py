"""Position bias: how much more a slot is looked at than another (Nandy et al. section 2.2).

Estimators of the curve w_j with delta-method CIs from randomized traffic (`shuffle`, `adjacent_swap`)
or from observational logs by score bins (`estimators`, `aggregates`, `compare`: pure numpy/pandas);
`estimate_position_bias(impressions, method=...)` over a DataFrame (`from_impressions`) and
`estimate_position_bias_sql(con, method, first_date, last_date)` over the marts (`sql`); the training window and
every method's estimate (`window`), the stored curves (`store`: `marts.position_bias_curves`, read by later stages
with `load_chosen_position_bias(con)`), tables and figures (`report`), simulated aggregates for accuracy studies
(`simulated_aggregates`) and the Dagster asset (`assets`).
Inputs: `marts.position_score_bins`, `marts.position_swap_cells`. Outputs: the chosen curve and all methods'.
Tests: tests/position_bias/.

    from fair_pipeline.position_bias import estimate_position_bias
    estimate_position_bias(impressions, method="adjacent_pairwise", truncate=30)
"""
from fair_pipeline.position_bias.aggregates import (
    FINE_BIN_WIDTH,
    PositionBiasInputError,
    aggregate_score_bins,
    aggregate_swap_cells,
)
from fair_pipeline.position_bias.compare import compare_estimates
from fair_pipeline.position_bias.from_impressions import estimate_position_bias
from fair_pipeline.position_bias.estimators import (
    AUTO_BINS_PER_SD,
    DEFAULT_TRUNCATE,
    METHOD_POLICY,
    METHODS,
    RESULT_COLUMNS,
    PositionBiasWarning,
    auto_bin_factor,
    estimate_from_aggregates,
)
from fair_pipeline.position_bias.sql import estimate_position_bias_sql, window_aggregates
from fair_pipeline.position_bias.store import load_chosen_position_bias

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
