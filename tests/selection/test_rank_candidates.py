"""rank_candidates: costs, delta-method standard errors, not-estimable groups, bad input, that an elicited
metric ranks candidate models like the person's own metric, and the paired differences to the winner
(clustered by item) against a brute-force computation from the per-item held-out rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from scipy.stats import t as student_t

from fair_pipeline.audit.stats.small_sample import cluster_robust_interval
from fair_pipeline.selection.elicitation import (
    FairQuadraticMetric,
    SimulatedOracle,
    elicit_fair_quadratic_metric,
    random_regular_metrics,
    rank_candidates,
)
from fair_pipeline.selection.elicitation.operating_point import group_rates, selection_threshold
from fair_pipeline.selection.elicitation.paired import DIFF_COLUMNS, MIN_DISAGREEING

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


# ------------------------------------------------------------------- paired differences to the winner
def _held_out(rng, n_items: int = 120):
    """Per-item held-out rows over two days (each item twice: the item is the cluster), three candidates'
    scores, and the long rates table of candidate_rates (own top-40% threshold per candidate)."""
    group = rng.choice(["a", "b"], n_items)
    x = rng.normal(size=(n_items, 2))
    rho = 1 / (1 + np.exp(-(1.5 * x[:, 0] + x[:, 1])))
    shows = rng.integers(1, 12, size=(2, n_items))
    pos = rng.binomial(shows, rho)
    rows = pd.DataFrame({"item_id": np.tile(np.arange(n_items), 2), "group": np.tile(group, 2),
                         "n_pos": pos.ravel(), "n_neg": (shows - pos).ravel()})
    item_scores = {"x": x[:, 0], "y": x[:, 0] + 0.3 * x[:, 1], "z": x[:, 1] + 0.5 * (group == "b")}
    scores = {name: np.tile(s, 2) for name, s in item_scores.items()}
    long = []
    for name, s in scores.items():
        scored = rows[["group", "n_pos", "n_neg"]].assign(score=s)
        t = selection_threshold(scored, 0.4)
        long.append(group_rates(scored, t).assign(candidate=name, threshold=t))
    return rows, scores, pd.concat(long, ignore_index=True)


def _brute_force_difference(rows, scores, thresholds, a, w):
    """cost(a) - cost(w) and its delta-method SE (CR2's, or the exchangeable-items one where larger) from scratch: per item (cluster) the vector of selected
    positives, positives, unselected negatives and negatives per group for both candidates; D as a function
    of the item means; the item's influence (z_c - mean) grad / G split by what each coordinate counts (a group's
    positives or negatives), each part over sqrt(1 - the item's share of that count) (CR2), and the t interval's
    df from those adjusted totals and shares (`cluster_robust_interval`)."""
    cols = []
    for name in (a, w):
        sel = scores[name] >= thresholds[name]
        for g in ("a", "b"):
            mine = (rows["group"] == g).to_numpy()
            p, q = rows["n_pos"].to_numpy() * mine, rows["n_neg"].to_numpy() * mine
            cols += [p * sel, p, q * ~sel, q]
    z = pd.DataFrame(np.array(cols, dtype=float).T).groupby(rows["item_id"].to_numpy()).sum().to_numpy()

    def diff(mean):
        c = [METRIC(np.column_stack([b[:, 0] / b[:, 1], b[:, 2] / b[:, 3]]))
             for b in (mean[:8].reshape(2, 4), mean[8:].reshape(2, 4))]
        return c[0] - c[1]

    mean = z.mean(axis=0)
    grad = np.array([(diff(mean + e) - diff(mean - e)) / 2e-7 for e in np.eye(16) * 1e-7])
    terms = (z - mean) * grad / len(z)  # (items, 16): candidate-major, then group, then [p sel, p, q unsel, q]
    totals, shares = [], []
    for g in range(2):
        for cls in (0, 2):  # the positives' coordinates, the negatives' ones
            coords = [8 * c + 4 * g + cls + k for c in range(2) for k in range(2)]
            totals.append(terms[:, coords].sum(axis=1))
            shares.append(z[:, 4 * g + cls + 1] / z[:, 4 * g + cls + 1].sum())
    ci = cluster_robust_interval(diff(mean), np.array(totals), np.array(shares))
    # the exchangeable-items variance (paired.exchangeable_variance) from the same CR2 totals, each item's share of
    # all examples its size: Σ r² / G x Σ share², r = total / share, Satterthwaite's df for the Σ r²
    adjusted = (np.array(totals) / np.sqrt(1 - np.array(shares))).sum(axis=0)
    share = z[:, [1, 3, 5, 7]].sum(axis=1) / z[:, [1, 3, 5, 7]].sum()
    r2 = (adjusted / share) ** 2
    exchangeable = r2.mean() * (share ** 2).sum()
    if exchangeable > ci.se ** 2:
        df = min(len(z) - 1.0, 2 * len(z) * r2.mean() ** 2 / ((r2 ** 2).mean() - r2.mean() ** 2))
        return diff(mean), np.sqrt(exchangeable), df
    return diff(mean), ci.se, ci.df


def test_paired_differences_to_the_winner_match_a_brute_force_per_item_computation():
    rows, scores, long = _held_out(np.random.default_rng(8))
    out = rank_candidates(long, METRIC, held_out=rows, scores=scores, min_disagreeing=1)
    win = out.iloc[0]
    assert win["diff_vs_winner"] == 0 and np.isnan(win[DIFF_COLUMNS[1:]].astype(float)).all()
    thresholds = long.groupby("candidate")["threshold"].first()
    for _, row in out.iloc[1:].iterrows():
        d, se, df = _brute_force_difference(rows, scores, thresholds, row["candidate"], win["candidate"])
        assert row["diff_vs_winner"] == pytest.approx(d, rel=1e-10) and d > 0
        assert row["diff_vs_winner"] == pytest.approx(row["cost"] - win["cost"], rel=1e-10)
        assert row["diff_se"] == pytest.approx(se, rel=1e-5)
        assert 1 <= df <= 119 and row["diff_df"] == pytest.approx(df, rel=1e-5)  # the df the CI and p use
        assert row["diff_ci_low"] == pytest.approx(d - student_t.ppf(0.975, df) * se, rel=1e-5)
        assert row["diff_ci_high"] == pytest.approx(d + student_t.ppf(0.975, df) * se, rel=1e-5)
        assert row["diff_p"] == pytest.approx(2 * student_t.sf(d / se, df), rel=1e-4)
        decide = {c: scores[c] >= thresholds[c] for c in (row["candidate"], win["candidate"])}
        differ = decide[row["candidate"]] != decide[win["candidate"]]
        assert row["diff_disagreeing"] == rows.loc[differ, "item_id"].nunique()
    assert out.attrs["n_clusters"] == 120 and out.attrs["n_rows"] == 240
    # the default rule: a difference that fewer than MIN_DISAGREEING items decide has no interval, only its count
    ruled = rank_candidates(long, METRIC, held_out=rows, scores=scores)
    few = ruled["diff_disagreeing"] < MIN_DISAGREEING
    assert few.any() and ruled.loc[few, ["diff_se", "diff_ci_low", "diff_p"]].isna().all().all()
    assert ruled.loc[few, "diff_disagreeing"].tolist() == out.loc[few, "diff_disagreeing"].tolist()
    np.testing.assert_allclose(ruled.loc[~few, "diff_se"][1:], out.loc[~few, "diff_se"][1:])
    # the selection-rate threshold's estimation adds a (here small) term; the estimates are unchanged
    rated = rank_candidates(long.drop(columns="threshold"), METRIC, held_out=rows, scores=scores, selection_rate=0.4,
                           min_disagreeing=1)
    np.testing.assert_allclose(rated["diff_vs_winner"], out["diff_vs_winner"], rtol=1e-12)
    np.testing.assert_allclose(rated["diff_se"][1:], out["diff_se"][1:], rtol=0.25)
    # rows as independent (no cluster column) ignore that each item appears twice
    iid = rank_candidates(long, METRIC, held_out=rows, scores=scores, cluster_col=None, min_disagreeing=1)
    assert iid.attrs["n_clusters"] == 240 and not np.allclose(iid["diff_se"][1:], out["diff_se"][1:], rtol=0.01)


def test_paired_differences_without_rows_or_for_not_estimable_candidates():
    rows, scores, long = _held_out(np.random.default_rng(9))
    plain = rank_candidates(long, METRIC)
    assert plain["diff_vs_winner"].tolist() == pytest.approx((plain["cost"] - plain["cost"].iloc[0]).tolist())
    assert set(DIFF_COLUMNS) <= set(plain.columns) and plain[DIFF_COLUMNS[1:]].isna().all().all()
    few = long.copy()
    few.loc[(few["candidate"] == "z") & (few["group"] == "a"), "n_pos"] = 3  # z not estimable: needs no scores
    out = rank_candidates(few, METRIC, held_out=rows, scores={k: v for k, v in scores.items() if k != "z"})
    z = out.set_index("candidate").loc["z"]
    assert not z["estimable"] and np.isnan(z[["diff_vs_winner", "diff_se", "diff_p"]].astype(float)).all()


def test_paired_inputs_that_do_not_reproduce_the_rates_are_rejected():
    rows, scores, long = _held_out(np.random.default_rng(10))
    swapped = dict(scores, x=scores["y"], y=scores["x"])
    with pytest.raises(ValueError, match="do not match the rates"):
        rank_candidates(long, METRIC, held_out=rows, scores=swapped)
    with pytest.raises(ValueError, match=r"no held-out scores for estimable candidates \['z'\]"):
        rank_candidates(long, METRIC, held_out=rows, scores={k: v for k, v in scores.items() if k != "z"})
    with pytest.raises(ValueError, match=r"held_out lacks columns \['item_id'\]"):
        rank_candidates(long, METRIC, held_out=rows.drop(columns="item_id"), scores=scores)
