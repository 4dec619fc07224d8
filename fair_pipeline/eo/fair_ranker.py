"""The fair ranker as data: a base ranker and a fitted EO transform, written to files that hold parameters
only and read back without unpickling anything.

Files (the artifacts of a `fair-ranker` model version):
    eo_transform.json   the transform's exact JSON (`WeightedCDFTransformer.to_json`)
    base_ranker.json    a linear ranker's coefficients and intercept, or
    base_ranker.skops   any other scikit-learn ranker, in skops' format: loading constructs only the types that skops
                        trusts by default (scikit-learn estimators, NumPy arrays) plus TRUSTED_TYPES, never code
    serving.json        format, feature names and the group column

`load_fair_ranker(artifacts)` is what the registered pyfunc calls (`fair_ranker_pyfunc.py`), so a version loads
with any later release whose `fair_pipeline.eo` exports it, whatever its modules are called then.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.transform import WeightedCDFTransformer

FORMAT = "fair-ranker"
FORMAT_VERSION = 1
TRANSFORM_ARTIFACT = "eo_transform"
RANKER_ARTIFACT = "base_ranker"
SERVING_ARTIFACT = "serving"
# Types a base ranker's skops file may hold beyond skops' defaults (which cover scikit-learn's estimators and
# NumPy arrays). Empty: a type is added here only after reading what constructing it can run.
TRUSTED_TYPES: list[str] = []


class LinearRanker:
    """s(X) = X @ coef + intercept; the simulator's production ranker is coef (1, 1, 0, ...)."""

    def __init__(self, coef, intercept: float = 0.0):
        self.coef = np.asarray(coef, dtype=float)
        self.intercept = float(intercept)

    def decision_function(self, X) -> np.ndarray:
        return np.asarray(X, dtype=float) @ self.coef + self.intercept


def base_scores(ranker, X) -> np.ndarray:
    """decision_function if the ranker has one (a classifier's margin), else predict."""
    method = getattr(ranker, "decision_function", None) or getattr(ranker, "predict", None)
    if method is None:
        raise TypeError(f"base ranker {type(ranker).__name__} has neither decision_function nor predict")
    return np.asarray(method(X), dtype=float).ravel()


def fair_scores(
    frame: pd.DataFrame, ranker, transform: WeightedCDFTransformer, feature_names: Sequence[str], group_column: str
) -> pd.Series:
    """s~ = transform(ranker(features), group) for the rows of `frame`, a Series named "fair_score"."""
    missing = [c for c in [*feature_names, group_column] if c not in frame.columns]
    if missing:
        raise EOInputError(f"fair-ranker input lacks columns {missing}; expected {[*feature_names, group_column]}")
    # A DataFrame keeps the feature names that scikit-learn models were fitted with.
    scores = base_scores(ranker, frame[list(feature_names)].astype(float))
    return pd.Series(transform.transform(scores, frame[group_column]), index=frame.index, name="fair_score")


def _untrusted(path: Path) -> list[str]:
    import skops.io

    return [name for name in skops.io.get_untrusted_types(file=path) if name not in TRUSTED_TYPES]


def save_base_ranker(ranker, directory: Path) -> Path:
    """The ranker's file in `directory`: JSON parameters for a LinearRanker, else a skops file whose every type is
    trusted (a ranker that would need an untrusted type to load is refused here, before anything is logged)."""
    if isinstance(ranker, LinearRanker):
        path = directory / "base_ranker.json"
        path.write_text(json.dumps({"coef": ranker.coef.tolist(), "intercept": ranker.intercept}))
        return path
    import skops.io

    path = directory / "base_ranker.skops"
    skops.io.dump(ranker, path)
    untrusted = _untrusted(path)
    if untrusted:
        raise EOInputError(f"base ranker {type(ranker).__name__} cannot be saved as data: its skops file needs the "
                           f"untrusted types {untrusted}; use a scikit-learn estimator or a LinearRanker(coef, intercept)")
    return path


def load_base_ranker(path: str | Path):
    """A ranker saved by `save_base_ranker`; a skops file with any untrusted type is refused, naming the types."""
    path = Path(path)
    if path.suffix == ".json":
        return LinearRanker(**json.loads(path.read_text()))
    import skops.io

    untrusted = _untrusted(path)
    if untrusted:
        raise EOInputError(f"{path}: refusing to load a base ranker with untrusted types {untrusted}")
    return skops.io.load(path, trusted=TRUSTED_TYPES)


@dataclasses.dataclass(frozen=True)
class FairRanker:
    """A base ranker followed by the per-group EO transform: `predict(frame)` gives the fair scores."""

    ranker: object
    transform: WeightedCDFTransformer
    feature_names: tuple[str, ...]
    group_column: str

    def predict(self, frame: pd.DataFrame) -> pd.Series:
        return fair_scores(frame, self.ranker, self.transform, self.feature_names, self.group_column)

    def save(self, directory: Path) -> dict[str, str]:
        """Write the files into `directory`; returns {artifact name: path}, MLflow's `artifacts=`."""
        transform_path = directory / "eo_transform.json"
        transform_path.write_text(self.transform.to_json())
        serving_path = directory / "serving.json"
        serving_path.write_text(json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                                            "feature_names": list(self.feature_names),
                                            "group_column": self.group_column}))
        ranker_path = save_base_ranker(self.ranker, directory)
        return {TRANSFORM_ARTIFACT: str(transform_path), RANKER_ARTIFACT: str(ranker_path),
                SERVING_ARTIFACT: str(serving_path)}


def load_fair_ranker(artifacts: Mapping[str, str]) -> FairRanker:
    """The FairRanker whose files are `artifacts` ({artifact name: local path}, as MLflow's context gives them)."""
    serving = json.loads(Path(artifacts[SERVING_ARTIFACT]).read_text())
    if serving.get("format") != FORMAT or serving.get("version") != FORMAT_VERSION:
        raise EOInputError(f"{artifacts[SERVING_ARTIFACT]}: not a fair-ranker file of version {FORMAT_VERSION} "
                           f"(format={serving.get('format')!r}, version={serving.get('version')!r})")
    transform = WeightedCDFTransformer.from_json(Path(artifacts[TRANSFORM_ARTIFACT]).read_text())
    return FairRanker(load_base_ranker(artifacts[RANKER_ARTIFACT]), transform, tuple(serving["feature_names"]),
                      serving["group_column"])
