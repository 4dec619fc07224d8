"""ROC points of a score and their upper convex hull (the slides' construction, Hardt et al. Claim 3.2).

Thresholding "positive iff score >= t" at each distinct score, from the highest down, gives the
empirical ROC points (FPR, TPR) from (0, 0) (threshold +inf: nobody positive) to (1, 1) (threshold
-inf: everybody positive); tied scores move together, so a tie makes one diagonal step. With sample
weights (counts: a row of weight k stands for k identical rows) the rates are weighted sums and rows of
weight 0 are left out, so the curve equals the one of the expanded rows. Any point of
the convex hull of these points is reached by randomizing between thresholds (derived predictors);
the part that matters for any cost is the *upper* hull, a concave chain from (0, 0) to (1, 1).
Sort O(n log n), hull O(n) (monotone chain).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


class PostProcessingInputError(ValueError):
    """Bad input to a post-processor (names what and where)."""


class UnseenGroupError(PostProcessingInputError, KeyError):
    """A group at predict time that fit() never saw."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class RocCurve:
    """Empirical ROC points of one score. ``thresholds[k]``: positive iff score >= thresholds[k]
    (+inf at k = 0, -inf at the last point); ``n_pos`` / ``n_neg``: class counts (sums of the weights)."""

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray
    n_pos: float
    n_neg: float

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"threshold": self.thresholds, "fpr": self.fpr, "tpr": self.tpr})


def roc_points(scores, labels, sample_weight=None) -> RocCurve:
    """ROC points at every distinct score (ties collapsed), from (0, 0) to (1, 1).

    `sample_weight` (validated by the caller): non-negative weight of each row, default 1."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel().astype(bool)
    w = np.ones(s.size) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).ravel()
    # a weightless row must not add a threshold of its own: the curve of the expanded rows has none there
    keep = w > 0
    s, y, w = s[keep], y[keep], w[keep]
    n_pos, n_neg = float(w[y].sum()), float(w[~y].sum())
    if n_pos == 0 or n_neg == 0:
        raise PostProcessingInputError(
            f"ROC needs both classes; got {n_pos:g} positives and {n_neg:g} negatives")
    order = np.argsort(-s, kind="stable")
    s, y, w = s[order], y[order], w[order]
    last_of_block = np.r_[s[1:] != s[:-1], True]
    tp = np.cumsum(np.where(y, w, 0.0))[last_of_block]
    fp = np.cumsum(np.where(y, 0.0, w))[last_of_block]
    thresholds = np.r_[np.inf, s[last_of_block]]
    thresholds[-1] = -np.inf  # the last point keeps everybody, including lower scores seen later
    return RocCurve(np.r_[0.0, fp / n_neg], np.r_[0.0, tp / n_pos], thresholds, n_pos, n_neg)


def upper_hull_indices(fpr, tpr) -> np.ndarray:
    """Indices of the vertices of the upper convex hull of points sorted by (fpr, tpr) ascending.

    Points must include (0, 0) first and (1, 1) last (as `roc_points` returns them). Collinear
    points are dropped, so consecutive vertices have strictly decreasing slopes.
    """
    x = np.asarray(fpr, dtype=np.float64)
    y = np.asarray(tpr, dtype=np.float64)
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            cross = (x[a] - x[o]) * (y[i] - y[o]) - (y[a] - y[o]) * (x[i] - x[o])
            if cross >= -1e-15:  # a is on or below the chord o -> i: not a vertex of the upper hull
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(hull, dtype=np.intp)


def roc_convex_hull(scores, labels) -> pd.DataFrame:
    """The upper ROC convex hull as a table: threshold, fpr, tpr of each vertex (from (0,0) to (1,1))."""
    curve = roc_points(scores, labels)
    k = upper_hull_indices(curve.fpr, curve.tpr)
    return pd.DataFrame({"threshold": curve.thresholds[k], "fpr": curve.fpr[k], "tpr": curve.tpr[k]})
