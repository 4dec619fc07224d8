"""Public API of model selection by an elicited fairness metric (issue 8).

    metric = elicit_fair_quadratic_metric(oracle, n_groups=2)     # oracle(r1, r2) -> bool
    metric.a, metric.B, metric.lam, metric.n_queries, metric(rates) -> cost
    ranking = rank_candidates(candidates_df, metric)

The math lives in ``fair_pipeline.core.elicitation``; the interactive DuckDB-backed session is in
``fair_pipeline.elicitation_session``.
"""
from fair_pipeline.core.elicitation import (
    DEFAULT_RADIUS,
    FairQuadraticMetric,
    InconsistentOracleError,
    InconsistentOracleWarning,
    MissingPreferenceError,
    RateProfileError,
    RecordedPreferenceOracle,
    SimulatedOracle,
    elicit_fair_quadratic_metric,
    elicitation_errors,
    metric_from_dict,
    metric_to_dict,
    pairwise_agreement,
    random_fair_metric,
    rank_candidates,
)

__all__ = [
    "DEFAULT_RADIUS", "FairQuadraticMetric", "InconsistentOracleError", "InconsistentOracleWarning",
    "MissingPreferenceError", "RateProfileError", "RecordedPreferenceOracle", "SimulatedOracle",
    "elicit_fair_quadratic_metric", "elicitation_errors", "metric_from_dict", "metric_to_dict",
    "pairwise_agreement", "random_fair_metric", "rank_candidates",
]
