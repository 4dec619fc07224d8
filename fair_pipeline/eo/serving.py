"""Serving the fair ranker: an MLflow pyfunc model = base ranker + fitted EO transform.

Input: a DataFrame with the ranker's feature columns and the group column. Output: the fair score
s~ = transform(base_ranker(X), group), a Series named "fair_score". The transform travels as its exact
JSON (artifact `eo_transform.json`), the base ranker as a cloudpickle, the column names as
`serving.json`; the `fair_pipeline` package is bundled with the model (code_paths) so loading needs no
installed project.
"""
from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import cloudpickle
import mlflow
import numpy as np
import pandas as pd
import scipy
import sklearn

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.ingestion.simulator import SimulationConfig, production_coefficients

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the whole fair_pipeline package, bundled with each model
TRANSFORM_ARTIFACT = "eo_transform"
RANKER_ARTIFACT = "base_ranker"
SERVING_ARTIFACT = "serving"


class LinearRanker:
    """s(X) = X @ coef + intercept; the simulator's production ranker is coef (1, 1, 0, ...)."""

    def __init__(self, coef, intercept: float = 0.0):
        self.coef = np.asarray(coef, dtype=float)
        self.intercept = float(intercept)

    def decision_function(self, X) -> np.ndarray:
        return np.asarray(X, dtype=float) @ self.coef + self.intercept


def production_ranker(config: SimulationConfig) -> LinearRanker:
    return LinearRanker(production_coefficients(config))


def base_scores(ranker, X) -> np.ndarray:
    """decision_function if the ranker has one (a classifier's margin), else predict."""
    method = getattr(ranker, "decision_function", None) or getattr(ranker, "predict", None)
    if method is None:
        raise TypeError(f"base ranker {type(ranker).__name__} has neither decision_function nor predict")
    return np.asarray(method(X), dtype=float).ravel()


class FairRankerModel(mlflow.pyfunc.PythonModel):
    """pyfunc: DataFrame(features..., group) -> fair scores."""

    def load_context(self, context) -> None:
        self.transform_ = WeightedCDFTransformer.from_json(Path(context.artifacts[TRANSFORM_ARTIFACT]).read_text())
        with open(context.artifacts[RANKER_ARTIFACT], "rb") as handle:
            self.ranker_ = cloudpickle.load(handle)
        serving = json.loads(Path(context.artifacts[SERVING_ARTIFACT]).read_text())
        self.feature_names_ = list(serving["feature_names"])
        self.group_column_ = serving["group_column"]

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:
        return fair_scores(model_input, self.ranker_, self.transform_, self.feature_names_, self.group_column_)


def fair_scores(
    frame: pd.DataFrame, ranker, transform: WeightedCDFTransformer, feature_names: Sequence[str], group_column: str
) -> pd.Series:
    missing = [c for c in [*feature_names, group_column] if c not in frame.columns]
    if missing:
        raise EOInputError(f"fair-ranker input lacks columns {missing}; expected {[*feature_names, group_column]}")
    # A DataFrame keeps the feature names that scikit-learn models were fitted with.
    scores = base_scores(ranker, frame[list(feature_names)].astype(float))
    return pd.Series(transform.transform(scores, frame[group_column]), index=frame.index, name="fair_score")


def pip_requirements() -> list[str]:
    """Pinned to the versions that fitted and logged the model."""
    return [
        f"mlflow=={mlflow.__version__}",
        f"numpy=={np.__version__}",
        f"pandas=={pd.__version__}",
        f"scikit-learn=={sklearn.__version__}",
        f"scipy=={scipy.__version__}",
        f"cloudpickle=={cloudpickle.__version__}",
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
    feature_names = list(feature_names)
    if input_example is not None:
        fair_scores(input_example, base_ranker, transform, feature_names, group_column)  # fail before logging
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            TRANSFORM_ARTIFACT: Path(tmp) / "eo_transform.json",
            RANKER_ARTIFACT: Path(tmp) / "base_ranker.pkl",
            SERVING_ARTIFACT: Path(tmp) / "serving.json",
        }
        paths[TRANSFORM_ARTIFACT].write_text(transform.to_json())
        paths[RANKER_ARTIFACT].write_bytes(cloudpickle.dumps(base_ranker))
        paths[SERVING_ARTIFACT].write_text(json.dumps({"feature_names": feature_names, "group_column": group_column}))
        active = mlflow.active_run()
        if active is None:
            mlflow.start_run()
        try:
            info = mlflow.pyfunc.log_model(
                name=name,
                python_model=FairRankerModel(),
                artifacts={key: str(path) for key, path in paths.items()},
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
