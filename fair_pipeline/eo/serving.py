"""Logging the fair ranker (base ranker + fitted EO transform) to MLflow as the `fair-ranker` pyfunc.

Input of the logged model: a DataFrame with the ranker's feature columns and the group column. Output: the fair
score s~ = transform(base_ranker(X), group), a Series named "fair_score". The version holds data files only
(`fair_ranker`: the transform's JSON, the base ranker's parameters or skops file, the column names) and the
model code `fair_ranker_pyfunc.py`; nothing is pickled. The `fair_pipeline` package is bundled with the model
(code_paths), so an environment with only the pip requirements loads it too.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import scipy
import skops
import sklearn

from fair_pipeline.eo.fair_ranker import FairRanker, LinearRanker
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.ingestion.simulation_config import SimulationConfig
from fair_pipeline.ingestion.simulator import production_coefficients

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the whole fair_pipeline package, bundled with each model
MODEL_CODE = Path(__file__).with_name("fair_ranker_pyfunc.py")


def production_ranker(config: SimulationConfig) -> LinearRanker:
    return LinearRanker(production_coefficients(config))


def pip_requirements() -> list[str]:
    """Pinned to the versions that fitted and logged the model."""
    return [
        f"mlflow=={mlflow.__version__}",
        f"numpy=={np.__version__}",
        f"pandas=={pd.__version__}",
        f"scikit-learn=={sklearn.__version__}",
        f"scipy=={scipy.__version__}",
        f"skops=={skops.__version__}",
    ]


def log_fair_ranker(
    transform: WeightedCDFTransformer,
    base_ranker,
    feature_names: Sequence[str],
    registered_model_name: str | None = "fair-ranker",
    *,
    group_column: str = "group_id",
    input_example: pd.DataFrame | None = None,
    name: str = "fair_ranker",
    alias: str | None = None,
):
    """Log (and register, unless registered_model_name is None) the fair ranker in the active MLflow run
    (one is started if none is active). Returns mlflow's ModelInfo; `alias` (e.g. "champion") is set on
    the new registered version."""
    model = FairRanker(base_ranker, transform, tuple(feature_names), group_column)
    if input_example is not None:
        model.predict(input_example)  # fail before logging
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = model.save(Path(tmp))
        active = mlflow.active_run()
        if active is None:
            mlflow.start_run()
        try:
            info = mlflow.pyfunc.log_model(
                name=name,
                python_model=str(MODEL_CODE),
                artifacts=artifacts,
                code_paths=[str(PACKAGE_DIR)],
                pip_requirements=pip_requirements(),
                input_example=input_example,
                registered_model_name=registered_model_name,
            )
        finally:
            if active is None:
                mlflow.end_run()
    if alias and registered_model_name:
        mlflow.MlflowClient().set_registered_model_alias(registered_model_name, alias, info.registered_model_version)
    return info
