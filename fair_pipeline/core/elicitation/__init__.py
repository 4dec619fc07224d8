"""Fair quadratic metric elicitation (Hiranandani et al., "Quadratic Metric Elicitation for
Fairness and Beyond"): LPME, QPME and the fair variant, oracles, and model ranking."""
from .evaluation import (
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
from .fair_qpme import DEFAULT_RADIUS, cut_partitions, default_inner_radius, elicit_fair_quadratic_metric
from .lpme import LinearEstimate, lpme
from .metric import FairQuadraticMetric, group_pairs, metric_from_dict, metric_to_dict
from .oracles import (
    MissingPreferenceError,
    RecordedPreferenceOracle,
    ReplayMismatchError,
    ReplayOracle,
    SimulatedOracle,
)
from .qpme import QuadraticEstimate, qpme
from .query_log import (
    InconsistentOracleError,
    InconsistentOracleWarning,
    PreferenceCycle,
    QueryLog,
    QueryRecord,
)
from .selection import rank_candidates
from .validation import RateProfileError, check_rate_profile

__all__ = [
    "DEFAULT_RADIUS", "ElicitationErrors", "EvidenceSummary", "evaluate_elicitation", "FairQuadraticMetric", "InconsistentOracleError",
    "InconsistentOracleWarning", "LinearEstimate", "MissingPreferenceError", "PreferenceCycle",
    "QuadraticEstimate", "QueryLog", "QueryRecord", "RateProfileError", "RecordedPreferenceOracle",
    "ReplayMismatchError", "ReplayOracle",
    "SimulatedOracle", "check_rate_profile", "cut_partitions", "default_inner_radius",
    "elicit_fair_quadratic_metric", "elicitation_errors", "group_pairs", "lpme", "metric_from_dict",
    "metric_to_dict", "pairwise_agreement", "qpme", "random_fair_metric", "random_regular_metrics",
    "rank_candidates", "sample_sphere_profiles", "satisfies_assumption4",
]
