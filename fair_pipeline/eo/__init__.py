"""Equality of opportunity: per-group weighted-CDF score transforms (Nandy et al., Lemma 1, Theorem 1, A.1).

The math (`transform`: `WeightedCDFTransformer`, scikit-learn style with `sensitive_features=`;
`aggregate`: weighted click counts per score, the sufficient statistic; `quantiles`, `piecewise`) is pure
numpy/pandas. `reranking` re-ranks held-out simulated requests to measure exposure per merit (a SIMULATION
study) and `evaluation` runs it (its figures: `figures`); `sql` reads the click-count mart, `window` picks the
training window, `store` keeps fitted transforms in `marts.eo_transforms`, `report` renders tables and figures,
`fair_ranker` saves and loads base ranker + transform as data files, `serving` logs them as the `fair-ranker` MLflow
pyfunc (model code: `fair_ranker_pyfunc.py`, nothing pickled), `assets` is the Dagster glue.
Inputs: `marts.eo_score_click_counts` and the chosen position-bias curve. Outputs: fitted transforms, the
`fair-ranker` model version, the re-ranking evaluation. Tests: tests/eo/.

    from fair_pipeline.eo import WeightedCDFTransformer
    WeightedCDFTransformer().fit(scores, clicks, sensitive_features=groups, sample_weight=1 / w[position])
"""
from fair_pipeline.eo.aggregate import (
    CLICK_COUNT_COLUMNS,
    EOInputError,
    ScoreAggregate,
    click_counts,
    combine_click_counts,
    weighted_positives,
)
from fair_pipeline.eo.evaluation import RerankingReport, evaluate_rerankings
from fair_pipeline.eo.fair_ranker import FairRanker, LinearRanker, load_fair_ranker
from fair_pipeline.eo.sql import read_click_counts
from fair_pipeline.eo.transform import (
    UnseenGroupError,
    WeightedCDFTransformer,
    fit_from_click_counts,
    with_alpha,
)

__all__ = [
    "CLICK_COUNT_COLUMNS",
    "EOInputError",
    "FairRanker",
    "LinearRanker",
    "RerankingReport",
    "ScoreAggregate",
    "UnseenGroupError",
    "WeightedCDFTransformer",
    "click_counts",
    "combine_click_counts",
    "evaluate_rerankings",
    "fit_from_click_counts",
    "load_fair_ranker",
    "read_click_counts",
    "weighted_positives",
    "with_alpha",
]
