"""Reject option classification (Kamiran, Karim & Zhang 2012), with AIF360's grid search.

Around the decision threshold t lies the critical region |score - t| <= margin, where the classifier is
least certain. Inside it decisions are flipped by group: rows of the unprivileged group(s) get the
favourable decision (1), rows of the privileged group the unfavourable one (0); outside it the usual
rule "1 iff score > t" applies. So an unprivileged row is 1 iff score >= t - margin and a privileged
row is 1 iff score > t + margin.

`fit` searches, as the paper and AIF360's RejectOptionClassification do, a grid of thresholds
(`n_thresholds` from `low` to `high`) times margins (`n_margins` from 0 to min(t - low_score, ...),
AIF360: 0 .. min(t, 1 - t) for probability scores), keeps the (t, margin) whose fairness metric
(unprivileged minus privileged) lies within +-`bound`, and among those the highest balanced accuracy
(AIF360's choice; `objective="accuracy"` maximizes accuracy instead). Kamiran et al. fix t = 0.5 for
calibrated probabilities and search the margin only: pass threshold=0.5.
Every grid point is evaluated by binary search on the sorted scores of each (group, label) cell:
O(n log n + grid * log n). A fixed `threshold` and / or `margin` restricts the grid to that value. With
`sample_weight` (counts) every count is a sum of weights (cumulative weights over the sorted scores), so a row of
weight k fits exactly as k copies of it would.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from fair_pipeline.postprocessing.hull import PostProcessingInputError
from fair_pipeline.postprocessing.rates import rate_table
from fair_pipeline.postprocessing.threshold import as_groups, as_labels, as_scores, as_weights, check_known

METRICS = ("statistical_parity", "equal_opportunity", "average_odds")


class RejectOptionClassifier(BaseEstimator):
    """Kamiran et al.'s reject option classifier on scores (probabilities by default).

    Parameters
    ----------
    margin : float >= 0 or None (default). Half-width of the critical region; None searches a grid.
    threshold : float or None (default). Decision threshold; None searches a grid.
    privileged : label of the privileged group, or None (default): the group with the highest positive
        rate on the training scores at the grid's middle threshold (or at `threshold` when given).
    metric : "statistical_parity" (default) | "equal_opportunity" (TPR) | "average_odds" (mean of the TPR
        and FPR differences); always unprivileged minus privileged, as in AIF360.
    bound : float, default 0.05. |metric| <= bound is feasible.
    objective : "balanced_accuracy" (default, as AIF360) | "accuracy": what the grid search maximizes.
    low, high, n_thresholds : threshold grid (AIF360: 0.01, 0.99, 100). n_margins : margin grid size (50).

    Fitted attributes
    -----------------
    threshold_, margin_, privileged_, groups_, feasible_ (False: no grid point met the bound; the one with the
    smallest |metric| was taken, with a warning), metric_value_, balanced_accuracy_ (training data),
    grid_ : DataFrame threshold, margin, metric, balanced_accuracy, accuracy of every grid point.
    """

    def __init__(self, margin=None, *, threshold=None, privileged=None, metric: str = "statistical_parity",
                 bound: float = 0.05, objective: str = "balanced_accuracy", low: float = 0.01, high: float = 0.99, n_thresholds: int = 100,
                 n_margins: int = 50):
        self.margin = margin
        self.threshold = threshold
        self.privileged = privileged
        self.metric = metric
        self.bound = bound
        self.objective = objective
        self.low = low
        self.high = high
        self.n_thresholds = n_thresholds
        self.n_margins = n_margins

    def _grid(self):
        if self.threshold is not None:
            ts = np.array([float(self.threshold)])
        else:
            if not self.low < self.high or self.n_thresholds < 1:
                raise PostProcessingInputError(f"threshold grid needs low < high and n_thresholds >= 1, got "
                                               f"{self.low}, {self.high}, {self.n_thresholds}")
            ts = np.linspace(self.low, self.high, self.n_thresholds)
        if self.margin is not None:
            if self.margin < 0:
                raise PostProcessingInputError(f"margin must be >= 0, got {self.margin}")
            return np.repeat(ts, 1), np.full(ts.size, float(self.margin))
        if self.n_margins < 1:
            raise PostProcessingInputError(f"n_margins must be >= 1, got {self.n_margins}")
        frac = np.linspace(0.0, 1.0, self.n_margins)
        widths = np.minimum(ts, 1.0 - ts).clip(min=0.0)
        return np.repeat(ts, frac.size), (widths[:, None] * frac[None, :]).ravel()

    def fit(self, scores, labels, *, sensitive_features, sample_weight=None):
        """Fit on rows (score, label, group), each standing for `sample_weight` identical rows (default 1)."""
        if self.objective not in ("balanced_accuracy", "accuracy"):
            raise PostProcessingInputError(f"objective must be 'balanced_accuracy' or 'accuracy', got {self.objective!r}")
        if self.metric not in METRICS:
            raise PostProcessingInputError(f"metric must be one of {METRICS}, got {self.metric!r}")
        s = as_scores(scores)
        y = as_labels(labels, s.size)
        g = as_groups(sensitive_features, s.size)
        w = as_weights(sample_weight, s.size, g)
        groups = sorted(set(g.tolist()), key=str)
        if len(groups) < 2:
            raise PostProcessingInputError(f"reject option needs at least two groups, got {groups}")
        for level in groups:
            n_pos, n_neg = float(w[(g == level) & y].sum()), float(w[(g == level) & ~y].sum())
            if n_pos == 0 or n_neg == 0:
                raise PostProcessingInputError(f"group {level!r} has {n_pos:g} positives and {n_neg:g} negatives "
                                               f"(weighted): rates need both classes")
        privileged = self.privileged
        if privileged is None:
            mid = 0.5 * (self.low + self.high) if self.threshold is None else float(self.threshold)
            privileged = max(groups, key=lambda a: float(w[(g == a) & (s > mid)].sum() / w[g == a].sum()))
        elif privileged not in groups:
            raise PostProcessingInputError(f"privileged={privileged!r} is not among the groups {groups}")
        priv = g == privileged
        ts, ms = self._grid()
        # weighted positive counts per (side, label) for every grid point, by binary search on sorted scores
        out = {}
        for side, mask in (("u", ~priv), ("p", priv)):
            for lab, lm in (("1", y), ("0", ~y)):
                order = np.argsort(s[mask & lm], kind="stable")
                v = s[mask & lm][order]
                below = np.r_[0.0, np.cumsum(w[mask & lm][order])]  # weight of the first i sorted scores
                if side == "u":
                    cut = np.searchsorted(v, ts - ms, side="left")  # score >= t - m
                else:
                    cut = np.searchsorted(v, ts + ms, side="right")  # score > t + m
                out[side + lab] = (below[-1] - below[cut], below[-1])
        rate = {k: pos / n if n > 0 else np.zeros_like(pos) for k, (pos, n) in out.items()}
        n_u, n_p = out["u1"][1] + out["u0"][1], out["p1"][1] + out["p0"][1]
        if self.metric == "statistical_parity":
            metric = (out["u1"][0] + out["u0"][0]) / n_u - (out["p1"][0] + out["p0"][0]) / n_p
        elif self.metric == "equal_opportunity":
            metric = rate["u1"] - rate["p1"]
        else:
            metric = 0.5 * ((rate["u1"] - rate["p1"]) + (rate["u0"] - rate["p0"]))
        tp = out["u1"][0] + out["p1"][0]
        fp = out["u0"][0] + out["p0"][0]
        n1, n0 = float(w[y].sum()), float(w[~y].sum())
        bal = 0.5 * (tp / n1 + 1.0 - fp / n0)
        acc = (tp + n0 - fp) / (n1 + n0)
        goal = bal if self.objective == "balanced_accuracy" else acc
        feasible = np.abs(metric) <= self.bound
        self.feasible_ = bool(feasible.any())
        if self.feasible_:
            best = int(np.flatnonzero(feasible)[np.argmax(goal[feasible])])
        else:
            best = int(np.argmin(np.abs(metric)))
            warnings.warn(f"RejectOptionClassifier: no (threshold, margin) on the grid has |{self.metric}| <= "
                          f"{self.bound}; took the smallest |{self.metric}| = {abs(metric[best]):.4f}", stacklevel=2)
        self.grid_ = pd.DataFrame({"threshold": ts, "margin": ms, "metric": metric, "balanced_accuracy": bal,
                                   "accuracy": acc})
        self.threshold_, self.margin_ = float(ts[best]), float(ms[best])
        self.metric_value_, self.balanced_accuracy_ = float(metric[best]), float(bal[best])
        self.privileged_, self.groups_ = privileged, groups
        return self

    def predict(self, scores, *, sensitive_features) -> np.ndarray:
        """0/1 decisions with the critical region flipped by group."""
        if not hasattr(self, "threshold_"):
            raise PostProcessingInputError("RejectOptionClassifier is not fitted; call fit() first")
        s = as_scores(scores)
        g = as_groups(sensitive_features, s.size)
        check_known(g, self.groups_)
        priv = g == self.privileged_
        return np.where(priv, s > self.threshold_ + self.margin_, s >= self.threshold_ - self.margin_).astype(int)

    def evaluate(self, scores, labels, *, sensitive_features, clusters=None, confidence: float = 0.95) -> pd.DataFrame:
        """TPR, FPR, selection rate and accuracy per group with SEs (`postprocessing.rates.rate_table`)."""
        s = as_scores(scores)
        y = as_labels(labels, s.size)
        d = self.predict(s, sensitive_features=sensitive_features)
        return rate_table(d, y, as_groups(sensitive_features, s.size), clusters=clusters,
                          reference=self.privileged_, confidence=confidence)
