"""sample_weight: fitting on counts equals fitting on the expanded rows, exactly; weights are validated.

Each case has per-item counts (n_pos, n_neg, some zero) on tied scores in 3-4 groups whose labels carry quotes, `+`,
non-Latin script and HTML characters. The weighted fit (two rows per item) must reproduce the fit on one row per
labelled example bit for bit: hulls, mixing weights, grid, chosen threshold / margin and decisions.
"""
from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_curve

from fair_pipeline.postprocessing import (
    PostProcessingInputError,
    RejectOptionClassifier,
    ThresholdPostProcessor,
    roc_points,
)
from fair_pipeline.selection import families as fam
from fair_pipeline.selection.candidates import Ranker

GROUPS = ['Say "hi"', "a+b", "日本語", "<b>&amp;</b>"]
SEEDS = range(6)


def _items(seed: int, n_groups: int) -> pd.DataFrame:
    """Items with tied scores (one decimal) and counts 0..6; every group has both classes."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(25, 60))
    group = np.array(GROUPS[:n_groups], dtype=object)[rng.integers(0, n_groups, n)]
    score = np.round(rng.normal(size=n) + 0.3 * (group == GROUPS[0]), 1)
    n_pos = rng.binomial(6, 1.0 / (1.0 + np.exp(-1.5 * score)))
    n_neg = rng.integers(0, 6, n) * (rng.random(n) < 0.85)
    n_pos[0], n_neg[0] = 0, 3  # an item without positives
    n_pos[1], n_neg[1] = 4, 0  # an item without negatives
    frame = pd.DataFrame({"group": group, "score": score, "n_pos": n_pos, "n_neg": n_neg})
    extra = pd.DataFrame({"group": GROUPS[:n_groups] * 2, "score": [0.05] * n_groups + [-0.05] * n_groups,
                          "n_pos": [1] * n_groups + [0] * n_groups, "n_neg": [0] * n_groups + [1] * n_groups})
    return pd.concat([frame, extra], ignore_index=True)


def _expanded(items: pd.DataFrame, seed: int):
    """One row per labelled example, shuffled (the order must not matter)."""
    reps = np.r_[items["n_pos"], items["n_neg"]]
    s = np.repeat(np.r_[items["score"], items["score"]], reps)
    y = np.repeat(np.r_[np.ones(len(items), int), np.zeros(len(items), int)], reps)
    g = np.repeat(np.r_[items["group"], items["group"]], reps)
    order = np.random.default_rng(seed).permutation(s.size)
    return s[order], y[order], g[order]


def _weighted(items: pd.DataFrame):
    """Two rows per item (n_pos, n_neg); the zero-weight ones are kept here: they must change nothing."""
    return (np.r_[items["score"], items["score"]], np.r_[np.ones(len(items), int), np.zeros(len(items), int)],
            np.r_[items["group"], items["group"]], np.r_[items["n_pos"], items["n_neg"]])


def _probe(items):
    """Scores at, between and beyond the fit scores."""
    s = np.unique(items["score"])
    return np.r_[s, 0.5 * (s[1:] + s[:-1]), s.min() - 1, s.max() + 1]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("setup", [
    {"constraint": "equalized_odds"},
    {"constraint": "equal_opportunity", "objective": "balanced_accuracy"},
    {"constraint": "demographic_parity", "objective": {"false_positive": 2.0, "false_negative": 1.0}},
    {"constraint": "equalized_odds", "selection_rate": 0.3},
])
def test_threshold_postprocessor_weighted_equals_expanded(seed, setup):
    items = _items(seed, 3 + seed % 2)
    s, y, g = _expanded(items, seed)
    ref = ThresholdPostProcessor(**setup).fit(s, y, sensitive_features=g)
    sw, yw, gw, w = _weighted(items)
    fit = ThresholdPostProcessor(**setup).fit(sw, yw, sensitive_features=gw, sample_weight=w)
    assert fit.groups_ == ref.groups_ and len(ref.groups_) == 3 + seed % 2
    for level in ref.groups_:
        pd.testing.assert_frame_equal(fit.hulls_[level], ref.hulls_[level], check_exact=True)
        pd.testing.assert_frame_equal(fit.mixtures_[level], ref.mixtures_[level], check_exact=True)
    pd.testing.assert_frame_equal(fit.operating_points_, ref.operating_points_, check_exact=True, check_dtype=False)
    assert (fit.objective_value_, fit.equalized_odds_gap_, fit.lp_optimum_) == \
        (ref.objective_value_, ref.equalized_odds_gap_, ref.lp_optimum_)
    probe = _probe(items)
    for level in ref.groups_:
        groups = np.full(probe.size, level, dtype=object)
        np.testing.assert_array_equal(fit.predict_expected(probe, sensitive_features=groups),
                                      ref.predict_expected(probe, sensitive_features=groups))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("setup", [
    {"metric": "statistical_parity"},
    {"metric": "equal_opportunity", "threshold": 0.1, "bound": 0.02},
    {"metric": "average_odds", "objective": "accuracy", "low": -1.0, "high": 1.0, "n_thresholds": 41},
    {"metric": "equal_opportunity", "threshold": 0.0, "margin": 0.2, "privileged": "a+b"},
])
def test_reject_option_weighted_equals_expanded(seed, setup):
    items = _items(seed, 3 + seed % 2)
    s, y, g = _expanded(items, seed)
    sw, yw, gw, w = _weighted(items)
    with warnings.catch_warnings(record=True) as caught_ref:
        warnings.simplefilter("always")
        ref = RejectOptionClassifier(**setup).fit(s, y, sensitive_features=g)
    with warnings.catch_warnings(record=True) as caught_fit:
        warnings.simplefilter("always")
        fit = RejectOptionClassifier(**setup).fit(sw, yw, sensitive_features=gw, sample_weight=w)
    assert [str(x.message) for x in caught_fit] == [str(x.message) for x in caught_ref]
    pd.testing.assert_frame_equal(fit.grid_, ref.grid_, check_exact=True)
    assert (fit.threshold_, fit.margin_, fit.privileged_, fit.groups_, fit.feasible_, fit.metric_value_,
            fit.balanced_accuracy_) == (ref.threshold_, ref.margin_, ref.privileged_, ref.groups_, ref.feasible_,
                                        ref.metric_value_, ref.balanced_accuracy_)
    probe = np.r_[_probe(items), ref.threshold_ - ref.margin_, ref.threshold_ + ref.margin_]
    for level in ref.groups_:
        groups = np.full(probe.size, level, dtype=object)
        np.testing.assert_array_equal(fit.predict(probe, sensitive_features=groups),
                                      ref.predict(probe, sensitive_features=groups))


def _expand_items(score, items):
    reps = np.r_[items["n_pos"], items["n_neg"]]
    return (np.repeat(np.r_[score, score], reps),
            np.repeat(np.r_[np.ones(len(items), int), np.zeros(len(items), int)], reps),
            np.repeat(np.r_[items["group"], items["group"]].astype(str), reps))


@pytest.mark.parametrize("seed", [0, 1])
def test_fit_postprocessors_equal_fits_on_the_expanded_rows(seed):
    items = _items(seed, 3)
    rng = np.random.default_rng(10 + seed)
    items = items.assign(f0=items["score"], f1=np.round(rng.normal(size=len(items)), 1))
    base = Ranker("r", 0.0, ("f0", "f1"), np.array([1.0, 0.0]), 0.0, dt.date(2026, 1, 1), dt.date(2026, 1, 2), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a bound the grid cannot meet: the same warning as the reference fit
        members = fam.fit_postprocessors(base, items, 0.3, fam.DECIDING_FAMILIES)
    assert len(members) == 5 and all(c.model is not None for c in members), [c.reason for c in members]
    s, y, g = _expand_items(base.score(items), items)
    held_out = items.assign(f0=items["f0"] + 0.05)
    for cand in members:
        ref = cand.model.__class__(**cand.model.get_params())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref.fit(s if cand.family == "threshold_postprocessor" else fam.probability(s), y, sensitive_features=g)
        ref_cand = fam.FamilyCandidate(cand.family, cand.setting, base, ref)
        for frame in (items, held_out):
            np.testing.assert_array_equal(cand.decisions(frame), ref_cand.decisions(frame))


def test_roc_points_with_fractional_weights_match_scikit_learn():
    rng = np.random.default_rng(3)
    s = np.round(rng.normal(size=300), 1)
    y = (rng.random(300) < 0.4).astype(int)
    w = rng.gamma(0.7, size=300) * (rng.random(300) < 0.9)
    curve = roc_points(s, y, w)
    fpr, tpr, thresholds = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    np.testing.assert_allclose(curve.fpr, fpr, rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve.tpr, tpr, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(curve.thresholds[1:-1], thresholds[1:-1])
    assert curve.n_pos == pytest.approx(w[y == 1].sum()) and curve.n_neg == pytest.approx(w[y == 0].sum())


def test_scaling_the_weights_changes_no_decision():
    items = _items(7, 3)
    sw, yw, gw, w = _weighted(items)
    for model in (ThresholdPostProcessor(constraint="equalized_odds"),
                  RejectOptionClassifier(metric="equal_opportunity", threshold=0.0, bound=0.1)):
        a = model.__class__(**model.get_params()).fit(sw, yw, sensitive_features=gw, sample_weight=w)
        b = model.__class__(**model.get_params()).fit(sw, yw, sensitive_features=gw, sample_weight=w * 0.37)
        probe = _probe(items)
        for level in a.groups_:
            groups = np.full(probe.size, level, dtype=object)
            predict = "predict_expected" if isinstance(model, ThresholdPostProcessor) else "predict"
            np.testing.assert_allclose(getattr(a, predict)(probe, sensitive_features=groups),
                                       getattr(b, predict)(probe, sensitive_features=groups), atol=1e-9)


@pytest.mark.parametrize("model", [ThresholdPostProcessor(), RejectOptionClassifier(threshold=0.0)])
@pytest.mark.parametrize(("weights", "message"), [
    (lambda w: w[:-1], r"sample_weight must have shape \(\d+,\) like scores, got shape \(\d+,\)"),
    (lambda w: np.c_[w, w], r"sample_weight must have shape .* got shape \(\d+, 2\)"),
    (lambda w: np.where(np.arange(w.size) == 5, np.nan, w), r"1 non-finite \(NaN or infinite\) values \(first at row 5"),
    (lambda w: np.where(np.arange(w.size) == 7, np.inf, w), r"1 non-finite .* \(first at row 7"),
    (lambda w: np.where(np.arange(w.size) % 10 == 3, -1.0, w), r"negative values \(first at row 3: -1.0\)"),
    (lambda w: w.astype(str).astype(object) + "x", r"sample_weight must be numbers"),
])
def test_bad_weights_are_errors_naming_what_and_where(model, weights, message):
    s, y, g, w = _weighted(_items(0, 3))
    with pytest.raises(PostProcessingInputError, match=message):
        model.fit(s, y, sensitive_features=g, sample_weight=weights(w.astype(float)))


@pytest.mark.parametrize("model", [ThresholdPostProcessor(), RejectOptionClassifier(threshold=0.0)])
def test_a_group_of_zero_weight_and_a_class_of_zero_weight_are_named(model):
    s, y, g, w = _weighted(_items(1, 4))
    with pytest.raises(PostProcessingInputError, match=r"sample_weight is 0 on every row of group\(s\) \['日本語'\]"):
        model.fit(s, y, sensitive_features=g, sample_weight=np.where(g == "日本語", 0, w))
    with pytest.raises(PostProcessingInputError, match=r"group 'a\+b' has 0 positives and \d+ negatives \(weighted\)"):
        model.fit(s, y, sensitive_features=g, sample_weight=np.where((g == "a+b") & (y == 1), 0, w))
