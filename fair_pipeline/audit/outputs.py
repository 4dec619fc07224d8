"""The registry of scored outputs the fairness audit covers: one entry per thing the pipeline ranks by.

Each loader in `SCORED_OUTPUT_LOADERS` reads what it needs from the warehouse and returns entries:
a `ScoredOutput` (how to score the audit's rows) or an `Unavailable` (named, with the reason, e.g. the
EO transform was not fitted yet). Adding an output is one loader appended to the list.

Two bases:
  logged_score   rescores the logged production `score` per group (the score x group count table stays the
                 sufficient statistic): the production scores themselves, the EO-transformed scores.
  item_features  scores items from their features (retrained rankers): audited from per-item counts.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.store import load_latest_transforms
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.platform.partition_store import PARTITION_COLUMN, load_partition
from fair_pipeline.platform.warehouse import table_columns, table_exists

PRODUCTION = "production"
EO_TRANSFORMS = ("marts", "eo_transforms")
RANKER_CANDIDATES = ("marts", "ranker_candidates")


@dataclasses.dataclass(frozen=True)
class ScoredOutput:
    """`score(frame)` returns the output's score of each row: for `logged_score`, `frame` has `group` and
    `score`; for `item_features`, `group` and the `features` columns. `trained_from` / `trained_through`: the
    first and last day of the data the output was fitted on (None: unknown, or not fitted on the logs), to
    tell held-out from in-sample audits."""

    name: str
    description: str
    basis: str
    score: Callable[[pd.DataFrame], np.ndarray]
    features: tuple[str, ...] = ()
    trained_through: dt.date | None = None
    fitted_on_logs: bool = False
    monotone_within_group: bool = False  # a within-group increasing map of the production score
    trained_from: dt.date | None = None

    @property
    def training_window(self) -> str:
        if not self.fitted_on_logs:
            return "not fitted on the logs"
        if self.trained_through is None:
            return "unknown"
        return f"{self.trained_from or '?'}..{self.trained_through}"

    def held_out(self, window_start: dt.date) -> bool | None:
        """True when the audited window starts after the training data (None: unknown training window)."""
        if not self.fitted_on_logs:
            return True
        return None if self.trained_through is None else self.trained_through < window_start


@dataclasses.dataclass(frozen=True)
class Unavailable:
    name: str
    reason: str


Entry = ScoredOutput | Unavailable


def production_scores(con, partition=None) -> list[Entry]:
    return [ScoredOutput(PRODUCTION, "production ranker score s(X), as logged", "logged_score",
                         lambda frame: frame["score"].to_numpy(dtype=np.float64))]


def _eo_scorer(model: WeightedCDFTransformer) -> Callable[[pd.DataFrame], np.ndarray]:
    return lambda frame: model.transform(frame["score"].to_numpy(dtype=np.float64), frame["group"].to_numpy(dtype=object))


def eo_transformed_scores(con, partition=None) -> list[Entry]:
    """Each variant of partition `partition`'s EO fit (marts.eo_transforms; default: the newest):
    WeightedCDFTransformer.from_json(...).transform."""
    try:
        stored = load_latest_transforms(con, partition)
    except EOInputError as error:
        return [Unavailable("eo_transform", str(error))]
    out: list[Entry] = []
    for variant, fit in sorted(stored.items()):
        name = f"eo_{variant}"
        if not fit.estimable:
            out.append(Unavailable(name, f"the {variant} EO transform was not estimable: {fit.reason}"))
            continue
        out.append(ScoredOutput(
            name, f"production score after the {variant} weighted-CDF EO transform (alpha={fit.transform.alpha}, "
            f"fitted on {fit.window_start}..{fit.window_end})",
            "logged_score", _eo_scorer(fit.transform), trained_through=fit.window_end,
            fitted_on_logs=True, monotone_within_group=True, trained_from=fit.window_start,
        ))
    return out


def _linear_scorer(features: tuple[str, ...], coef: np.ndarray, intercept: float):
    return lambda frame: frame[list(features)].to_numpy(dtype=np.float64) @ coef + intercept


def _output_name(text: str) -> str:
    """A name usable as an MLflow metric / artifact key (letters, digits, _ . -)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _date(value) -> dt.date | None:
    return pd.Timestamp(value).date() if pd.notna(value) else None


def ranker_candidates(con, partition=None) -> list[Entry]:
    """Retrained linear rankers of partition `partition` (default: the newest) in marts.ranker_candidates (one row
    per candidate: `candidate_id`, `features` and `coefficients` as JSON, `intercept`, `window_start`,
    `window_end`); score = decision function on the raw item features."""
    if not table_exists(con, *RANKER_CANDIDATES):
        return [Unavailable("ranker_candidates", "marts.ranker_candidates does not exist (no retrained ranker yet)")]
    columns = table_columns(con, *RANKER_CANDIDATES)
    need = ["candidate_id", "features", "coefficients", "intercept", "window_start", "window_end", PARTITION_COLUMN]
    if not set(need) <= set(columns):
        return [Unavailable("ranker_candidates", f"marts.ranker_candidates lacks columns "
                                                 f"{[c for c in need if c not in columns]} (has {columns})")]
    try:
        frame = load_partition(con, ".".join(RANKER_CANDIDATES), partition,
                               hint="materialize ranker_candidates for that partition").sort_values("candidate_id")
    except LookupError as error:
        return [Unavailable("ranker_candidates", str(error))]
    out: list[Entry] = []
    for row in frame.itertuples():
        features = tuple(json.loads(row.features))
        weights = json.loads(row.coefficients)
        coef = np.array([weights[f] for f in features], dtype=np.float64)
        out.append(ScoredOutput(
            "ranker_" + _output_name(row.candidate_id), f"retrained ranker {row.candidate_id!r} on item features "
            f"{list(features)}", "item_features", _linear_scorer(features, coef, float(row.intercept)), features=features,
            trained_through=_date(row.window_end), trained_from=_date(row.window_start), fitted_on_logs=True,
        ))
    return out


SCORED_OUTPUT_LOADERS: list[Callable] = [production_scores, eo_transformed_scores, ranker_candidates]
# The tables the loaders read, as Dagster asset keys: the audit runs after those of them the pipeline defines.
SCORED_OUTPUT_TABLES: list[tuple[str, str]] = [EO_TRANSFORMS, RANKER_CANDIDATES]


def scored_outputs(con, loaders: list[Callable] | None = None, partition=None) -> list[Entry]:
    """Every scored output of asset partition `partition` (default: each stage's newest stored partition)."""
    entries: list[Entry] = []
    for loader in loaders or SCORED_OUTPUT_LOADERS:
        entries.extend(loader(con, partition))
    names = [e.name for e in entries]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"scored outputs {duplicated} are registered twice")
    return entries


