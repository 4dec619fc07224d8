"""Evidence on the default simulation: trained on 7 days x 25,000 production requests,
evaluated by re-ranking 25,000 held-out simulated requests and drawing clicks from the simulator's truth.

Tests named `..._true_position_bias_...` use the simulator's TRUE w_j (`bias_curve`); the
`..._estimated_position_bias_...` ones use the adjacent-pairwise estimate from the same logs."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.eo import evaluate_rerankings, fit_from_click_counts, with_alpha
from fair_pipeline.eo.reranking import (
    PRODUCTION_STREAM,
    evaluate_methods,
    group_table,
    held_out_requests,
    method_summary,
    rank_positions,
    run_method,
    simulated_click_counts,
)
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_items, simulate_requests
from fair_pipeline.position_bias import aggregate_score_bins, estimate_from_aggregates
from tests.charts.svg_reading import marks, panels, parse

TRAIN_START = dt.date(2024, 1, 1)
TRAIN_DAYS = [TRAIN_START + dt.timedelta(days=d) for d in range(7)]
HELD_OUT_DAY = dt.date(2024, 1, 8)
BIN_WIDTH = 1e-3


@pytest.fixture(scope="module")
def study():
    config = SimulationConfig()  # Nandy et al. 2.2 defaults, 25,000 requests per day
    items = simulate_items(config)
    counts = simulated_click_counts(config, items, TRAIN_DAYS, BIN_WIDTH)
    true_w = bias_curve(config)
    weighted_true_w = fit_from_click_counts(counts, true_w, score_bin_width=BIN_WIDTH)
    unweighted = fit_from_click_counts(counts, np.ones_like(true_w), score_bin_width=BIN_WIDTH)
    report = evaluate_rerankings(config, items, weighted_true_w, unweighted, day=HELD_OUT_DAY)
    summary = report.summary.set_index("method")
    return config, items, weighted_true_w, report, summary, counts


def test_training_window_size(study):
    _, _, weighted, report, _, _ = study
    assert weighted.n_reference_ == 7 * 25_000 * 50
    assert report.summary["n_requests"].eq(25_000).all()
    assert sum(weighted.n_positives_.values()) > 1_000_000


def test_weighted_transform_with_true_position_bias_equalizes_exposure_over_merit(study):
    _, _, _, report, summary, _ = study
    ratio, se = summary.loc["weighted", ["exposure_over_merit_ratio", "exposure_over_merit_ratio_se"]]
    assert abs(ratio - 1) < 0.02, ratio
    assert 0 < se < 0.01  # the 2% statement is well resolved
    rows = report.per_group[report.per_group["method"] == "weighted"]
    assert rows["estimable"].all() and (rows["n_relevant"] > 100_000).all()


def test_unweighted_transform_flips_the_gap(study):
    _, _, _, _, summary, _ = study
    raw_gap = summary.loc["raw", "relative_gap"]
    unweighted_gap = summary.loc["unweighted", "relative_gap"]
    assert raw_gap < 0 < unweighted_gap  # group 0: under-exposed by raw scores, over-exposed without weights
    assert unweighted_gap > 0.04, unweighted_gap
    assert unweighted_gap - 3 * summary.loc["unweighted", "exposure_over_merit_ratio_se"] > 0.04


def test_raw_scores_under_expose_group_0(study):
    _, _, _, report, summary, _ = study
    assert summary.loc["raw", "exposure_over_merit_ratio"] < 0.8
    raw = report.per_group[report.per_group["method"] == "raw"].set_index("group")
    # Group 0's relevant items sit much lower in the raw rankings (Theorem 1 part 1 fails).
    assert raw.loc["0", "mean_position_relevant"] > raw.loc["1", "mean_position_relevant"] + 10
    # The click-based ratio agrees with its expectation given the positions (no click-noise artefact).
    np.testing.assert_allclose(raw["exposure_over_merit"], raw["expected_exposure_over_merit"], atol=4 * raw["exposure_over_merit_se"].max())


def _total_variation(report, method):
    shares = report.positions[report.positions["method"] == method].pivot(index="position", columns="group", values="share")
    return 0.5 * (shares["0"] - shares["1"]).abs().sum()


def test_weighted_transform_equalizes_positions_of_relevant_items(study):
    """Theorem 1, part 1: positions of Y(1)=1 items have the same distribution in both groups."""
    _, _, _, report, _, _ = study
    assert _total_variation(report, "weighted") < 0.02
    assert _total_variation(report, "raw") > 0.3
    assert _total_variation(report, "unweighted") > 0.04


def test_alpha_zero_leaves_every_ranking_unchanged(study):
    config, items, weighted, _, summary, _ = study
    requests = held_out_requests(config, items, HELD_OUT_DAY, config.requests_per_day)
    zero = with_alpha(weighted, 0.0).transform(requests.scores.ravel(), requests.groups.ravel())
    np.testing.assert_array_equal(rank_positions(zero.reshape(requests.scores.shape)), rank_positions(requests.scores))
    cols = ["exposure_over_merit_ratio", "ks_distance", "ctr"]
    np.testing.assert_array_equal(summary.loc["weighted_alpha=0", cols].to_numpy(float), summary.loc["raw", cols].to_numpy(float))
    assert not np.array_equal(
        rank_positions(with_alpha(weighted, 0.25).transform(requests.scores.ravel(), requests.groups.ravel()).reshape(requests.scores.shape)),
        rank_positions(requests.scores),
    )


def test_ks_distance_decreases_as_alpha_grows_with_ctr_alongside(study):
    _, _, _, _, summary, _ = study
    grid = summary[summary.index.str.startswith("weighted_alpha=")].sort_values("alpha")
    assert list(grid["alpha"]) == [0.0, 0.25, 0.5, 0.75, 1.0]
    ks = grid["ks_distance"].to_numpy()
    assert (np.diff(ks) < -0.05).all(), ks
    assert ks[0] > 0.4 and ks[-1] < 0.02
    assert (grid["ctr_se"] > 0).all() and grid["ctr"].between(0.1, 0.2).all()
    assert (grid["n_clicks_group0"] > 20_000).all()


def test_figures_render(study):
    _, _, _, report, _, _ = study
    figure_1, figure_3 = (parse(report.figures[name]) for name in ("figure_1", "figure_3"))
    assert len(panels(figure_1)) == 6 and len(panels(figure_3)) == 2
    # every method's panels draw both groups' densities and position shares
    assert all({m.get("data-series") for m in marks(p, "line")} == {"group 0", "group 1"} for p in panels(figure_1))
    assert len(marks(figure_3, "points")) == 1 and len(marks(figure_3, "line")) == 1
    assert report.label.startswith("SIMULATION")


def test_standard_errors_match_monte_carlo_spread():
    """The request-clustered SEs of exposure/merit and of the group ratio match their spread over days."""
    config = SimulationConfig(n_items=5000, requests_per_day=200, seed=11)
    items = simulate_items(config)
    ratios, ratio_ses, eoms, eom_ses = [], [], [], []
    for offset in range(300):
        requests = held_out_requests(config, items, dt.date(2024, 1, 1) + dt.timedelta(days=offset), 200)
        outcome = run_method(requests, "raw", None, None)
        s = method_summary(requests, outcome, ("0", "1"))
        g = group_table(requests, outcome).set_index("group")
        ratios.append(s["exposure_over_merit_ratio"])
        ratio_ses.append(s["exposure_over_merit_ratio_se"])
        eoms.append(g.loc["0", "exposure_over_merit"])
        eom_ses.append(g.loc["0", "exposure_over_merit_se"])
    assert np.std(ratios, ddof=1) == pytest.approx(np.mean(ratio_ses), rel=0.15)
    assert np.std(eoms, ddof=1) == pytest.approx(np.mean(eom_ses), rel=0.15)


def test_a_large_day_evaluates_a_bounded_number_of_requests(monkeypatch):
    """The driver simulates and re-ranks at most MAX_DEFAULT_REQUESTS held-out requests unless asked for more,
    whatever a simulated day's traffic: its memory and time do not grow with the day."""
    from fair_pipeline.eo import evaluation

    monkeypatch.setattr(evaluation, "MAX_DEFAULT_REQUESTS", 150)
    small, large = (SimulationConfig(n_items=2_000, requests_per_day=n, seed=5) for n in (100, 400))
    assert (evaluation.default_requests(small), evaluation.default_requests(large)) == (100, 150)
    items = simulate_items(large)
    counts = simulated_click_counts(large, items, TRAIN_DAYS[:1], BIN_WIDTH)
    fit = fit_from_click_counts(counts, bias_curve(large), score_bin_width=BIN_WIDTH)
    report = evaluate_rerankings(large, items, fit, fit, day=HELD_OUT_DAY, alphas=(), make_figures=False)
    assert report.summary["n_requests"].eq(150).all() and report.per_group["n_requests"].eq(150).all()
    asked = evaluate_rerankings(large, items, fit, fit, day=HELD_OUT_DAY, n_requests=400, alphas=(), make_figures=False)
    assert asked.summary["n_requests"].eq(400).all()


def test_one_group_is_an_error():
    config = SimulationConfig(n_items=500, requests_per_day=20, p_group=1.0)
    requests = held_out_requests(config, simulate_items(config), HELD_OUT_DAY, 20)
    with pytest.raises(ValueError, match=r"compares groups; held-out requests have \['1'\]"):
        evaluate_methods(requests, {"raw": (None, None)})


def test_three_groups_each_compared_with_the_largest_and_equalized_by_the_weighted_transform():
    """Three groups with different shares, relevance and score offsets: raw scores favour the high-offset
    groups; the weighted transform (true w) brings every group's exposure/merit to the reference's."""
    config = SimulationConfig(n_items=20_000, requests_per_day=8000, groups=3, group_shares="0.5;0.3;0.2",
                              group_relevance="0.45;0.35;0.4", group_effects="2;0;1",
                              group_labels='north;south "coast";east-west')
    items = simulate_items(config)
    counts = simulated_click_counts(config, items, TRAIN_DAYS[:3], BIN_WIDTH)
    true_w = bias_curve(config)
    weighted = fit_from_click_counts(counts, true_w, score_bin_width=BIN_WIDTH)
    unweighted = fit_from_click_counts(counts, np.ones_like(true_w), score_bin_width=BIN_WIDTH)
    report = evaluate_rerankings(config, items, weighted, unweighted, day=HELD_OUT_DAY, alphas=(0.5,), make_figures=False)
    summary = report.summary
    assert set(report.per_group["group"]) == {"north", 'south "coast"', "east-west"}
    for method in ("raw", "weighted"):
        rows = summary[summary["method"] == method].set_index("groups")
        assert list(rows.index) == ["east-west vs north", 'south "coast" vs north']
        if method == "raw":  # lower offsets, less exposure per unit of merit
            assert (rows["exposure_over_merit_ratio"] < 0.8).all(), rows
        else:
            deviation = (rows["exposure_over_merit_ratio"] - 1).abs() / rows["exposure_over_merit_ratio_se"]
            assert (deviation < 4).all() and ((rows["exposure_over_merit_ratio"] - 1).abs() < 0.05).all(), rows


@pytest.fixture(scope="module")
def estimated_weights(study):
    """Position bias estimated from the same 7 production days by the adjacent-pairwise importance-sampling
    estimator (Nandy et al. 2.2, appendix A.3), as the paper does; no ground truth involved."""
    config, items, _, _, _, _ = study
    bins = []
    for day in TRAIN_DAYS:
        sim = simulate_requests(config, items, day, "production", config.requests_per_day, stream=PRODUCTION_STREAM)
        bins.append(aggregate_score_bins(pd.DataFrame({"position": sim["position"], "score": sim["score"], "click": sim["click"]})))
    bins = pd.concat(bins, ignore_index=True)
    return {
        "T=30": estimate_from_aggregates("adjacent_pairwise", bins=bins, truncate=30),
        "untruncated": estimate_from_aggregates("adjacent_pairwise", bins=bins, truncate=None),
    }


@pytest.mark.parametrize("variant", ["T=30", "untruncated"])
def test_weighted_transform_with_estimated_position_bias_equalizes_exposure_over_merit(study, estimated_weights, variant):
    config, items, _, _, _, counts = study
    estimate = estimated_weights[variant]
    assert estimate["weight"].notna().all()
    weighted = fit_from_click_counts(counts, estimate[["position", "weight"]], score_bin_width=BIN_WIDTH)
    requests = held_out_requests(config, items, HELD_OUT_DAY, config.requests_per_day)
    outcome = run_method(requests, "weighted_estimated", weighted.transform, 1.0)
    summary = method_summary(requests, outcome, ("0", "1"))
    assert abs(summary["exposure_over_merit_ratio"] - 1) < 0.02, summary
    assert summary["ks_distance"] < 0.03


def test_methods_one_at_a_time_in_chunks_equal_whole_outcomes(study, monkeypatch):
    """Memory: evaluate_methods keeps one method's outcome at a time, scorers get the groups as a Categorical
    and requests are ranked in chunks. Tables and figure data are exactly those of each method's whole outcome
    with object group labels (the way the outcomes were computed before)."""
    from fair_pipeline.eo import reranking

    config, items, weighted, _, _, _ = study
    requests = held_out_requests(config, items, HELD_OUT_DAY, 3_000)
    methods = {"raw": (None, None), "weighted": (with_alpha(weighted, 1.0).transform, 1.0),
               "half": (with_alpha(weighted, 0.5).transform, 0.5)}
    monkeypatch.setattr(reranking, "RANK_CHUNK", 37)
    per_group, summary, positions, figures = evaluate_methods(requests, methods, figure_methods=("raw", "half"))
    monkeypatch.setattr(reranking, "RANK_CHUNK", 1 << 30)
    whole = {}
    for name, (scorer, alpha) in methods.items():
        n, k = requests.scores.shape
        fair = requests.scores if scorer is None else np.asarray(
            scorer(requests.scores.ravel(), requests.groups.ravel().astype(object)), dtype=float).reshape(n, k)
        positions_whole = rank_positions(fair)
        clicks = (requests.relevance == 1) & (requests.uniforms < requests.position_bias[positions_whole - 1])
        whole[name] = reranking.MethodOutcome(name, alpha, fair, positions_whole, clicks)
        chunked = run_method(requests, name, scorer, alpha, pd.Categorical(requests.groups.ravel()))
        np.testing.assert_array_equal(chunked.fair_scores, fair)
        np.testing.assert_array_equal(chunked.positions, positions_whole)
        np.testing.assert_array_equal(chunked.clicks, clicks)
    pd.testing.assert_frame_equal(per_group, pd.concat([group_table(requests, o) for o in whole.values()],
                                                       ignore_index=True), check_exact=True)
    pd.testing.assert_frame_equal(summary, pd.DataFrame([method_summary(requests, o, ("0", "1"))
                                                         for o in whole.values()]), check_exact=True)
    assert len(positions) == 3 * 2 * requests.scores.shape[1]
    assert sorted(figures) == ["half", "raw"]
    for name, data in figures.items():
        o = whole[name]
        for group in ("0", "1"):
            mine = requests.groups == group
            np.testing.assert_array_equal(data.clicked[group], o.fair_scores[o.clicks & mine])
            relevant = mine & (requests.relevance == 1)
            share = np.bincount(o.positions[relevant], minlength=requests.scores.shape[1] + 1)[1:] / relevant.sum()
            np.testing.assert_array_equal(data.position_share[group], share)


def _whole_group_table(requests, outcome, min_relevant=30):
    """The per-group table computed from the whole (n, K) outcome, as the code did before it was streamed."""
    w, rows = requests.position_bias, []
    for group in np.unique(requests.groups).tolist():
        mine = requests.groups == group
        relevant = mine & (requests.relevance == 1)
        a, b, m = ((outcome.clicks & mine).sum(axis=1).astype(float), relevant.sum(axis=1).astype(float),
                   mine.sum(axis=1).astype(float))
        estimable = b.sum() >= min_relevant
        ratio = lambda x, y: (x.sum() / y.sum(), np.sqrt(len(x) / (len(x) - 1) * ((x - x.sum() / y.sum() * y) ** 2).sum()) / y.sum())  # noqa: E731
        eom, eom_se = ratio(a, b) if estimable else (np.nan, np.nan)
        rows.append({"method": outcome.name, "alpha": outcome.alpha, "group": group, "n_requests": len(a),
                     "n_impressions": int(m.sum()), "n_relevant": int(b.sum()), "n_clicks": int(a.sum()),
                     "merit": ratio(b, m)[0], "merit_se": ratio(b, m)[1], "exposure": ratio(a, m)[0],
                     "exposure_se": ratio(a, m)[1], "exposure_over_merit": eom, "exposure_over_merit_se": eom_se,
                     "expected_exposure_over_merit": float(w[outcome.positions[relevant] - 1].mean()),
                     "mean_position_relevant": float(outcome.positions[relevant].mean()), "estimable": bool(estimable)})
    return pd.DataFrame(rows)


def test_streamed_chunks_equal_the_whole_requests_evaluated_at_once(study, monkeypatch):
    """Memory: the held-out requests are drawn, re-ranked and reduced chunk by chunk (flat in
    requests_per_day). The chunks are exactly the whole day's requests, and every table equals the one computed
    from whole (n, K) outcomes: counts and positions exactly, floats to 1e-12 (a mean over the relevant
    items' w is taken from their counts by position instead of summing the items one by one; the SEs from sums of
    per-request products instead of per-request residuals)."""
    from fair_pipeline.eo import reranking

    config, items, weighted, _, _, _ = study
    n = 2_000
    whole_requests = held_out_requests(config, items, HELD_OUT_DAY, n)
    chunks = list(reranking.held_out_chunks(config, items, HELD_OUT_DAY, n, chunk=333))
    assert len(chunks) == 7
    for field in ("scores", "groups", "relevance", "uniforms"):
        np.testing.assert_array_equal(np.concatenate([getattr(c, field) for c in chunks]), getattr(whole_requests, field))
    sim = simulate_requests(config, items, HELD_OUT_DAY, "production", n, stream=reranking.HELD_OUT_STREAM)
    np.testing.assert_array_equal(whole_requests.scores.ravel(), sim["score"])
    methods = {"raw": (None, None), "weighted": (with_alpha(weighted, 1.0).transform, 1.0),
               "half": (with_alpha(weighted, 0.5).transform, 0.5)}
    per_group, summary, positions, figures = evaluate_methods(iter(chunks), methods, figure_methods=("half",))
    expected = []
    for name, (scorer, alpha) in methods.items():
        outcome = run_method(whole_requests, name, scorer, alpha)
        expected.append(_whole_group_table(whole_requests, outcome))
        clicked = outcome.fair_scores[outcome.clicks & (whole_requests.groups == "1")]
        if name == "half":
            np.testing.assert_array_equal(figures["half"].clicked["1"], clicked)
        row = summary.set_index("method").loc[name]
        assert row["n_clicks_group1"] == len(clicked)
        assert row["ctr"] == pytest.approx(outcome.clicks.mean(), rel=1e-12)
        # the request-clustered SEs, brute force from the whole outcome's per-request counts
        (a0, b0), (a1, b1) = (((outcome.clicks & mine).sum(axis=1), (mine & (whole_requests.relevance == 1)).sum(axis=1))
                              for mine in (whole_requests.groups == g for g in ("0", "1")))
        z = a0 / a0.sum() - b0 / b0.sum() - a1 / a1.sum() + b1 / b1.sum()
        assert row["exposure_over_merit_ratio_se"] == pytest.approx(
            row["exposure_over_merit_ratio"] * np.sqrt(n / (n - 1) * (z**2).sum()), rel=1e-12)
        per_request = outcome.clicks.sum(axis=1)
        k = outcome.clicks.shape[1]
        resid = per_request - per_request.sum() / (n * k) * k
        assert row["ctr_se"] == pytest.approx(np.sqrt(n / (n - 1) * (resid**2).sum()) / (n * k), rel=1e-12)
    expected = pd.concat(expected, ignore_index=True)
    pd.testing.assert_frame_equal(per_group, expected, check_exact=False, rtol=1e-12)
    # counts and point estimates exactly; the SEs are exact integer sums of squares divided once, the whole
    # outcome's are float residuals summed: equal to the last bits
    exact = [c for c in expected.columns if c != "expected_exposure_over_merit" and not c.endswith("_se")]
    pd.testing.assert_frame_equal(per_group[exact], expected[exact], check_exact=True)
    # request order and chunking change nothing, to the bit: every SE is an integer quadratic form rounded once
    whole_per_group, whole_summary, _, _ = evaluate_methods(whole_requests, methods, figure_methods=())
    pd.testing.assert_frame_equal(per_group, whole_per_group, check_exact=True)
    pd.testing.assert_frame_equal(summary, whole_summary, check_exact=True)
    assert (positions.groupby(["method", "group"])["n_relevant"].sum().to_numpy()
            == expected.set_index(["method", "group"]).sort_index()["n_relevant"].to_numpy()).all()
