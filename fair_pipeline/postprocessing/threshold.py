"""Derived predictors of Hardt, Price & Srebro (2016): per-group randomized thresholds from an LP.

For each group a the operating point (FPR_a, TPR_a) of any randomized threshold rule lies in the
convex hull of the group's ROC points (Claim 3.2); its useful part is spanned by the vertices v_{a,k}
of the upper hull (`hull`). With mixing weights w_{a,k} >= 0, sum_k w_{a,k} = 1,

    FPR_a = sum_k w_{a,k} fpr_{a,k},   TPR_a = sum_k w_{a,k} tpr_{a,k}

and the rule "draw vertex k with probability w_{a,k}, decide positive iff score >= threshold_{a,k}"
gives a positive decision with probability p_a(s) = sum_k w_{a,k} 1[s >= threshold_{a,k}], a
non-decreasing step function of the score. The expected loss is linear in w:

    sum_a c_FP n_{a,0} FPR_a + c_FN n_{a,1} (1 - TPR_a)

with (c_FP, c_FN) = (1, 1)/n for accuracy, (1/(2 n_0), 1/(2 n_1)) for balanced accuracy, or given
costs. Constraints against the first group g_0, for every other group a:
equalized odds FPR_a = FPR_{g0} and TPR_a = TPR_{g0}; equal opportunity TPR_a = TPR_{g0};
demographic parity (n_{a,1} TPR_a + n_{a,0} FPR_a) / n_a equal. With a `selection_rate` q, one more
equality fixes the expected share of positive decisions: sum_a (n_{a,1} TPR_a + n_{a,0} FPR_a) = q n (a fixed
budget, as the top slots of a ranking; always feasible, the hulls' diagonal meets every constraint). With
`sample_weight` (counts) every n above is a sum of weights and the ROC points are weighted, so a row of weight k
fits exactly as k copies of it would. scipy's HiGHS solves the LP exactly
(sum of hull sizes variables, a few equalities); on the training data the expected rates equal the
LP's rates exactly.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from sklearn.base import BaseEstimator

from fair_pipeline.postprocessing.hull import (
    PostProcessingInputError,
    UnseenGroupError,
    roc_points,
    upper_hull_indices,
)
from fair_pipeline.postprocessing.rates import rate_table

CONSTRAINTS = ("equalized_odds", "equal_opportunity", "demographic_parity")
OBJECTIVES = ("accuracy", "balanced_accuracy")


def as_scores(scores, name: str = "scores") -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim == 2 and s.shape[1] == 1:
        s = s[:, 0]
    if s.ndim != 1:
        raise PostProcessingInputError(f"{name} must be one-dimensional, got shape {s.shape}")
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise PostProcessingInputError(f"{name} has {bad.size} non-finite values (first at row {bad[0]})")
    return s


def as_labels(labels, n: int) -> np.ndarray:
    y = np.asarray(labels).ravel()
    if y.size != n:
        raise PostProcessingInputError(f"labels has {y.size} entries, scores has {n}")
    values = set(np.unique(y).tolist())
    if not values <= {0, 1, True, False}:
        raise PostProcessingInputError(f"labels must be 0/1, got values {sorted(values, key=str)[:5]}")
    return y.astype(bool)


def as_groups(sensitive_features, n: int) -> np.ndarray:
    if sensitive_features is None:
        raise PostProcessingInputError("sensitive_features is required (the group of every row)")
    g = np.asarray(sensitive_features, dtype=object).ravel()
    if g.size != n:
        raise PostProcessingInputError(f"sensitive_features has {g.size} entries, scores has {n}")
    missing = pd.isna(pd.Series(g)).to_numpy()
    if missing.any():
        raise PostProcessingInputError(
            f"sensitive_features: {int(missing.sum())} rows have a missing group (first at row {np.flatnonzero(missing)[0]})")
    return g


def as_weights(sample_weight, n: int, g: np.ndarray) -> np.ndarray:
    """Non-negative finite weights of the rows (counts, as Fairlearn's `sample_weight`), ones when None; every
    group needs a positive total weight."""
    if sample_weight is None:
        return np.ones(n)
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise PostProcessingInputError(f"sample_weight must be numbers: {error}") from None
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1 or w.size != n:
        raise PostProcessingInputError(f"sample_weight must have shape ({n},) like scores, got shape {w.shape}")
    for bad, what in ((~np.isfinite(w), "non-finite (NaN or infinite)"), (w < 0, "negative")):
        bad = np.flatnonzero(bad)
        if bad.size:
            raise PostProcessingInputError(
                f"sample_weight has {bad.size} {what} values (first at row {bad[0]}: {w[bad[0]]})")
    totals = pd.Series(w).groupby(pd.Series(g), sort=False).sum()
    empty = sorted(totals.index[totals.to_numpy() == 0].tolist(), key=str)
    if empty:
        raise PostProcessingInputError(f"sample_weight is 0 on every row of group(s) {empty}")
    return w


def check_known(g: np.ndarray, groups) -> None:
    unseen = sorted(set(g.tolist()) - set(groups), key=str)
    if unseen:
        raise UnseenGroupError(f"sensitive_features has groups {unseen} that fit() never saw (fitted: {list(groups)})")


def unit_costs(objective, n_pos: float, n_neg: float) -> tuple[float, float]:
    """(cost of a false positive, cost of a false negative) per row for an objective."""
    n = n_pos + n_neg
    if isinstance(objective, Mapping):
        unknown = set(objective) - {"false_positive", "false_negative"}
        if unknown or len(objective) != 2:
            raise PostProcessingInputError(
                f"cost weights must be {{'false_positive': c, 'false_negative': c}}, got {dict(objective)}")
        c_fp, c_fn = float(objective["false_positive"]), float(objective["false_negative"])
        if c_fp < 0 or c_fn < 0 or c_fp + c_fn == 0:
            raise PostProcessingInputError(f"cost weights must be >= 0 and not both 0, got {dict(objective)}")
        return c_fp / n, c_fn / n
    if objective == "accuracy":
        return 1.0 / n, 1.0 / n
    if objective == "balanced_accuracy":
        return 0.5 / n_neg, 0.5 / n_pos
    raise PostProcessingInputError(f"objective must be one of {OBJECTIVES} or cost weights, got {objective!r}")


class ThresholdPostProcessor(BaseEstimator):
    """Hardt et al.'s optimal derived predictor over each group's ROC convex hull.

    Parameters
    ----------
    constraint : "equalized_odds" (default) | "equal_opportunity" | "demographic_parity".
    objective : "accuracy" (default) | "balanced_accuracy" | {"false_positive": c, "false_negative": c}.
    selection_rate : None (default) or q in (0, 1]: the expected share of positive decisions on the training
        data is fixed to q (then every objective with positive costs is "most true positives").

    Fitted attributes
    -----------------
    groups_ : sorted group labels. hulls_ : {group: DataFrame threshold, fpr, tpr of the upper-hull vertices}.
    mixtures_ : {group: DataFrame threshold, weight} (the rule draws a threshold with that probability).
    operating_points_ : DataFrame group, fpr, tpr, selection_rate, n_pos, n_neg (expected, training data; n_pos
        and n_neg are sums of `sample_weight`).
    objective_value_ : the LP optimum (expected accuracy, balanced accuracy, or expected cost per row).
    equalized_odds_gap_ : max over groups of |TPR_a - TPR_b| and |FPR_a - FPR_b| at the solution.
    """

    def __init__(self, constraint: str = "equalized_odds", objective="accuracy", selection_rate=None):
        self.constraint = constraint
        self.objective = objective
        self.selection_rate = selection_rate

    def fit(self, scores, labels, *, sensitive_features, sample_weight=None):
        """Fit on rows (score, label, group), each standing for `sample_weight` identical rows (default 1)."""
        if self.constraint not in CONSTRAINTS:
            raise PostProcessingInputError(f"constraint must be one of {CONSTRAINTS}, got {self.constraint!r}")
        if self.selection_rate is not None and not 0.0 < self.selection_rate <= 1.0:
            raise PostProcessingInputError(f"selection_rate must be None or in (0, 1], got {self.selection_rate!r}")
        s = as_scores(scores)
        y = as_labels(labels, s.size)
        g = as_groups(sensitive_features, s.size)
        w = as_weights(sample_weight, s.size, g)
        groups = sorted(set(g.tolist()), key=str)
        curves, hulls = {}, {}
        for level in groups:
            m = g == level
            n_pos, n_neg = float(w[m & y].sum()), float(w[m & ~y].sum())
            if n_pos == 0 or n_neg == 0:
                raise PostProcessingInputError(
                    f"group {level!r} has {n_pos:g} positives and {n_neg:g} negatives (weighted): its ROC curve "
                    f"(and any rate constraint on it) needs both classes")
            curve = roc_points(s[m], y[m], w[m])
            k = upper_hull_indices(curve.fpr, curve.tpr)
            curves[level] = curve
            hulls[level] = pd.DataFrame({"threshold": curve.thresholds[k], "fpr": curve.fpr[k], "tpr": curve.tpr[k]})
        c_fp, c_fn = unit_costs(self.objective, float(w[y].sum()), float(w[~y].sum()))
        weights, value = self._solve(groups, hulls, curves, c_fp, c_fn)
        self.groups_ = groups
        self.hulls_ = hulls
        self.mixtures_ = {}
        rows = []
        for level in groups:
            h, w = hulls[level], weights[level]
            keep = w > 1e-12
            w = np.where(keep, w, 0.0)
            w = w / w.sum()
            self.mixtures_[level] = pd.DataFrame({"threshold": h["threshold"].to_numpy()[keep], "weight": w[keep]})
            fpr, tpr = float(w @ h["fpr"].to_numpy()), float(w @ h["tpr"].to_numpy())
            c = curves[level]
            rows.append({"group": level, "fpr": fpr, "tpr": tpr,
                         "selection_rate": (c.n_pos * tpr + c.n_neg * fpr) / (c.n_pos + c.n_neg),
                         "n_pos": c.n_pos, "n_neg": c.n_neg})
        self.operating_points_ = pd.DataFrame(rows)
        cost = sum(c_fp * r["n_neg"] * r["fpr"] + c_fn * r["n_pos"] * (1 - r["tpr"]) for r in rows)
        # accuracy: cost = error rate; balanced accuracy: cost = (FPR + FNR) / 2 = 1 - balanced accuracy
        self.objective_value_ = float(cost if isinstance(self.objective, Mapping) else 1.0 - cost)
        op = self.operating_points_
        self.equalized_odds_gap_ = float(max(np.ptp(op["tpr"]), np.ptp(op["fpr"])))
        self.lp_optimum_ = value
        return self

    def _solve(self, groups, hulls, curves, c_fp, c_fn):
        sizes = [len(hulls[a]) for a in groups]
        offsets = np.r_[0, np.cumsum(sizes)]
        nv = int(offsets[-1])
        cost = np.zeros(nv)
        A_eq, b_eq = [], []
        for i, a in enumerate(groups):
            h, c = hulls[a], curves[a]
            sl = slice(offsets[i], offsets[i + 1])
            cost[sl] = c_fp * c.n_neg * h["fpr"].to_numpy() - c_fn * c.n_pos * h["tpr"].to_numpy()
            row = np.zeros(nv)
            row[sl] = 1.0
            A_eq.append(row)
            b_eq.append(1.0)

        def rate_row(i, kind):
            a = groups[i]
            h, c = hulls[a], curves[a]
            row = np.zeros(nv)
            sl = slice(offsets[i], offsets[i + 1])
            if kind == "fpr":
                row[sl] = h["fpr"].to_numpy()
            elif kind == "tpr":
                row[sl] = h["tpr"].to_numpy()
            else:
                row[sl] = (c.n_pos * h["tpr"].to_numpy() + c.n_neg * h["fpr"].to_numpy()) / (c.n_pos + c.n_neg)
            return row

        kinds = {"equalized_odds": ("fpr", "tpr"), "equal_opportunity": ("tpr",),
                 "demographic_parity": ("selection",)}[self.constraint]
        for i in range(1, len(groups)):
            for kind in kinds:
                A_eq.append(rate_row(i, kind) - rate_row(0, kind))
                b_eq.append(0.0)
        if self.selection_rate is not None:
            n = sum(curves[a].n_pos + curves[a].n_neg for a in groups)
            A_eq.append(sum(rate_row(i, "selection") * (curves[a].n_pos + curves[a].n_neg) / n
                            for i, a in enumerate(groups)))
            b_eq.append(float(self.selection_rate))
        res = linprog(cost, A_eq=np.vstack(A_eq), b_eq=np.asarray(b_eq), bounds=(0, None), method="highs")
        if res.status != 0:
            raise PostProcessingInputError(f"the derived-predictor LP failed: {res.message}")
        x = np.clip(res.x, 0.0, None)
        return {a: x[offsets[i]:offsets[i + 1]] for i, a in enumerate(groups)}, float(res.fun)

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self):
        if not hasattr(self, "mixtures_"):
            raise PostProcessingInputError("ThresholdPostProcessor is not fitted; call fit() first")

    def predict_expected(self, scores, *, sensitive_features) -> np.ndarray:
        """Probability of a positive decision for each row: sum_k w_k 1[score >= threshold_k]."""
        self._check_fitted()
        s = as_scores(scores)
        g = as_groups(sensitive_features, s.size)
        check_known(g, self.groups_)
        p = np.zeros(s.size)
        for level in self.groups_:
            m = g == level
            if not m.any():
                continue
            mix = self.mixtures_[level].sort_values("threshold")
            t, w = mix["threshold"].to_numpy(), mix["weight"].to_numpy()
            cum = np.r_[0.0, np.cumsum(w)]
            p[m] = cum[np.searchsorted(t, s[m], side="right")]
        return np.clip(p, 0.0, 1.0)

    def predict(self, scores, *, sensitive_features, random_state=None) -> np.ndarray:
        """Randomized 0/1 decisions: positive with probability `predict_expected`."""
        p = self.predict_expected(scores, sensitive_features=sensitive_features)
        rng = np.random.default_rng(random_state)
        return (rng.random(p.size) < p).astype(int)

    def evaluate(self, scores, labels, *, sensitive_features, clusters=None, confidence: float = 0.95) -> pd.DataFrame:
        """Expected TPR, FPR, selection rate and accuracy per group on (held-out) data, with SEs and CIs,
        and each group's difference from the first group (see `postprocessing.rates`)."""
        s = as_scores(scores)
        y = as_labels(labels, s.size)
        p = self.predict_expected(s, sensitive_features=sensitive_features)
        return rate_table(p, y, as_groups(sensitive_features, s.size), clusters=clusters,
                          reference=self.groups_[0], confidence=confidence)
