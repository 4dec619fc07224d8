"""Fair quadratic metric elicitation (Hiranandani et al., "Quadratic Metric Elicitation for
Fairness and Beyond"): LPME, QPME and the fair variant, oracles, and model ranking (with paired, cluster-robust differences
between candidates: paired.py). Pure numpy/scipy/pandas;
the names below are imported on first use, so a light module of the package stays light."""

from fair_pipeline.lazy_exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "fair_pipeline.selection.elicitation.defaults": ("DEFAULT_RADIUS",),
    "fair_pipeline.selection.elicitation.evaluation": (
        "ElicitationErrors", "EvidenceSummary", "elicitation_errors", "evaluate_elicitation", "pairwise_agreement",
        "random_fair_metric", "random_regular_metrics", "sample_sphere_profiles", "satisfies_assumption4"),
    "fair_pipeline.selection.elicitation.fair_qpme": (
        "cut_partitions", "default_inner_radius", "elicit_fair_quadratic_metric"),
    "fair_pipeline.selection.elicitation._lpme": ("LinearEstimate", "lpme"),
    "fair_pipeline.selection.elicitation.metric": ("FairQuadraticMetric", "group_pairs", "metric_from_dict", "metric_to_dict"),
    "fair_pipeline.selection.elicitation.oracles": (
        "MissingPreferenceError", "RecordedPreferenceOracle", "ReplayMismatchError", "ReplayOracle", "SimulatedOracle"),
    "fair_pipeline.selection.elicitation.paired": ("PairedDifference", "paired_cost_difference"),
    "fair_pipeline.selection.elicitation._qpme": ("QuadraticEstimate", "qpme"),
    "fair_pipeline.selection.elicitation.query_log": (
        "InconsistentOracleError", "InconsistentOracleWarning", "PreferenceCycle", "QueryLog", "QueryRecord"),
    "fair_pipeline.selection.elicitation.ranking": ("rank_candidates",),
    "fair_pipeline.selection.elicitation.validation": ("RateProfileError", "check_rate_profile"),
})
