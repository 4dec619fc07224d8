"""Training: rankers retrained with a fairness penalty, on click labels debiased by position.

`penalized` (pure numpy/scipy/sklearn) holds `MIPenalizedLogisticRegression`, a scikit-learn estimator whose
loss adds lambda times the conditional-mutual-information proxy (`mi_proxy`), its objective, L-BFGS
preconditioning and AdaGrad (`objective`, `precondition`, `adagrad`), the lambda path (`path`) and the held-out
gap summary of a fit (`gaps`); `click_training` turns clicks and position weights into relevance rows.
`pairwise_fair` holds `PairwiseFairRanker`, a linear ranker trained on within-query pairs under Narasimhan
et al.'s pairwise fairness constraints by the proxy-Lagrangian (pairs subsampled with a fixed budget per step).
`rankers` fits the daily ranker candidates from the warehouse; `reference` holds the paper's reference models
(the `benchmark_models` asset): `reference.data` / `reference.fits` fit Adult and COMPAS, `reference.registry`
registers them and moves `champion` by the Holm rule; `store` / `tracking` / `figures` write tables, MLflow runs
and figures, `assets` is the Dagster glue.
Inputs: impressions of the training window, the chosen position-bias curve, items. Outputs: `marts.ranker_*` and
`marts.benchmark_*` tables, MLflow runs and registered `fair-benchmark-*` versions. Tests: tests/training/.

    from fair_pipeline.training import MIPenalizedLogisticRegression
    MIPenalizedLogisticRegression(lam=1.0).fit(X, y, sensitive_features=groups)
"""
from fair_pipeline.training.pairwise_fair import PairwiseFairnessError, PairwiseFairRanker
from fair_pipeline.training.penalized.estimator import MIPenalizedLogisticRegression
from fair_pipeline.training.penalized.mi_proxy import MIPenaltyError, mi_proxy
from fair_pipeline.training.penalized.path import PathPoint, lambda_path, lambda_path_stream

__all__ = ["MIPenalizedLogisticRegression", "MIPenaltyError", "PairwiseFairRanker", "PairwiseFairnessError", "PathPoint", "lambda_path", "lambda_path_stream", "mi_proxy"]
