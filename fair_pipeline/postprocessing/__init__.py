"""Post-processing: fair decisions derived from a fitted score, without retraining the scorer.

`hull` builds each group's empirical ROC points and their upper convex hull (the slides' construction);
`threshold` holds `ThresholdPostProcessor`, Hardt, Price & Srebro's (2016) optimal derived predictor: per-group
randomized thresholds whose mixing probabilities solve a small linear program (scipy HiGHS) under equalized
odds, equal opportunity or demographic parity, for accuracy, balanced accuracy or given error costs;
`reject_option` holds `RejectOptionClassifier`, Kamiran, Karim & Zhang's (2012) critical region around the
threshold where decisions flip by group, its threshold and margin picked by a grid under a fairness bound (as
AIF360 does); `rates` gives per-group expected TPR / FPR / selection rate / accuracy on held-out data with
cluster-robust SEs. All pure numpy / scipy / pandas / scikit-learn, scikit-learn style with
`sensitive_features=`. Inputs: scores, 0/1 labels, groups. Outputs: decisions or probabilities of a positive
decision, and rate tables. Tests: tests/postprocessing/

    from fair_pipeline.postprocessing import ThresholdPostProcessor
    pp = ThresholdPostProcessor(constraint="equalized_odds").fit(scores, y, sensitive_features=groups)
    pp.predict(new_scores, sensitive_features=new_groups, random_state=0)
"""
from fair_pipeline.postprocessing.hull import (
    PostProcessingInputError,
    RocCurve,
    UnseenGroupError,
    roc_convex_hull,
    roc_points,
    upper_hull_indices,
)
from fair_pipeline.postprocessing.rates import equalized_odds_gap, rate_table
from fair_pipeline.postprocessing.reject_option import RejectOptionClassifier
from fair_pipeline.postprocessing.threshold import ThresholdPostProcessor

__all__ = [
    "PostProcessingInputError",
    "RejectOptionClassifier",
    "RocCurve",
    "ThresholdPostProcessor",
    "UnseenGroupError",
    "equalized_odds_gap",
    "rate_table",
    "roc_convex_hull",
    "roc_points",
    "upper_hull_indices",
]
