"""Equality-of-opportunity score transform of Nandy et al. (Lemma 1, Theorem 1, appendix A.1).

For each group c, F*_{c,1} is the CDF of the scores of positive responses (clicks) of group c, each
weighted by 1 / w_position (Theorem 1; unit weights give Lemma 1's plain CDF). The fair score is

    s~ = (1 - alpha) * s + alpha * F^{-1}(F*_{c,1}(s))

where F is the pooled CDF of all the scores seen at fit time (every group, clicked or not; the paper's
"original scores irrespective of group membership and value of Y") and can be switched off
(`pooled_back_mapping=False` gives F*_{c,1}(s) in [0, 1]).

Storage (appendix A.1): both CDFs are discretized at `n_knots` probabilities p_k = k / (n_knots - 1):
q_{c,k} = F*_{c,1}^{-1}(p_k) per group and Q_k = F^{-1}(p_k) pooled, with weighted Hazen quantiles
(`eo.quantiles`). Since F*_{c,1}(q_{c,k}) = p_k and F^{-1}(p_k) = Q_k, the group map is the monotone
piecewise-linear curve through (q_{c,k}, Q_k) (through (q_{c,k}, p_k) without back-mapping): one
`np.interp` per group. Ties among the q_{c,k} (a group with few distinct scores) are collapsed to one
knot, so a group keeps at most `n_knots` knots.

Out-of-range rule: a score below the group's first knot or above its last one is translated by the same
offset as that end knot ("shift", the default: slope 1, so the map stays strictly increasing and the
order among out-of-range items is kept) or mapped to the end value ("clip").
"""
from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from fair_pipeline.eo.aggregate import (
    EOInputError,
    ScoreAggregate,
    aggregate_weighted_sums,
    distinct_weighted,
    score_values,
    weighted_positives,
)
from fair_pipeline.eo.piecewise import GroupedInterpolator
from fair_pipeline.eo.quantiles import collapse_ties, weighted_quantiles

JSON_FORMAT = "fair_pipeline.WeightedCDFTransformer"
JSON_VERSION = 1


class UnseenGroupError(EOInputError, KeyError):
    """transform() got a group that fit() never saw (and unseen_group='error')."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class WeightedCDFTransformer(TransformerMixin, BaseEstimator):
    """Per-group weighted-CDF transform for equality of opportunity in rankings.

    Parameters
    ----------
    alpha : float in [0, 1], default 1. Relaxation of appendix A.1; 0 returns the scores unchanged.
    n_knots : int >= 2, default 1001. Probabilities at which each CDF is discretized (every 1e-3).
    pooled_back_mapping : bool, default True. Map F*_{c,1}(s) back to the score scale with F^{-1}.
    out_of_range : "shift" (default) or "clip"; see the module docstring.
    unseen_group : "error" (default) or "identity": what transform() does with a group fit() never saw.
    missing_group : "error" (default) or "exclude": rows whose group is missing at fit time.
    score_bin_width : float or None (default). Count scores at the centres of bins of this width, as the
        SQL aggregation does; None uses the distinct scores.
    min_positives : int, default 30. Fewer clicks than this in a group is an error (not estimable).

    Fitted attributes
    -----------------
    groups_ : sorted group labels (strings). probabilities_ : the n_knots probabilities p_k.
    group_quantiles_ : {group: q_{c,k}}. reference_quantiles_ : Q_k of the pooled F.
    knots_ : {group: (x, y)} the strictly increasing knots of each group's map (ties collapsed).
    n_positives_ : {group: clicks}. positive_weight_ : {group: sum of weights}.
    n_effective_ : {group: Kish effective sample size of the weighted clicks}; see `cdf_band`.
    n_reference_ : number of scores behind the pooled F.
    """

    def __init__(
        self,
        alpha: float = 1.0,
        n_knots: int = 1001,
        pooled_back_mapping: bool = True,
        out_of_range: str = "shift",
        unseen_group: str = "error",
        missing_group: str = "error",
        score_bin_width: float | None = None,
        min_positives: int = 30,
    ):
        self.alpha = alpha
        self.n_knots = n_knots
        self.pooled_back_mapping = pooled_back_mapping
        self.out_of_range = out_of_range
        self.unseen_group = unseen_group
        self.missing_group = missing_group
        self.score_bin_width = score_bin_width
        self.min_positives = min_positives

    # ------------------------------------------------------------------ fitting
    def fit(self, scores, sensitive_features, sample_weight=None, *, clicks=None):
        """Learn F*_{c,1} per group from positive responses.

        scores : (n,) or (n, 1) scores s(X). sensitive_features : (n,) group labels (compared as strings).
        sample_weight : (n,) positive weights of the positive responses, typically 1 / w_position
            (None: unit weights, i.e. Lemma 1's unweighted CDF).
        clicks : optional (n,) 0/1. If given, only clicked rows are positive responses and all rows feed
            the pooled CDF F; if None, every row is a positive response.
        """
        self._check_params()
        s = _as_scores(scores)
        labels, missing = _labels(sensitive_features, len(s))
        _check_finite(s, labels, missing)
        if missing.any():
            if self.missing_group == "error":
                raise EOInputError(
                    f"sensitive_features: {int(missing.sum())} of {len(s)} rows have a missing group; "
                    "pass missing_group='exclude' to leave them out of the per-group CDFs"
                )
        positive = np.ones(len(s), bool) if clicks is None else _as_clicks(clicks, len(s))
        weight = np.ones(len(s)) if sample_weight is None else np.asarray(sample_weight, dtype=float).ravel()
        if len(weight) != len(s):
            raise EOInputError(f"sample_weight has {len(weight)} rows but scores has {len(s)}")
        _check_weights(weight, labels, positive & ~missing)
        values = score_values(s, self.score_bin_width)
        positive_values, positive_weights, n_positives, squares = {}, {}, {}, {}
        for label in sorted(set(labels[~missing])):
            mine = positive & (labels == label) & ~missing
            positive_values[label], positive_weights[label] = distinct_weighted(values[mine], weight[mine])
            n_positives[label] = int(mine.sum())
            squares[label] = float((weight[mine] ** 2).sum())
        reference_values, reference_counts = distinct_weighted(values, np.ones(len(s)))
        return self.fit_aggregate(
            ScoreAggregate(positive_values, positive_weights, n_positives, squares, reference_values, reference_counts)
        )

    def fit_aggregate(self, aggregate: ScoreAggregate):
        """Fit from sufficient statistics (weighted counts per group x distinct score); see eo.aggregate."""
        self._check_params()
        if len(aggregate.reference_values) == 0:
            raise EOInputError("no scores to fit: the pooled score distribution is empty")
        if not aggregate.positive_values:
            raise EOInputError("no groups to fit: every row lacks a group")
        too_small = {g: n for g, n in aggregate.n_positives.items() if n < max(self.min_positives, 1)}
        if too_small:
            detail = ", ".join(f"group {g!r}: {n} clicks" for g, n in sorted(too_small.items()))
            raise EOInputError(
                f"not estimable: fewer than min_positives={self.min_positives} positive responses in {detail}"
            )
        probs = np.linspace(0.0, 1.0, self.n_knots)
        self.probabilities_ = probs
        self.reference_quantiles_ = weighted_quantiles(aggregate.reference_values, aggregate.reference_counts, probs)
        self.groups_ = sorted(aggregate.positive_values)
        self.group_quantiles_ = {
            g: weighted_quantiles(aggregate.positive_values[g], aggregate.positive_weights[g], probs) for g in self.groups_
        }
        self.n_positives_ = dict(aggregate.n_positives)
        self.positive_weight_ = {g: float(aggregate.positive_weights[g].sum()) for g in self.groups_}
        self.n_effective_ = {
            g: self.positive_weight_[g] ** 2 / aggregate.positive_weight_squares[g] for g in self.groups_
        }
        self.n_reference_ = int(round(float(aggregate.reference_counts.sum())))
        self.n_features_in_ = 1
        self._build_maps()
        return self

    def fit_transform(self, scores, sensitive_features, sample_weight=None, *, clicks=None):
        """fit, then transform the same scores (TransformerMixin's version would drop sensitive_features)."""
        return self.fit(scores, sensitive_features, sample_weight, clicks=clicks).transform(scores, sensitive_features)

    def cdf_band(self, level: float = 0.95) -> dict[str, float]:
        """Per group, the half-width of a simultaneous confidence band for F*_{c,1}: the DKW bound
        sqrt(log(2 / (1 - level)) / (2 n_eff)) with Kish's effective size n_eff = (sum w)^2 / sum w^2 of the
        weighted clicks (exact DKW for unit weights; an approximation for unequal 1 / w_position weights)."""
        check_is_fitted(self, "knots_")
        return {g: float(np.sqrt(np.log(2.0 / (1.0 - level)) / (2.0 * self.n_effective_[g]))) for g in self.groups_}

    def _build_maps(self) -> None:
        target = self.reference_quantiles_ if self.pooled_back_mapping else self.probabilities_
        self.knots_ = {g: collapse_ties(self.group_quantiles_[g], target) for g in self.groups_}
        self._interpolator = GroupedInterpolator.build([self.knots_[g] for g in self.groups_], self.out_of_range)

    def _check_params(self) -> None:
        problems = []
        if not (isinstance(self.alpha, (int, float)) and 0.0 <= self.alpha <= 1.0):
            problems.append(f"alpha={self.alpha!r} must be in [0, 1]")
        if not (isinstance(self.n_knots, (int, np.integer)) and self.n_knots >= 2):
            problems.append(f"n_knots={self.n_knots!r} must be an integer >= 2")
        if self.out_of_range not in ("shift", "clip"):
            problems.append(f"out_of_range={self.out_of_range!r} must be 'shift' or 'clip'")
        if self.unseen_group not in ("error", "identity"):
            problems.append(f"unseen_group={self.unseen_group!r} must be 'error' or 'identity'")
        if self.missing_group not in ("error", "exclude"):
            problems.append(f"missing_group={self.missing_group!r} must be 'error' or 'exclude'")
        if problems:
            raise EOInputError("invalid WeightedCDFTransformer parameters: " + "; ".join(problems))

    # ------------------------------------------------------------------ transforming
    def transform(self, scores, sensitive_features):
        """Fair scores s~ = (1 - alpha) s + alpha T_c(s), same shape as `scores`."""
        check_is_fitted(self, "knots_")
        self._check_params()
        shape = np.shape(scores)
        s = _as_scores(scores)
        codes, labels = _group_codes(sensitive_features)
        if len(codes) != len(s):
            raise EOInputError(f"sensitive_features has {len(codes)} rows but scores has {len(s)}")
        if len(s) == 0:
            return s.reshape(shape).copy()
        # min / max propagate NaN and expose infinities without a full-size temporary.
        if not (np.isfinite(s.min()) and np.isfinite(s.max())):
            raise EOInputError(f"scores: {int((~np.isfinite(s)).sum())} of {len(s)} values are NaN or infinite")
        if codes.min() < 0:
            raise EOInputError(f"sensitive_features: {int((codes < 0).sum())} rows have a missing group")
        fitted = {g: i for i, g in enumerate(self.groups_)}
        group_of_code = np.array([fitted.get(label, -1) for label in labels], dtype=np.intp)
        if (group_of_code < 0).any():
            counts = np.bincount(codes, minlength=len(labels))
            unseen = np.flatnonzero((group_of_code < 0) & (counts > 0))
            if len(unseen) and self.unseen_group == "error":
                detail = ", ".join(f"{labels[i]!r} ({counts[i]} rows)" for i in unseen)
                raise UnseenGroupError(f"groups never seen at fit time: {detail}; fitted groups {self.groups_}")
        if self.alpha == 0:
            return s.reshape(shape).copy()
        return self._interpolator(s, codes, group_of_code, float(self.alpha)).reshape(shape)

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict:
        check_is_fitted(self, "knots_")
        return {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "params": self.get_params(),
            "probabilities": self.probabilities_.tolist(),
            "reference_quantiles": self.reference_quantiles_.tolist(),
            "n_reference": self.n_reference_,
            "groups": {
                g: {
                    "quantiles": self.group_quantiles_[g].tolist(),
                    "n_positives": self.n_positives_[g],
                    "positive_weight": self.positive_weight_[g],
                    "n_effective": self.n_effective_[g],
                }
                for g in self.groups_
            },
        }

    def to_json(self) -> str:
        """Exact: Python writes floats with repr, which parses back to the same double."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, payload: dict) -> "WeightedCDFTransformer":
        if payload.get("format") != JSON_FORMAT or payload.get("version") != JSON_VERSION:
            raise EOInputError(
                f"not a serialized WeightedCDFTransformer (format={payload.get('format')!r}, "
                f"version={payload.get('version')!r}; expected {JSON_FORMAT!r} version {JSON_VERSION})"
            )
        model = cls(**payload["params"])
        model._check_params()
        model.probabilities_ = np.asarray(payload["probabilities"], dtype=float)
        model.reference_quantiles_ = np.asarray(payload["reference_quantiles"], dtype=float)
        model.n_reference_ = int(payload["n_reference"])
        model.groups_ = sorted(payload["groups"])
        model.group_quantiles_ = {g: np.asarray(payload["groups"][g]["quantiles"], dtype=float) for g in model.groups_}
        model.n_positives_ = {g: int(payload["groups"][g]["n_positives"]) for g in model.groups_}
        model.positive_weight_ = {g: float(payload["groups"][g]["positive_weight"]) for g in model.groups_}
        model.n_effective_ = {g: float(payload["groups"][g]["n_effective"]) for g in model.groups_}
        model.n_features_in_ = 1
        model._build_maps()
        return model

    @classmethod
    def from_json(cls, text: str) -> "WeightedCDFTransformer":
        return cls.from_dict(json.loads(text))


def _as_scores(scores) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    if s.ndim == 2 and s.shape[1] == 1:
        s = s[:, 0]
    if s.ndim != 1:
        raise EOInputError(f"scores must be 1-D or a single column; got shape {np.shape(scores)}")
    return s


def _labels(sensitive_features, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Group labels as strings (so JSON keys and SQL VARCHARs match) and the missing-value mask."""
    series = pd.Series(np.asarray(sensitive_features, dtype=object).ravel())
    if len(series) != n:
        raise EOInputError(f"sensitive_features has {len(series)} rows but scores has {n}")
    missing = series.isna().to_numpy()
    labels = series.where(~missing, "").astype(str).to_numpy()
    return labels, missing | (labels == "")  # an empty label names no group


def _group_codes(sensitive_features) -> tuple[np.ndarray, list[str]]:
    """Integer codes (-1 = missing) and the label (as a string) of each code; a Categorical's codes are used
    as they are (no hashing, no copy)."""
    values = sensitive_features
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        values = values.array
    if isinstance(values, pd.Categorical):
        codes, labels = np.asarray(values.codes), [str(c) for c in values.categories]
    else:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object).ravel())
        labels = [str(u) for u in uniques]
    empty = [i for i, label in enumerate(labels) if label == ""]  # an empty label names no group
    if empty:
        codes = np.where(np.isin(codes, empty), -1, codes)
    return codes, labels


def _as_clicks(clicks, n: int) -> np.ndarray:
    c = np.asarray(clicks).ravel()
    if len(c) != n:
        raise EOInputError(f"clicks has {len(c)} rows but scores has {n}")
    bad = ~np.isin(c, (0, 1))
    if bad.any():
        raise EOInputError(f"clicks: {int(bad.sum())} values are not 0 or 1")
    return c.astype(bool)


def _by_group(mask: np.ndarray, labels: np.ndarray) -> str:
    return ", ".join(f"group {g!r}: {int((mask & (labels == g)).sum())}" for g in sorted(set(labels[mask])))


def _check_finite(s: np.ndarray, labels: np.ndarray, missing: np.ndarray) -> None:
    bad = ~np.isfinite(s)
    if bad.any():
        shown = np.where(missing, "<missing>", labels)
        raise EOInputError(f"scores: {int(bad.sum())} NaN or infinite values ({_by_group(bad, shown)})")


def _check_weights(weight: np.ndarray, labels: np.ndarray, used: np.ndarray) -> None:
    bad = used & ~(np.isfinite(weight) & (weight > 0))
    if bad.any():
        raise EOInputError(
            f"sample_weight must be finite and > 0 for positive responses; {int(bad.sum())} are not "
            f"({_by_group(bad, labels)})"
        )



def fit_from_click_counts(counts: pd.DataFrame, position_weights, **params) -> WeightedCDFTransformer:
    """Fit from a click-count table (SQL model `marts.eo_score_click_counts` summed over the training
    window, or `click_counts` in memory) and a position-bias table w_position (array, index 0 = position 1;
    Mapping; or a (position, weight) frame). Unit weights give the unweighted CDF of Lemma 1."""
    return _fit(lambda missing_group: weighted_positives(counts, position_weights, missing_group=missing_group), params)


def fit_from_weighted_sums(sums: pd.DataFrame, **params) -> WeightedCDFTransformer:
    """Fit from a table whose clicks already carry their weights (`aggregate_weighted_sums`): per group and
    score value, summed over positions."""
    return _fit(lambda missing_group: aggregate_weighted_sums(sums, missing_group=missing_group), params)


def _fit(aggregate_of, params: dict) -> WeightedCDFTransformer:
    model = WeightedCDFTransformer(**params)
    model._check_params()  # bad settings are named before the aggregate is built
    return model.fit_aggregate(aggregate_of(model.missing_group))


def with_alpha(model: WeightedCDFTransformer, alpha: float) -> WeightedCDFTransformer:
    """The same fitted transform at another relaxation alpha (shares the knots; no refit needed)."""
    check_is_fitted(model, "knots_")
    relaxed = copy.copy(model)
    relaxed.set_params(alpha=alpha)
    relaxed._check_params()
    return relaxed
