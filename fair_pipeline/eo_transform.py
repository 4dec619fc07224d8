"""Equality-of-opportunity weighted-CDF transform (Nandy et al., Lemma 1, Theorem 1, appendix A.1).

Public API; the math lives in `fair_pipeline.core.eo_transform`, `core.eo_aggregate`, `core.quantiles`.
"""
from fair_pipeline.core.eo_aggregate import (
    CLICK_COUNT_COLUMNS,
    EOInputError,
    ScoreAggregate,
    click_counts,
    combine_click_counts,
    weighted_positives,
)
from fair_pipeline.core.eo_transform import (
    UnseenGroupError,
    WeightedCDFTransformer,
    fit_from_click_counts,
    with_alpha,
)
from fair_pipeline.eo_evaluation import RerankingReport, evaluate_rerankings
from fair_pipeline.eo_warehouse import read_click_counts

__all__ = [
    "CLICK_COUNT_COLUMNS",
    "EOInputError",
    "RerankingReport",
    "ScoreAggregate",
    "UnseenGroupError",
    "WeightedCDFTransformer",
    "click_counts",
    "combine_click_counts",
    "evaluate_rerankings",
    "fit_from_click_counts",
    "read_click_counts",
    "weighted_positives",
    "with_alpha",
]
