"""Model selection by an elicited fairness metric (Hiranandani et al., fair quadratic metric elicitation).

`elicitation` (pure numpy/scipy) holds LPME, QPME and the fair variant, oracles, the query log and the ranking
of candidates by an elicited metric; `session` runs an interactive elicitation stored in DuckDB
(`fair-pipeline elicit`), `metric_oracle` builds the simulated or recorded oracle, `candidates` scores each
(ranker, alpha) candidate's per-group rates on held-out data, `store` writes `marts.elicited_metrics` and
`marts.model_ranking`, `assets` is the Dagster glue that moves `fair-ranker@champion`.
Inputs: ranker candidates, EO transforms, the position-bias curve, held-out impressions. Outputs: the elicited
metric, the ranking of candidates, the champion alias. Tests: tests/selection/.

    metric = elicit_fair_quadratic_metric(oracle, n_groups=2)     # oracle(r1, r2) -> bool
    metric.a, metric.B, metric.lam, metric.n_queries, metric(rates) -> cost
    ranking = rank_candidates(candidates_df, metric)
"""
from fair_pipeline.selection.elicitation import (
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
