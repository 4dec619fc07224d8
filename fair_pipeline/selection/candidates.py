"""The model-selection candidates: every retrained ranker (lambda) x EO relaxation alpha (DuckDB glue).

How the EO transform meets a retrained ranker. The stored transform (`marts.eo_transforms`) maps the
*production* score: its per-group CDFs are CDFs of production scores, meaningless on another ranker's scale.
Theorem 1 of Nandy et al. applies to any score, so for each ranker the weighted-CDF transform is re-fitted on
that ranker's own scores, with the same recipe and settings as the stored weighted transform (clicked
production impressions of the ranker's training window, each click weighted by 1 / w_position of the chosen
position-bias curve, the pooled score CDF as back-mapping), then relaxed by alpha (appendix A.1:
s~ = (1 - alpha) s + alpha T_c(s); alpha = 0 is the ranker itself). The ranker's score is computed in SQL
(a linear model: sum of bound coefficients x whitelisted feature columns), so only the sufficient statistic
(impressions and clicks per group x position x score bin, the same table as `marts.eo_score_click_counts`)
leaves DuckDB.

Restriction: the serving model is "ranker + transform", so a ranker whose re-fit is not estimable (a group
without clicks in its window) contributes no candidate at any alpha; the reason is kept.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json

import numpy as np
import pandas as pd

from fair_pipeline.audit.sql import ITEMS_VIEW, OBSERVATIONAL_VIEW, UNKNOWN_GROUP
from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.serving import LinearRanker
from fair_pipeline.eo.transform import WeightedCDFTransformer, fit_from_click_counts, with_alpha
from fair_pipeline.platform.partition_store import load_partition
from fair_pipeline.platform.warehouse import quote_identifier, table_columns, table_exists
from fair_pipeline.selection.elicitation.operating_point import group_rates, selection_threshold

RANKER_CANDIDATES = ("marts", "ranker_candidates")


class SelectionInputError(ValueError):
    """A missing table or column, or a candidate that cannot be built: the message names it."""


@dataclasses.dataclass(frozen=True)
class Ranker:
    """One row of marts.ranker_candidates: a linear ranker on item features."""

    candidate_id: str
    lam: float
    features: tuple[str, ...]
    coef: np.ndarray
    intercept: float
    window_start: dt.date
    window_end: dt.date
    mlflow_run_id: str | None

    @property
    def model(self) -> LinearRanker:
        return LinearRanker(self.coef, self.intercept)

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        return self.model.decision_function(frame[list(self.features)].to_numpy(dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A ranker at one EO relaxation; `transform` is None when alpha's re-fit was not estimable (`reason`)."""

    ranker: Ranker
    alpha: float
    transform: WeightedCDFTransformer | None
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.ranker.candidate_id}/alpha={self.alpha:g}"

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        """Fair score of item rows (features + `group`), as the registered pyfunc computes it."""
        return self.transform.transform(self.ranker.score(frame), frame["group"].to_numpy(dtype=object))


def load_rankers(con, partition=None) -> list[Ranker]:
    """The retrained rankers of asset partition `partition` (default: the newest stored)."""
    if not table_exists(con, *RANKER_CANDIDATES):
        raise SelectionInputError("marts.ranker_candidates does not exist; materialize the ranker_candidates asset first")
    need = ["candidate_id", "lam", "features", "coefficients", "intercept", "window_start", "window_end", "mlflow_run_id"]
    columns = table_columns(con, *RANKER_CANDIDATES)
    missing = [c for c in need if c not in columns]
    if missing:
        raise SelectionInputError(f"marts.ranker_candidates lacks columns {missing} (has {columns})")
    frame = load_partition(con, ".".join(RANKER_CANDIDATES), partition, error=SelectionInputError,
                           hint="materialize the ranker_candidates asset for that partition first")
    frame = frame[need].sort_values(["lam", "candidate_id"])
    if frame.empty:
        raise SelectionInputError("marts.ranker_candidates is empty: no retrained ranker to select from")
    rankers = []
    for row in frame.itertuples():
        features = tuple(json.loads(row.features))
        weights = json.loads(row.coefficients)
        rankers.append(Ranker(row.candidate_id, float(row.lam), features,
                              np.array([weights[f] for f in features], dtype=np.float64), float(row.intercept),
                              pd.Timestamp(row.window_start).date(), pd.Timestamp(row.window_end).date(),
                              row.mlflow_run_id if isinstance(row.mlflow_run_id, str) else None))
    return rankers


def ranker_click_counts(con, ranker: Ranker, bin_width: float) -> pd.DataFrame:
    """group_id, position, score_value, impressions, clicks of the ranker's scores on the clicked-or-not
    production impressions of its training window (the EO fit's sufficient statistic), computed in SQL."""
    available = table_columns(con, *ITEMS_VIEW)
    unknown = [f for f in ranker.features if f not in available]
    if unknown:
        raise SelectionInputError(f"ranker {ranker.candidate_id!r}: features {unknown} are not columns of "
                                  f"{'.'.join(ITEMS_VIEW)} ({available})")
    terms = " + ".join(f"i.{quote_identifier(f)} * $c{k}" for k, f in enumerate(ranker.features))
    params = {f"c{k}": float(c) for k, c in enumerate(ranker.coef)}
    params.update(intercept=ranker.intercept, width=float(bin_width), first=ranker.window_start,
                  last=ranker.window_end, unknown_group=UNKNOWN_GROUP)
    return con.execute(
        f"""
        SELECT coalesce(o.group_id, $unknown_group) AS group_id, o.position,
               (floor(({terms} + $intercept) / $width) + 0.5) * $width AS score_value,
               CAST(count(*) AS BIGINT) AS impressions, CAST(sum(o.click) AS BIGINT) AS clicks
        FROM {'.'.join(map(quote_identifier, OBSERVATIONAL_VIEW))} o
        JOIN {'.'.join(map(quote_identifier, ITEMS_VIEW))} i ON i.item_id = o.item_id
        WHERE o.partition_date BETWEEN $first AND $last AND o.policy = 'production'
        GROUP BY ALL
        """,
        params,
    ).df()


def build_candidates(con, rankers: list[Ranker], alphas: list[float], position_curve: pd.DataFrame,
                     template: WeightedCDFTransformer, bin_width: float, min_positives: int) -> list[Candidate]:
    """Every ranker x alpha, the transform re-fitted per ranker with `template`'s settings (see module doc)."""
    if not alphas or any(not 0.0 <= a <= 1.0 for a in alphas) or len(set(alphas)) != len(alphas):
        raise SelectionInputError(f"alphas={alphas} must be distinct values in [0, 1]")
    params = {k: v for k, v in template.get_params().items() if k != "alpha"}
    weights = position_curve[["position", "weight"]]
    candidates = []
    for ranker in rankers:
        counts = ranker_click_counts(con, ranker, bin_width)
        clicks = counts.groupby("group_id")["clicks"].sum()
        few = clicks[clicks < max(min_positives, 1)]
        reason = ""
        if counts.empty:
            reason = f"no production impressions in the training window {ranker.window_start}..{ranker.window_end}"
        elif not few.empty:
            reason = "EO re-fit not estimable: " + ", ".join(f"group {g!r} has {int(n)} clicks < {min_positives}"
                                                             for g, n in few.items())
        fitted = None
        if not reason:
            try:
                fitted = fit_from_click_counts(counts, weights, **params)
            except EOInputError as error:
                reason = f"EO re-fit failed: {error}"
        for alpha in sorted(alphas):
            transform = None if fitted is None else with_alpha(fitted, float(alpha))
            candidates.append(Candidate(ranker, float(alpha), transform, reason))
    return candidates


def candidate_rates(candidates: list[Candidate], items: pd.DataFrame, selection_rate: float) -> pd.DataFrame:
    """Long table candidate x group: tpr, tnr, n_pos, n_neg at each candidate's own selection-rate threshold,
    on held-out item rows (`group`, features, n_pos, n_neg). A candidate without a transform, or whose
    transform cannot score a group, gets NaN rates and its reason (ranked as not estimable)."""
    groups = sorted(items["group"].astype(str).unique())
    rows = []
    for cand in candidates:
        base = {"candidate": cand.name, "ranker": cand.ranker.candidate_id, "lam": cand.ranker.lam,
                "alpha": cand.alpha, "trained_through": str(cand.ranker.window_end)}
        reason = cand.reason
        if not reason:
            try:
                scored = items[["group", "n_pos", "n_neg"]].assign(score=cand.score(items))
                threshold = selection_threshold(scored, selection_rate)
                rates = group_rates(scored, threshold)
            except (EOInputError, ValueError) as error:
                reason = f"cannot score the held-out rows: {error}"
        if reason:
            rows.extend({**base, "group": g, "tpr": np.nan, "tnr": np.nan, "n_pos": np.nan, "n_neg": np.nan,
                         "selected_share": np.nan, "threshold": np.nan, "candidate_reason": reason} for g in groups)
            continue
        rows.extend({**base, **r, "threshold": threshold, "candidate_reason": ""} for r in rates.to_dict("records"))
    return pd.DataFrame(rows)


def candidate_scores(candidates: list[Candidate], items: pd.DataFrame, names) -> dict[str, np.ndarray]:
    """Fair score of every held-out item row for the named candidates (those with rates; the paired
    comparison of the ranking needs each one's scores on the same rows)."""
    wanted = set(names)
    return {c.name: np.asarray(c.score(items), dtype=float) for c in candidates if c.name in wanted and c.transform is not None}
