"""MLflow logging of the training stage: one run per fit (params, metrics, the model, the audit table).

The one function the training assets call, so the backend can be swapped (the shared
`fair_pipeline.tracking.MLflowTracking` resource when it is available) without touching them.
This version talks to MLflow directly: tracking URI `settings.mlflow_tracking_uri()`, artifacts under
`settings.mlflow_artifact_root()`, experiment `fair_pipeline/training`.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from fair_pipeline import settings

EXPERIMENT = "fair_pipeline/training"
# Explicit requirements: no environment inference at log time (slow) and a reproducible model env.
PIP_REQUIREMENTS = ["scikit-learn", "numpy", "scipy", "pandas"]

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def _experiment_id(mlflow) -> str:
    experiment = mlflow.get_experiment_by_name(EXPERIMENT)
    if experiment is not None:
        return experiment.experiment_id
    root = settings.mlflow_artifact_root()
    root.mkdir(parents=True, exist_ok=True)
    return mlflow.create_experiment(EXPERIMENT, artifact_location=(root / "training").as_uri())


def dagster_tags(context) -> dict[str, str]:
    """Dagster run id, asset key and the run's partition (range) of an asset execution context."""
    if context is None:
        return {}
    tags = {"dagster.run_id": context.run_id,
            "dagster.asset_key": ",".join(k.to_user_string() for k in sorted(context.selected_asset_keys))}
    run_tags = context.run.tags
    start, end = run_tags.get("dagster/asset_partition_range_start"), run_tags.get("dagster/asset_partition_range_end")
    partition = run_tags.get("dagster/partition") or (f"{start}..{end}" if start else None)
    if partition:
        tags["dagster.partition"] = partition
    return tags


def portable_model(model) -> LogisticRegression:
    """A scikit-learn LogisticRegression with the fitted coefficients: scores identical to `model`, loadable
    (and skops-trusted) with scikit-learn alone, without this package on the serving side."""
    portable = LogisticRegression()
    portable.coef_ = np.array(model.coef_, dtype=float).reshape(1, -1)
    portable.intercept_ = np.array(model.intercept_, dtype=float).reshape(1)
    portable.classes_ = np.asarray(model.classes_)
    portable.n_features_in_ = portable.coef_.shape[1]
    portable.n_iter_ = np.array([getattr(model, "n_iter_", 0)]).ravel()[:1]
    return portable


def log_fit(
    context,
    *,
    run_name: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    model,
    tables: Mapping[str, pd.DataFrame],
    tags: Mapping[str, str] | None = None,
) -> str:
    """Log one fitted model (as `portable_model`) as an MLflow run; returns the run id. Non-finite metrics are skipped
    (MLflow cannot chart them); the audit tables carry every value, NaN included."""
    import mlflow
    import mlflow.sklearn

    mlflow.set_tracking_uri(settings.mlflow_tracking_uri())
    all_tags = {"fair_pipeline.stage": "training", **dagster_tags(context), **dict(tags or {})}
    with mlflow.start_run(experiment_id=_experiment_id(mlflow), run_name=run_name, tags=all_tags) as run:
        mlflow.log_params({k: str(v) for k, v in params.items()})
        finite = {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}
        if finite:
            mlflow.log_metrics(finite)
        mlflow.set_tag("fair_pipeline.fitted_class", f"{type(model).__module__}.{type(model).__qualname__}")
        mlflow.sklearn.log_model(portable_model(model), name="model", pip_requirements=PIP_REQUIREMENTS)
        for name, frame in tables.items():
            mlflow.log_table(frame, f"tables/{name}.json")
        return run.info.run_id


__all__ = ["EXPERIMENT", "PIP_REQUIREMENTS", "dagster_tags", "log_fit"]
