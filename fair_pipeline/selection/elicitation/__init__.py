"""Fair quadratic metric elicitation (Hiranandani et al., "Quadratic Metric Elicitation for
Fairness and Beyond"): LPME, QPME and the fair variant, oracles, and model ranking (with paired, cluster-robust differences
between candidates: paired.py). Pure numpy/scipy/pandas;
the names below are imported on first use, so a light module of the package stays light."""

from fair_pipeline.lazy_exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "defaults": ("DEFAULT_RADIUS", "INTERACTIVE_DEFAULTS", "MAX_INTERACTIVE_GROUPS"),
    "answer_model": ("ABOUT_THE_SAME", "ScriptedAnswerer", "relative_difference"),
    "evaluation": (
        "ElicitationErrors", "EvidenceSummary", "elicitation_errors", "evaluate_elicitation", "pairwise_agreement",
        "random_fair_metric", "random_regular_metrics", "sample_sphere_profiles", "satisfies_assumption4"),
    "fair_qpme": (
        "cut_partitions", "default_inner_radius", "elicit_fair_quadratic_metric"),
    "_lpme": ("LinearEstimate", "lpme"),
    "metric": ("FairQuadraticMetric", "group_pairs", "metric_from_dict", "metric_to_dict"),
    "oracles": (
        "MissingPreferenceError", "RecordedPreferenceOracle", "ReplayMismatchError", "ReplayOracle", "SimulatedOracle"),
    "paired": ("PairedDifference", "paired_cost_difference"),
    "_qpme": ("QuadraticEstimate", "qpme"),
    "query_log": (
        "InconsistentOracleError", "InconsistentOracleWarning", "PreferenceCycle", "QueryLog", "QueryRecord"),
    "ranking": ("rank_candidates",),
    "validation": ("RateProfileError", "check_rate_profile"),
})
