"""Model selection by an elicited fairness metric (Hiranandani et al., fair quadratic metric elicitation).

`elicitation` (pure numpy/scipy) holds LPME, QPME and the fair variant, oracles, the query log and the ranking
of candidates by an elicited metric with paired, item-clustered cost differences vs the winner (`paired`);
`session` runs an interactive elicitation stored in DuckDB
(`fair-pipeline elicit`), `metric_oracle` builds the simulated or recorded oracle, `candidates` scores each
(ranker, alpha) candidate's per-group rates on held-out data, `families` adds the post-processors (derived
predictor, reject option) and the pairwise-fair ranker as candidates (fit rows from `family_data`), `store` writes `marts.elicited_metrics` and
`marts.model_ranking`, `assets` is the Dagster glue that moves `fair-ranker@champion`.
Inputs: ranker candidates, EO transforms, the position-bias curve, held-out impressions. Outputs: the elicited
metric, the ranking of candidates, the champion alias. Tests: tests/selection/.

    metric = elicit_fair_quadratic_metric(oracle, n_groups=2)     # oracle(r1, r2) -> bool
    metric.a, metric.B, metric.lam, metric.n_queries, metric(rates) -> cost
    metric = elicit_fair_quadratic_metric(person, n_groups=3, **INTERACTIVE_DEFAULTS)  # -> True/False/None (same)
    ranking = rank_candidates(candidates_df, metric)             # per-candidate cost, marginal CI
    ranking = rank_candidates(candidates_df, metric, held_out=item_rows, scores={name: scores})  # + diff_vs_winner, CI
    paired_cost_difference(metric, item_rows, score_a, score_b, labels, selection_rate=0.4, clusters=item_rows.item_id)
"""
from fair_pipeline.lazy_exports import lazy_exports

# Imported on first use: `fair-pipeline elicit --help` imports a light module of this package.
__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "elicitation.defaults": ("DEFAULT_RADIUS", "INTERACTIVE_DEFAULTS"),
    "elicitation.answer_model": ("ABOUT_THE_SAME", "ScriptedAnswerer"),
    "elicitation.evaluation": ("elicitation_errors", "pairwise_agreement", "random_fair_metric"),
    "elicitation.fair_qpme": ("elicit_fair_quadratic_metric",),
    "elicitation.metric": ("FairQuadraticMetric", "metric_from_dict", "metric_to_dict"),
    "elicitation.oracles": ("MissingPreferenceError", "RecordedPreferenceOracle", "SimulatedOracle"),
    "elicitation.paired": ("PairedDifference", "paired_cost_difference"),
    "elicitation.query_log": ("InconsistentOracleError", "InconsistentOracleWarning"),
    "elicitation.ranking": ("rank_candidates",),
    "elicitation.validation": ("RateProfileError",),
})
