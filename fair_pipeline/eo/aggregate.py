"""Sufficient statistics of the EO transform: weighted score counts per group.

The weighted CDF F*_{c,1} of Theorem 1 (Nandy et al.) only needs, per group c and distinct score (or
fine score bin) t, the sum over clicked impressions of 1 / w_position; the pooled back-mapping F only
needs impression counts per score. Both come from one table of

    group_id, position, score_value, impressions, clicks

which `dbt_like_sql/marts/eo_score_click_counts.sql` computes out of core and `click_counts` computes
in numpy (same binning rule, same output), so the two fitting paths meet here and give the same knots. The
warehouse path applies the weights where the rows are and sums over positions (WEIGHTED_SUM_COLUMNS,
`eo.sql.read_weighted_sums`), which `aggregate_weighted_sums` takes.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from fair_pipeline.eo.quantiles import distinct_weighted

CLICK_COUNT_COLUMNS = ("group_id", "position", "score_value", "impressions", "clicks")
# The same statistic with the position weights applied (what the transform needs; see aggregate_weighted_sums).
WEIGHTED_SUM_COLUMNS = ("group_id", "score_value", "impressions", "clicks", "weighted_clicks", "weighted_click_squares")


class EOInputError(ValueError):
    """Bad input to the EO transform; the message names the group, column or position and the count."""


@dataclasses.dataclass(frozen=True)
class ScoreAggregate:
    """Per group: sorted distinct scores of positive responses, their summed weights, the raw click count
    and the sum of squared weights (for the effective sample size); pooled: sorted distinct scores of all
    impressions (any group, clicked or not) and their counts."""

    positive_values: dict[str, np.ndarray]
    positive_weights: dict[str, np.ndarray]
    n_positives: dict[str, int]
    positive_weight_squares: dict[str, float]
    reference_values: np.ndarray
    reference_counts: np.ndarray


def score_values(scores: np.ndarray, bin_width: float | None) -> np.ndarray:
    """The value a score is counted at: itself, or the centre of its bin [k w, (k + 1) w).

    Same arithmetic as the SQL model: (FLOOR(score / w) + 0.5) * w."""
    if bin_width is None:
        return np.asarray(scores, dtype=float)
    if not np.isfinite(bin_width) or bin_width <= 0:
        raise EOInputError(f"score_bin_width={bin_width!r} must be a positive finite number or None")
    return (np.floor(np.asarray(scores, dtype=float) / bin_width) + 0.5) * bin_width


def click_counts(
    scores: np.ndarray,
    groups: np.ndarray,
    positions: np.ndarray,
    clicks: np.ndarray,
    bin_width: float | None = None,
) -> pd.DataFrame:
    """In-memory twin of the SQL model: impressions and clicks per group x position x score value.

    Rows with a missing group are kept with group_id None (the fit decides what to do with them)."""
    scores = np.asarray(scores, dtype=float)
    n = len(scores)
    for name, column in (("sensitive_features", groups), ("positions", positions), ("clicks", clicks)):
        if len(column) != n:
            raise EOInputError(f"{name} has {len(column)} rows but scores has {n}")
    bad = ~np.isfinite(scores)
    if bad.any():
        raise EOInputError(f"scores: {int(bad.sum())} of {n} values are NaN or infinite")
    clicks = np.asarray(clicks)
    if not np.isin(clicks, (0, 1)).all():
        raise EOInputError(f"clicks: {int((~np.isin(clicks, (0, 1))).sum())} values are not 0 or 1")
    # Group by integer codes (fast), then name the groups; code -1 = missing group.
    codes, labels = pd.factorize(pd.Series(np.asarray(groups, dtype=object).ravel()), use_na_sentinel=True)
    frame = pd.DataFrame(
        {
            "code": codes,
            "position": np.asarray(positions, dtype=np.int64),
            "score_value": score_values(scores, bin_width),
            "impressions": np.ones(n, dtype=np.int64),
            "clicks": clicks.astype(np.int64),
        }
    )
    out = frame.groupby(["code", "position", "score_value"], sort=False)[["impressions", "clicks"]].sum().reset_index()
    names = np.array([str(label) for label in labels] + [None], dtype=object)
    out.insert(0, "group_id", names[out.pop("code").to_numpy()])
    return _canonical(out)


def combine_click_counts(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Sum per-day click-count tables into one training window (counts are integers: exact)."""
    stacked = pd.concat([f[list(CLICK_COUNT_COLUMNS)] for f in frames], ignore_index=True)
    out = stacked.groupby(["group_id", "position", "score_value"], dropna=False, sort=False)[["impressions", "clicks"]].sum()
    return _canonical(out.reset_index())


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by (group_id, position, score_value), missing group last; so two paths compare equal."""
    frame = frame.sort_values(["group_id", "position", "score_value"], na_position="last", kind="mergesort")
    frame = frame.reset_index(drop=True)
    return frame.astype({"position": np.int64, "impressions": np.int64, "clicks": np.int64})


def position_weight_lookup(position_weights: np.ndarray | pd.DataFrame | Mapping[int, float]) -> dict[int, float]:
    """{position: w_position} from an array (index 0 = position 1), a Mapping or a (position, weight) frame."""
    if isinstance(position_weights, pd.DataFrame):
        missing = {"position", "weight"} - set(position_weights.columns)
        if missing:
            raise EOInputError(f"position-weight table lacks columns {sorted(missing)}; expected position, weight")
        repeated = position_weights["position"][position_weights["position"].duplicated()].unique().tolist()
        if repeated:
            raise EOInputError(f"position-weight table repeats positions {repeated[:10]}; expected one weight each")
        pairs = zip(position_weights["position"].astype(int), position_weights["weight"].astype(float))
    elif isinstance(position_weights, Mapping):
        pairs = ((int(k), float(v)) for k, v in position_weights.items())
    else:
        array = np.asarray(position_weights, dtype=float).ravel()
        pairs = zip(range(1, len(array) + 1), array)
    return dict(pairs)


def weighted_positives(
    counts: pd.DataFrame,
    position_weights: np.ndarray | pd.DataFrame | Mapping[int, float],
    missing_group: str = "error",
) -> ScoreAggregate:
    """Apply the inverse position-bias weights 1 / w_position to the click counts (Theorem 1, eq. (5))."""
    missing_cols = [c for c in CLICK_COUNT_COLUMNS if c not in counts.columns]
    if missing_cols:
        raise EOInputError(f"click-count table lacks columns {missing_cols}; expected {list(CLICK_COUNT_COLUMNS)}")
    _check_scores_and_groups(counts, missing_group)
    w, clicked = _clicked_row_weights(counts, position_weights)
    clicks = counts["clicks"].to_numpy(dtype=np.int64)
    w = np.where(clicked, w, 1.0)  # unclicked rows carry no weight; their position may have none
    return _aggregate(counts.assign(weighted_clicks=np.where(clicked, clicks / w, 0.0),
                                    weighted_click_squares=np.where(clicked, clicks / w**2, 0.0)))  # a click weighs 1/w


def check_click_positions(counts: pd.DataFrame, position_weights) -> None:
    """Raise EOInputError (naming positions, weights, groups and clicks) when a clicked position of `counts`
    (group_id, position, clicks; any grouping) has no finite positive weight."""
    _clicked_row_weights(counts, position_weights)


def _clicked_row_weights(counts: pd.DataFrame, position_weights) -> tuple[np.ndarray, np.ndarray]:
    """(w_position per row, clicked rows with a group); raises when a clicked row's position has no valid weight."""
    no_group = counts["group_id"].isna().to_numpy()
    labels = counts["group_id"].where(~no_group, "").astype(str).to_numpy()
    clicks = counts["clicks"].to_numpy(dtype=np.int64)
    clicked = (clicks > 0) & ~no_group
    w = _row_weights(position_weight_lookup(position_weights), counts["position"].to_numpy(dtype=np.int64),
                     clicked, labels, clicks)
    return w, clicked


def aggregate_weighted_sums(sums: pd.DataFrame, missing_group: str = "error") -> ScoreAggregate:
    """The sufficient statistic from a table of WEIGHTED_SUM_COLUMNS: per group and score value the impressions,
    clicks, and the sums of clicks / w_position and clicks / w_position², per position or already summed over
    positions (the transform never needs the position itself once the weights are applied)."""
    missing_cols = [c for c in WEIGHTED_SUM_COLUMNS if c not in sums.columns]
    if missing_cols:
        raise EOInputError(f"weighted-sum table lacks columns {missing_cols}; expected {list(WEIGHTED_SUM_COLUMNS)}")
    _check_scores_and_groups(sums, missing_group)
    return _aggregate(sums)


def unit_weights(sums: pd.DataFrame) -> pd.DataFrame:
    """A table of WEIGHTED_SUM_COLUMNS with every click weighing 1 (Lemma 1's unweighted CDF)."""
    clicks = sums["clicks"].to_numpy(dtype=float)
    return sums.assign(weighted_clicks=clicks, weighted_click_squares=clicks)


def _aggregate(sums: pd.DataFrame) -> ScoreAggregate:
    """ScoreAggregate of a checked weighted-sum table (rows without a group are left out)."""
    values = sums["score_value"].to_numpy(dtype=float)
    no_group = sums["group_id"].isna().to_numpy()
    labels = sums["group_id"].where(~no_group, "").astype(str).to_numpy()
    clicks = sums["clicks"].to_numpy(dtype=np.int64)
    weighted = sums["weighted_clicks"].to_numpy(dtype=float)
    squares = sums["weighted_click_squares"].to_numpy(dtype=float)
    clicked = (clicks > 0) & ~no_group
    positive_values, positive_weights, n_positives, weight_squares = {}, {}, {}, {}
    for label in sorted(set(labels[~no_group])):
        mine = clicked & (labels == label)
        positive_values[label], positive_weights[label] = distinct_weighted(values[mine], weighted[mine])
        n_positives[label] = int(clicks[mine].sum())
        weight_squares[label] = float(squares[mine].sum())
    reference_values, reference_counts = distinct_weighted(values, sums["impressions"].to_numpy(dtype=float))
    return ScoreAggregate(positive_values, positive_weights, n_positives, weight_squares, reference_values,
                          reference_counts)


def _check_scores_and_groups(counts: pd.DataFrame, missing_group: str) -> None:
    values = counts["score_value"].to_numpy(dtype=float)
    no_group = counts["group_id"].isna().to_numpy()
    bad = ~np.isfinite(values)
    if bad.any():
        named = counts["group_id"].where(~no_group, "<missing>").astype(str)
        detail = ", ".join(
            f"group {g!r}: {int(n)} impressions" for g, n in counts["impressions"][bad].groupby(named[bad]).sum().items()
        )
        raise EOInputError(f"score_value: NULL/NaN or infinite scores ({detail})")
    if no_group.any() and missing_group == "error":
        raise EOInputError(
            f"group_id: {int(counts['impressions'][no_group].sum())} impressions "
            f"({int(counts['clicks'][no_group].sum())} clicks) have no group; pass missing_group='exclude' to leave "
            "them out of the per-group CDFs"
        )


def _row_weights(
    lookup: dict[int, float], positions: np.ndarray, clicked: np.ndarray, labels: np.ndarray, clicks: np.ndarray
) -> np.ndarray:
    """w_position for every row; clicked rows must have a finite positive weight (error names groups, counts)."""
    distinct, row_index = np.unique(positions, return_inverse=True)
    w = np.array([lookup.get(int(p), np.nan) for p in distinct], dtype=float)
    table = dict(zip(distinct.tolist(), w.tolist()))
    row_w = w[row_index]
    bad = clicked & ~(np.isfinite(row_w) & (row_w > 0))
    if bad.any():
        bad_positions = sorted(set(positions[bad].tolist()))
        by_group = ", ".join(f"group {g!r}: {int(clicks[bad & (labels == g)].sum())} clicks" for g in sorted(set(labels[bad])))
        shown = {p: table[p] for p in bad_positions[:10]}
        raise EOInputError(
            f"position weights must be finite and > 0 at every clicked position; {len(bad_positions)} positions "
            f"have a missing or non-positive weight (position: weight {shown}); affected {by_group}"
        )
    return row_w
