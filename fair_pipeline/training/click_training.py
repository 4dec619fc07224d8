"""Training rows for a ranker from position-biased clicks, and long audit tables for storage.

Click model (Nandy et al. 2.2): an item with relevance Y(1) shown at position j is clicked with
probability w_j Y(1), so clicks / w_j is an unbiased estimate of Y(1) per impression. A ranker that
sees only item features X gives every impression of an item the same score, so the per-impression
inverse-propensity logistic loss

    sum_impressions [ (c/w_j) (-log p) + (1 - c/w_j) (-log(1 - p)) ]

collapses, per item, to two weighted binomial rows: label 1 with weight R = sum_j clicks_ij / w_j
(estimated relevant impressions) and label 0 with weight N - R (N impressions). N - R is negative
only when the IPW estimate overshoots (an item clicked at a low position); it is clipped at 0 there
(the loss would otherwise be unbounded below) and the clipped mass is reported.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


class ClickTrainingError(ValueError):
    """Item aggregates that cannot be turned into training rows."""


@dataclass
class RelevanceRows:
    """Weighted binomial rows: two per item (zero-weight rows dropped)."""

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    sample_weight: np.ndarray
    n_items: int
    clipped_weight: float  # total negative-row weight clipped to 0 (items whose IPW estimate exceeds N)
    clipped_items: int


def relevance_rows(features, groups, impressions, relevant_weight) -> RelevanceRows:
    """Per-item aggregates -> the rows `MIPenalizedLogisticRegression.fit` takes (with `sample_weight`).

    features (n_items, d); groups (n_items,) with no missing value; impressions (n_items,) > 0;
    relevant_weight (n_items,) = sum over the item's impressions of click / w_position, >= 0.
    """
    X = np.asarray(features, dtype=float)
    n = X.shape[0] if X.ndim == 2 else -1
    g = np.asarray(groups, dtype=object)
    N = np.asarray(impressions, dtype=float)
    R = np.asarray(relevant_weight, dtype=float)
    if X.ndim != 2 or n == 0:
        raise ClickTrainingError(f"features must be a non-empty 2-d array, got shape {X.shape}")
    for name, values in (("groups", g), ("impressions", N), ("relevant_weight", R)):
        if values.shape != (n,):
            raise ClickTrainingError(f"{name} has shape {values.shape}, expected ({n},) (one entry per item)")
    if not np.all(np.isfinite(X)):
        rows = np.flatnonzero(~np.isfinite(X).all(axis=1))
        raise ClickTrainingError(f"{rows.size} items have a missing or infinite feature (first row {rows[0]})")
    missing = pd.isna(g)
    if missing.any():
        raise ClickTrainingError(f"{int(missing.sum())} items have no group (first row {np.flatnonzero(missing)[0]})")
    if not np.all(N > 0):
        raise ClickTrainingError(f"{int(np.sum(~(N > 0)))} items have no impressions; aggregate only shown items")
    if not (np.all(np.isfinite(R)) and np.all(R >= 0)):
        raise ClickTrainingError("relevant_weight must be finite and >= 0 (clicks / w with w > 0)")
    negative = N - R
    clipped = negative < 0
    y = np.repeat(np.array([1, 0]), n)
    w = np.concatenate([R, np.where(clipped, 0.0, negative)])
    keep = w > 0
    return RelevanceRows(
        X=np.vstack([X, X])[keep],
        y=y[keep],
        groups=np.concatenate([g, g])[keep],
        sample_weight=w[keep],
        n_items=n,
        clipped_weight=float(-negative[clipped].sum()),
        clipped_items=int(clipped.sum()),
    )


AUDIT_COLUMNS = [
    "row_type", "group", "cutoff", "auc", "se", "ci_low", "ci_high", "z", "p_value",
    "n_pos", "n_neg", "n_a", "n_b", "estimable", "note",
]


def audit_rows(per_group: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """One long table from ``training.penalized.gaps`` ``group_table`` / ``gap_table`` outputs.

    ``row_type`` 'group': the normalized partial AUC I(alpha)/alpha of one group (n_pos, n_neg its
    counts). 'gap': group_a minus group_b (``group`` = 'a - b'), with z and p-value; n_a, n_b the sizes.
    Not-estimable rows keep NaN estimates and their note. Extra columns (e.g. ``lam``) are kept.
    """
    known = {"group", "cutoff", "n_pos", "n_neg", "estimable", "pauc", "se", "ci_low", "ci_high", "note"}
    extra = [c for c in per_group.columns if c not in known]
    groups = per_group.rename(columns={"pauc": "auc"}).assign(row_type="group")
    gap_frame = gaps.assign(
        row_type="gap",
        group=gaps["group_a"].astype(str) + " - " + gaps["group_b"].astype(str),
        note=np.where(gaps["estimable"].astype(bool), "", "not estimable in at least one group"),
    ).rename(columns={"gap": "auc"})
    frame = pd.concat([groups, gap_frame], ignore_index=True)
    for column in AUDIT_COLUMNS:
        if column not in frame.columns:
            frame[column] = np.nan
    frame["group"] = frame["group"].astype(str)
    frame["estimable"] = frame["estimable"].astype(bool)
    frame["note"] = frame["note"].fillna("").astype(str)
    return frame[extra + AUDIT_COLUMNS]


__all__ = ["AUDIT_COLUMNS", "ClickTrainingError", "RelevanceRows", "audit_rows", "relevance_rows"]
