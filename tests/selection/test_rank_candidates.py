"""rank_candidates: costs, delta-method standard errors, not-estimable groups, bad input, and
that an elicited metric ranks candidate models like the person's own metric."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from fair_pipeline.selection.elicitation import (
    FairQuadraticMetric,
    SimulatedOracle,
    elicit_fair_quadratic_metric,
    random_regular_metrics,
    rank_candidates,
)

B12 = np.array([[1.0, 0.0], [0.0, 1.0]]) * np.sqrt(2)  # |B|_F = 2, so 1/2 sum |B|_F = 1
METRIC = FairQuadraticMetric.from_pairs([0.6, 0.8], [B12], lam=0.5)


def table(rows):
    return pd.DataFrame(rows, columns=["candidate", "group", "tpr", "tnr", "n_pos", "n_neg", "alpha"])


def test_costs_match_a_hand_computation_and_ranks_follow_costs():
    df = table([
        ("x", "a", 0.8, 0.7, 400, 600, 0.0), ("x", "b", 0.6, 0.7, 300, 700, 0.0),
        ("y", "a", 0.7, 0.7, 400, 600, 0.5), ("y", "b", 0.7, 0.7, 300, 700, 0.5),
    ])
    out = rank_candidates(df, METRIC)
    # x: overall (0.7, 0.7); error part 0.6*0.3 + 0.8*0.3 = 0.42; violation 1/2 * sqrt2 * 0.2^2 = 0.028284
    x = out.set_index("candidate").loc["x"]
    assert x.error_part == pytest.approx(0.42)
    assert x.violation_part == pytest.approx(0.5 * np.sqrt(2) * 0.04)
    assert x.cost == pytest.approx(0.5 * 0.42 + 0.5 * 0.5 * np.sqrt(2) * 0.04)
    # y: same overall rates, no disparity: better
    assert list(out.candidate) == ["y", "x"] and list(out["rank"]) == [1, 2]
    assert list(out.alpha) == [0.5, 0.0]  # per-candidate columns are carried through


def test_delta_method_standard_error_matches_monte_carlo():
    rng = np.random.default_rng(0)
    rates = np.array([[0.75, 0.66], [0.58, 0.71]])
    counts = np.array([[120, 300], [60, 150]])
    df = table([("x", g, *rates[i], *counts[i], 0.0) for i, g in enumerate(["a", "b"])])
    se = rank_candidates(df, METRIC).cost_se[0]
    draws = rng.binomial(counts[None], rates[None], size=(40000, 2, 2)) / counts[None]
    mc_sd = METRIC(draws).std()
    assert se == pytest.approx(mc_sd, rel=0.05)


def test_small_or_missing_groups_are_not_estimable():
    df = table([
        ("x", "a", 0.8, 0.7, 400, 600, 0.0), ("x", "b", 0.6, 0.7, 5, 700, 0.0),
        ("y", "a", 0.7, 0.7, 400, 600, 0.5),
        ("z", "a", 0.7, 0.7, 400, 600, 1.0), ("z", "b", 0.7, 0.7, 300, 700, 1.0),
    ])
    out = rank_candidates(df, METRIC, min_count=20).set_index("candidate")
    assert out.loc["z", "rank"] == 1 and out.loc["z", "estimable"]
    assert not out.loc["x", "estimable"] and out.loc["x", "reason"] == "group 'b' has n_pos=5 < min_count=20"
    assert np.isnan(out.loc["x", "cost"]) and np.isnan(out.loc["x", "rank"])
    assert out.loc["y", "reason"] == "no rates for group(s) ['b']"


def test_without_counts_the_standard_error_is_unknown():
    df = table([("x", "a", 0.8, 0.7, 1, 1, 0.0), ("x", "b", 0.6, 0.7, 1, 1, 0.0)]).drop(columns=["n_pos", "n_neg"])
    out = rank_candidates(df, METRIC)
    assert out.estimable[0] and np.isnan(out.cost_se[0])


def test_bad_candidate_tables_are_rejected():
    good = [("x", "a", 0.8, 0.7, 400, 600, 0.0), ("x", "b", 0.6, 0.7, 300, 700, 0.0)]
    with pytest.raises(ValueError, match=r"candidate 'x', group 'b': tnr=1.3 is outside \[0, 1\]"):
        rank_candidates(table(good[:1] + [("x", "b", 0.6, 1.3, 300, 700, 0.0)]), METRIC)
    with pytest.raises(ValueError, match=r"several rows for group\(s\) \['a'\]"):
        rank_candidates(table(good + [good[0]]), METRIC)
    with pytest.raises(ValueError, match="lacks columns \\['tnr'\\]"):
        rank_candidates(table(good).drop(columns="tnr"), METRIC)
    with pytest.raises(ValueError, match="metric has 2 groups"):
        rank_candidates(table(good + [("x", "c", 0.6, 0.7, 300, 700, 0.0)]), METRIC)


def test_elicited_metric_ranks_candidates_like_the_true_metric():
    """Paper appendix H.2 in miniature: 60 candidate models (per-group rates along a trade-off
    between accuracy and disparity), ranked by the truth and by the elicited metric."""
    rng = np.random.default_rng(1)
    metrics, _ = random_regular_metrics(rng, 10, 2)
    taus = []
    for truth in metrics:
        est = elicit_fair_quadratic_metric(SimulatedOracle(truth), 2, tolerance=1e-2)
        rates = np.clip(0.5 + rng.uniform(0.0, 0.3, size=(60, 2, 2)) * rng.choice([1, 0.5], size=(60, 2, 1)), 0, 1)
        df = pd.DataFrame([(c, g, *rates[c, g], 500, 500) for c in range(60) for g in range(2)],
                          columns=["candidate", "group", "tpr", "tnr", "n_pos", "n_neg"])
        ranked = rank_candidates(df, est).set_index("candidate").loc[range(60)]
        taus.append(kendalltau(ranked["cost"], truth(rates)).statistic)
    assert np.median(taus) > 0.97 and min(taus) > 0.9
