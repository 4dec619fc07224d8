"""WeightedCDFTransformer: quantile math against brute force, Theorem 1's weighting, shape rules, JSON, errors."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from fair_pipeline.eo import (
    EOInputError,
    UnseenGroupError,
    WeightedCDFTransformer,
    click_counts,
    fit_from_click_counts,
    with_alpha,
)
from fair_pipeline.eo.quantiles import weighted_quantiles


def _two_groups(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    groups = np.where(rng.random(n) < 0.3, "a", "b")
    scores = np.where(groups == "a", rng.normal(0.0, 1.0, n), rng.normal(2.0, 0.5, n))
    return scores, groups


# ---------------------------------------------------------------- quantile kernel
def test_weighted_quantiles_equal_numpy_hazen_for_unit_weights():
    rng = np.random.default_rng(1)
    x = rng.normal(size=257)
    probs = np.linspace(0, 1, 101)
    values = np.sort(x)
    got = weighted_quantiles(values, np.ones_like(values), probs)
    np.testing.assert_allclose(got, np.quantile(x, probs, method="hazen"), rtol=0, atol=1e-12)


def test_weighted_quantiles_are_scale_free_and_converge_to_the_reweighted_law():
    rng = np.random.default_rng(2)
    x = rng.normal(size=200_000)
    values, order = np.sort(x), np.argsort(x)
    weights = np.exp(x - 0.5)[order]  # importance weights N(0,1) -> N(1,1)
    probs = np.linspace(0.01, 0.99, 99)
    got = weighted_quantiles(values, weights, probs)
    np.testing.assert_array_equal(got, weighted_quantiles(values, 8.0 * weights, probs))
    np.testing.assert_allclose(got, 1.0 + stats.norm.ppf(probs), atol=0.03)
    unweighted = weighted_quantiles(values, np.ones_like(values), probs)
    assert np.abs(unweighted - (1.0 + stats.norm.ppf(probs))).min() > 0.9  # the weights matter


def test_hand_example_knots_with_ties_collapsed():
    # values 1,2,3,4 with weights 1,1,1,5: Hazen mid-points .0625 .1875 .3125 .6875 ->
    # quantiles at p = 0, .25, .5, .75, 1 are 1, 2.5, 3.5, 4, 4; the tie at 4 keeps y = (.75 + 1) / 2.
    model = WeightedCDFTransformer(n_knots=5, pooled_back_mapping=False, min_positives=1)
    model.fit([1.0, 2.0, 3.0, 4.0], ["g"] * 4, sample_weight=[1, 1, 1, 5])
    np.testing.assert_array_equal(model.group_quantiles_["g"], [1.0, 2.5, 3.5, 4.0, 4.0])
    x, y = model.knots_["g"]
    np.testing.assert_array_equal(x, [1.0, 2.5, 3.5, 4.0])
    np.testing.assert_array_equal(y, [0.0, 0.25, 0.5, 0.875])
    # Between knots: linear. Outside: slope-1 shift from the end knots.
    np.testing.assert_allclose(model.transform([3.0, 0.0, 6.0], ["g"] * 3), [0.375, -1.0, 2.875])
    clipped = WeightedCDFTransformer(n_knots=5, pooled_back_mapping=False, min_positives=1, out_of_range="clip")
    clipped.fit([1.0, 2.0, 3.0, 4.0], ["g"] * 4, sample_weight=[1, 1, 1, 5])
    np.testing.assert_allclose(clipped.transform([0.0, 6.0], ["g", "g"]), [0.0, 0.875])


# ---------------------------------------------------------------- Lemma 1 / Theorem 1
def test_transformed_positives_are_uniform_per_group_without_back_mapping():
    scores, groups = _two_groups(n=20000)
    model = WeightedCDFTransformer(pooled_back_mapping=False).fit(scores, groups)
    u = model.transform(scores, groups)
    for g in ("a", "b"):
        ug = np.sort(u[groups == g])
        ecdf_gap = np.abs(ug - (np.arange(1, len(ug) + 1) - 0.5) / len(ug)).max()
        assert ecdf_gap < 2e-3, (g, ecdf_gap)  # interpolation between 1e-3 knots only


def test_back_mapping_gives_each_group_the_pooled_score_distribution():
    scores, groups = _two_groups(n=20000, seed=3)
    model = WeightedCDFTransformer().fit(scores, groups)
    fair = model.transform(scores, groups)
    probs = np.linspace(0.05, 0.95, 19)
    pooled = np.quantile(scores, probs)
    for g in ("a", "b"):
        np.testing.assert_allclose(np.quantile(fair[groups == g], probs), pooled, atol=0.02)
    # Raw group quantiles are far apart (means 0 and 2): the check above is not vacuous.
    assert abs(np.median(scores[groups == "a"]) - np.median(scores[groups == "b"])) > 1.5


def test_inverse_position_weights_recover_the_cdf_of_counterfactual_positives():
    """Theorem 1, eq. (5): clicks at position j are Y(1)=1 items thinned by w_j; weighting clicks by 1/w_j
    recovers the CDF of s | Y(1)=1, C=c, while the unweighted click CDF is biased towards top scores."""
    rng = np.random.default_rng(4)
    n = 400_000
    groups = np.where(rng.random(n) < 0.4, "a", "b")
    scores = rng.normal(np.where(groups == "a", 0.0, 1.0), 1.0)
    relevant = rng.random(n) < 1 / (1 + np.exp(-scores))
    # Position is a noisy rank of the score within blocks of 50 (as in a ranked list).
    position = (np.argsort(np.argsort(-(scores + rng.normal(0, 0.3, n)).reshape(-1, 50), axis=1), axis=1) + 1).ravel()
    w = 1 / np.log2(1 + np.arange(1, 51))
    clicks = relevant & (rng.random(n) < w[position - 1])
    weighted = WeightedCDFTransformer(pooled_back_mapping=False).fit(
        scores, groups, sample_weight=1 / w[position - 1], clicks=clicks.astype(int)
    )
    unweighted = WeightedCDFTransformer(pooled_back_mapping=False).fit(scores, groups, clicks=clicks.astype(int))
    grid = np.linspace(-2, 3, 51)
    for g in ("a", "b"):
        truth = (scores[(groups == g) & relevant][:, None] <= grid[None, :]).mean(axis=0)
        got_w = weighted.transform(grid, [g] * len(grid))
        got_u = unweighted.transform(grid, [g] * len(grid))
        assert np.abs(got_w - truth).max() < 0.01, g
        assert np.abs(got_u - truth).max() > 0.05, g


def test_sample_weight_fit_equals_click_count_fit():
    rng = np.random.default_rng(5)
    n = 30_000
    scores, groups = _two_groups(n=n, seed=5)
    position = rng.integers(1, 11, n)
    clicks = (rng.random(n) < 0.3).astype(int)
    w = 1 / np.arange(1, 11) ** 0.7
    direct = WeightedCDFTransformer(score_bin_width=1e-3).fit(scores, groups, sample_weight=1 / w[position - 1], clicks=clicks)
    counts = click_counts(scores, groups, position, clicks, bin_width=1e-3)
    via_counts = fit_from_click_counts(counts, w, score_bin_width=1e-3)
    for g in ("a", "b"):
        np.testing.assert_allclose(direct.group_quantiles_[g], via_counts.group_quantiles_[g], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(direct.reference_quantiles_, via_counts.reference_quantiles_)
    assert direct.n_positives_ == via_counts.n_positives_ == {g: int(clicks[groups == g].sum()) for g in ("a", "b")}
    for g in ("a", "b"):
        assert direct.n_effective_[g] == pytest.approx(via_counts.n_effective_[g], rel=1e-12)


# ---------------------------------------------------------------- shape rules
@pytest.mark.parametrize("out_of_range", ["shift", "clip"])
@pytest.mark.parametrize("alpha", [1.0, 0.3])
def test_monotone_within_each_group(out_of_range, alpha):
    scores, groups = _two_groups(n=3000, seed=6)
    model = WeightedCDFTransformer(alpha=alpha, out_of_range=out_of_range).fit(scores, groups)
    probe = np.sort(np.r_[np.linspace(-8, 8, 20001), scores])
    for g in ("a", "b"):
        step = np.diff(model.transform(probe, [g] * len(probe)))
        if out_of_range == "shift" or alpha < 1:
            assert (step > 0).all(), g  # strictly: no ties are created, so rankings inside a group are kept
        else:
            assert (step >= 0).all(), g


def test_alpha_blends_identity_and_full_transform_exactly():
    scores, groups = _two_groups(n=3000, seed=7)
    full = WeightedCDFTransformer().fit(scores, groups)
    np.testing.assert_array_equal(with_alpha(full, 0.0).transform(scores, groups), scores)
    half = with_alpha(full, 0.25).transform(scores, groups)
    np.testing.assert_allclose(half, 0.75 * scores + 0.25 * full.transform(scores, groups), rtol=0, atol=1e-12)
    assert full.alpha == 1.0  # with_alpha does not touch the original


def test_two_dimensional_single_column_input_keeps_its_shape():
    scores, groups = _two_groups(n=500, seed=8)
    model = WeightedCDFTransformer().fit(scores.reshape(-1, 1), groups)
    out = model.transform(scores.reshape(-1, 1), groups)
    assert out.shape == (500, 1)
    np.testing.assert_array_equal(out[:, 0], model.transform(scores, groups))


# ---------------------------------------------------------------- JSON, sklearn conventions
def test_json_round_trip_is_exact():
    scores, groups = _two_groups(n=5000, seed=9)
    model = WeightedCDFTransformer(alpha=0.7, out_of_range="clip").fit(scores, groups, sample_weight=np.exp(scores / 7))
    text = model.to_json()
    back = WeightedCDFTransformer.from_json(text)
    assert back.to_json() == text
    assert back.get_params() == model.get_params()
    probe = np.linspace(-5, 5, 1001)
    for g in ("a", "b"):
        np.testing.assert_array_equal(back.group_quantiles_[g], model.group_quantiles_[g])
        np.testing.assert_array_equal(back.transform(probe, [g] * 1001), model.transform(probe, [g] * 1001))
    payload = json.loads(text)
    assert len(payload["groups"]["a"]["quantiles"]) == 1001
    assert payload["groups"]["a"]["n_positives"] == int((groups == "a").sum())


def test_json_of_another_format_is_rejected():
    with pytest.raises(EOInputError, match="not a serialized WeightedCDFTransformer"):
        WeightedCDFTransformer.from_json('{"format": "x", "version": 1}')


def test_sklearn_conventions():
    model = WeightedCDFTransformer(alpha=0.5, n_knots=11)
    assert clone(model).get_params() == model.get_params()
    with pytest.raises(NotFittedError):
        model.transform([1.0], ["a"])
    scores, groups = _two_groups(n=500)
    assert model.fit(scores, groups) is model
    assert model.n_features_in_ == 1 and model.groups_ == ["a", "b"]
    np.testing.assert_array_equal(clone(model).fit_transform(scores, groups), model.transform(scores, groups))
    # Invalid parameters are reported at fit, not in __init__.
    bad = WeightedCDFTransformer(alpha=2.0, out_of_range="wrap")
    with pytest.raises(EOInputError, match=r"alpha=2.0 must be in \[0, 1\].*out_of_range='wrap'"):
        bad.fit(scores, groups)


def test_integer_group_labels_are_matched_as_strings():
    scores, groups = _two_groups(n=1000)
    numeric = np.where(groups == "a", 0, 1)
    model = WeightedCDFTransformer().fit(scores, numeric)
    assert model.groups_ == ["0", "1"]
    np.testing.assert_array_equal(model.transform(scores, numeric), model.transform(scores, np.where(groups == "a", "0", "1")))


# ---------------------------------------------------------------- unseen groups and bad input
def test_unseen_group_raises_naming_it_unless_identity_fallback():
    scores, groups = _two_groups(n=1000)
    model = WeightedCDFTransformer().fit(scores, groups)
    probe_groups = np.array(["a", "z", "z", "b"])
    probe = np.array([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(UnseenGroupError, match=r"'z' \(2 rows\)"):
        model.transform(probe, probe_groups)
    fallback = clone(model).set_params(unseen_group="identity").fit(scores, groups)
    out = fallback.transform(probe, probe_groups)
    np.testing.assert_array_equal(out[1:3], probe[1:3])
    np.testing.assert_array_equal(out[[0, 3]], model.transform(probe[[0, 3]], probe_groups[[0, 3]]))


def test_nan_scores_are_reported_by_group_and_count():
    scores, groups = _two_groups(n=1000)
    scores[np.flatnonzero(groups == "b")[:3]] = np.nan
    scores[np.flatnonzero(groups == "a")[:1]] = np.inf
    with pytest.raises(EOInputError, match=r"4 NaN or infinite values \(group 'a': 1, group 'b': 3\)"):
        WeightedCDFTransformer().fit(scores, groups)
    good = WeightedCDFTransformer().fit(*_two_groups(n=1000))
    with pytest.raises(EOInputError, match="1 of 2 values are NaN"):
        good.transform([np.nan, 1.0], ["a", "b"])


def test_group_without_clicks_is_not_estimable():
    scores, groups = _two_groups(n=1000)
    clicks = (groups == "b").astype(int)
    with pytest.raises(EOInputError, match=r"not estimable.*group 'a': 0 clicks"):
        WeightedCDFTransformer().fit(scores, groups, clicks=clicks)
    few = clicks.copy()
    few[np.flatnonzero(groups == "a")[:5]] = 1
    with pytest.raises(EOInputError, match=r"group 'a': 5 clicks"):
        WeightedCDFTransformer(min_positives=30).fit(scores, groups, clicks=few)


def test_empty_input_and_missing_groups():
    with pytest.raises(EOInputError, match="pooled score distribution is empty"):
        WeightedCDFTransformer().fit([], [])
    scores, groups = _two_groups(n=1000)
    labelled = groups.astype(object)
    labelled[:7] = None
    labelled[7:9] = ""
    with pytest.raises(EOInputError, match="9 of 1000 rows have a missing group"):
        WeightedCDFTransformer().fit(scores, labelled)
    model = WeightedCDFTransformer(missing_group="exclude").fit(scores, labelled)
    assert sum(model.n_positives_.values()) == 991 and model.n_reference_ == 1000


def test_non_positive_sample_weights_are_reported_by_group_and_count():
    scores, groups = _two_groups(n=1000)
    weight = np.ones(1000)
    weight[np.flatnonzero(groups == "a")[:2]] = 0.0
    weight[np.flatnonzero(groups == "b")[:1]] = -1.0
    with pytest.raises(EOInputError, match=r"3 are not \(group 'a': 2, group 'b': 1\)"):
        WeightedCDFTransformer().fit(scores, groups, sample_weight=weight)


def test_non_positive_position_weights_are_reported_with_positions_and_groups():
    rng = np.random.default_rng(10)
    scores, groups = _two_groups(n=2000)
    position = rng.integers(1, 6, 2000)
    clicks = np.ones(2000, int)
    counts = click_counts(scores, groups, position, clicks)
    w = np.array([1.0, 0.8, 0.0, 0.5, 0.4])
    n_a = int(((groups == "a") & (position == 3)).sum())
    with pytest.raises(EOInputError, match=rf"position: weight \{{3: 0.0\}}.*group 'a': {n_a} clicks"):
        fit_from_click_counts(counts, w)
    with pytest.raises(EOInputError, match=r"5: nan"):
        fit_from_click_counts(counts, w[:4] + 0.1)  # no weight for position 5
    with pytest.raises(EOInputError, match="lacks columns"):
        fit_from_click_counts(counts.drop(columns="clicks"), w)
    nulls = counts.copy()
    nulls.loc[nulls.index[nulls["group_id"] == "b"][:3], "score_value"] = np.nan  # a NULL score from SQL
    n_null = int(nulls.loc[nulls["score_value"].isna(), "impressions"].sum())
    with pytest.raises(EOInputError, match=rf"NULL/NaN or infinite scores \(group 'b': {n_null} impressions\)"):
        fit_from_click_counts(nulls, w[:5] + 0.1)
    frame = pd.DataFrame({"position": [1, 2, 3, 4, 5], "weight": [1.0, 0.8, 0.6, 0.5, 0.4]})
    assert fit_from_click_counts(counts, frame).groups_ == ["a", "b"]
    with pytest.raises(EOInputError, match=r"repeats positions \[2\]"):
        fit_from_click_counts(counts, pd.concat([frame, frame.iloc[[1]]]))


def test_cdf_band_covers_the_true_cdf_over_replications():
    """DKW band with Kish's effective size: sup |F*_hat - F| <= band in >= 95% of replications (DKW is
    conservative), with position-bias thinning and 1/w weights as in Theorem 1."""
    rng = np.random.default_rng(12)
    grid = np.linspace(-3, 3, 241)
    truth = stats.norm.cdf(grid)
    w_levels = np.array([1.0, 0.5, 0.25])
    covered, bands = 0, []
    for _ in range(200):
        s = rng.normal(size=6000)
        w = w_levels[rng.integers(0, 3, 6000)]
        kept = rng.random(6000) < w  # clicks: Y(1)=1 items thinned by w
        model = WeightedCDFTransformer(pooled_back_mapping=False).fit(s[kept], ["g"] * kept.sum(), sample_weight=1 / w[kept])
        band = model.cdf_band(0.95)["g"]
        bands.append(band)
        covered += np.abs(model.transform(grid, ["g"] * len(grid)) - truth).max() <= band
    assert covered >= 190, covered
    # The effective size is below the click count when weights are unequal (here about 0.79 of it).
    assert 0.70 < model.n_effective_["g"] / model.n_positives_["g"] < 0.9
    unit = WeightedCDFTransformer().fit(s, ["g"] * len(s))
    assert unit.n_effective_["g"] == pytest.approx(len(s))
    assert unit.cdf_band(0.95)["g"] == pytest.approx(np.sqrt(np.log(40) / (2 * len(s))))
