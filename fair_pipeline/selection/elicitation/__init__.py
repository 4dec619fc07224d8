"""Fair quadratic metric elicitation (Hiranandani et al., "Quadratic Metric Elicitation for
Fairness and Beyond"): LPME, QPME and the fair variant, oracles, and model ranking (with paired, cluster-robust differences
between candidates: paired.py). Pure numpy/scipy/pandas."""
from fair_pipeline.selection.elicitation.evaluation import (
    ElicitationErrors,
    EvidenceSummary,
    elicitation_errors,
    evaluate_elicitation,
    pairwise_agreement,
    random_fair_metric,
    random_regular_metrics,
    sample_sphere_profiles,
    satisfies_assumption4,
)
from fair_pipeline.selection.elicitation.fair_qpme import (
    DEFAULT_RADIUS,
    cut_partitions,
    default_inner_radius,
    elicit_fair_quadratic_metric,
)
from fair_pipeline.selection.elicitation.lpme import LinearEstimate, lpme
from fair_pipeline.selection.elicitation.metric import (
    FairQuadraticMetric,
    group_pairs,
    metric_from_dict,
    metric_to_dict,
)
from fair_pipeline.selection.elicitation.oracles import (
    MissingPreferenceError,
    RecordedPreferenceOracle,
    ReplayMismatchError,
    ReplayOracle,
    SimulatedOracle,
)
from fair_pipeline.selection.elicitation.paired import PairedDifference, paired_cost_difference
from fair_pipeline.selection.elicitation.qpme import QuadraticEstimate, qpme
from fair_pipeline.selection.elicitation.query_log import (
    InconsistentOracleError,
    InconsistentOracleWarning,
    PreferenceCycle,
    QueryLog,
    QueryRecord,
)
from fair_pipeline.selection.elicitation.selection import rank_candidates
from fair_pipeline.selection.elicitation.validation import RateProfileError, check_rate_profile

__all__ = [
    "DEFAULT_RADIUS", "ElicitationErrors", "EvidenceSummary", "evaluate_elicitation", "FairQuadraticMetric", "InconsistentOracleError",
    "InconsistentOracleWarning", "LinearEstimate", "MissingPreferenceError", "PreferenceCycle",
    "PairedDifference", "QuadraticEstimate", "QueryLog", "QueryRecord", "RateProfileError", "RecordedPreferenceOracle",
    "ReplayMismatchError", "ReplayOracle",
    "SimulatedOracle", "check_rate_profile", "cut_partitions", "default_inner_radius",
    "elicit_fair_quadratic_metric", "elicitation_errors", "group_pairs", "lpme", "metric_from_dict",
    "metric_to_dict", "paired_cost_difference", "pairwise_agreement", "qpme", "random_fair_metric", "random_regular_metrics",
    "rank_candidates", "sample_sphere_profiles", "satisfies_assumption4",
]
