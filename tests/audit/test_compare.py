"""compare_groups: per-group tables, independent-sample differences, Holm, not-estimable groups."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import audit_aggregates, compare_groups, holm, truncated_auc
from tests.audit import bruteforce as bf

CUTS = [0.05, 0.1, 0.2, 0.5, 1.0]


def _data(rng, N=3000, ties=False, groups=("a", "b", "c")):
    g = rng.choice(groups, N)
    y = rng.random(N) < 0.35
    s = rng.normal(size=N) + y * (1.0 + (g == groups[0]))
    if ties:
        s = np.round(s, 1)
    return s, y, g


@pytest.mark.parametrize("ties", [False, True])
def test_each_group_equals_truncated_auc_on_its_rows(ties):
    rng = np.random.default_rng(1)
    s, y, g = _data(rng, ties=ties)
    res = compare_groups(s, y, g, CUTS)
    for name in "abc":
        mine = res.groups[res.groups["group"] == name].reset_index(drop=True)
        ref = truncated_auc(s[g == name], y[g == name], CUTS)
        for col in ("auc", "variance", "mcclish", "roc_at_cutoff", "n_pos", "n_neg"):
            assert np.allclose(mine[col], ref[col], rtol=1e-12, atol=1e-14), col
    overall = truncated_auc(s, y, CUTS)
    assert np.allclose(res.overall["auc"], overall["auc"], atol=1e-12)
    assert np.allclose(res.overall["variance"], overall["variance"], rtol=1e-12)


def test_small_bruteforce_groups_and_wide_scores_use_the_fallback_sort():
    rng = np.random.default_rng(2)
    s, y, g = _data(rng, N=300, ties=True)
    s = s * 1e300  # packed keys do not fit with group bits: argsort fallback
    res = compare_groups(s, y, g, CUTS, min_count=2)
    for name in "abc":
        sub = res.groups[res.groups["group"] == name]
        for a, I, v in zip(sub["cutoff"], sub["auc"], sub["variance"]):
            I_bf, v_bf = bf.truncated(s[g == name], y[g == name], a)
            assert I == pytest.approx(I_bf, abs=1e-12)
            assert v == pytest.approx(v_bf, rel=1e-9)


def test_pairwise_difference_variance_adds_and_p_values():
    rng = np.random.default_rng(3)
    s, y, g = _data(rng)
    res = compare_groups(s, y, g, CUTS)
    G = res.groups.set_index(["group", "cutoff"])
    for _, row in res.pairs.iterrows():
        a, b, c = row["group_a"], row["group_b"], row["cutoff"]
        assert row["diff"] == pytest.approx(G.loc[(a, c), "auc"] - G.loc[(b, c), "auc"], abs=1e-15)
        se = np.sqrt(G.loc[(a, c), "variance"] + G.loc[(b, c), "variance"])
        assert row["se"] == pytest.approx(se, rel=1e-12)
        assert row["ci_high"] - row["diff"] == pytest.approx(1.959963984540054 * se, rel=1e-9)
        assert row["z"] == pytest.approx(row["diff"] / se)
    assert {"p_holm"} <= set(res.pairs.columns)  # three groups: Holm column
    for c, block in res.pairs.groupby("cutoff"):
        assert np.allclose(block["p_holm"], holm(block["p_value"].to_numpy()))
    two = compare_groups(s[g != "c"], y[g != "c"], g[g != "c"], CUTS)
    assert "p_holm" not in two.pairs.columns and len(two.pairs) == len(CUTS)


def test_holm_hand_example():
    p = np.array([0.01, 0.04, 0.03, 0.005, np.nan])
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = .02, .03, .06, .04 -> running max
    assert np.allclose(holm(p)[:4], [0.03, 0.06, 0.06, 0.02])
    assert np.isnan(holm(p)[4])


def test_group_with_too_few_positives_is_not_estimable_never_fair():
    rng = np.random.default_rng(4)
    s, y, g = _data(rng)
    small = (g == "c") & y
    keep = ~small | (np.cumsum(small) <= 3)  # group c keeps 3 positives
    res = compare_groups(s[keep], y[keep], g[keep], CUTS, min_count=10)
    c_rows = res.groups[res.groups["group"] == "c"]
    assert not c_rows["estimable"].any()
    assert c_rows["auc"].isna().all() and c_rows["se"].isna().all()
    assert c_rows["note"].str.contains("3 positives").all()
    assert (c_rows["n_pos"] == 3).all()
    pairs_c = res.pairs[(res.pairs["group_a"] == "c") | (res.pairs["group_b"] == "c")]
    assert not pairs_c["estimable"].any() and pairs_c["diff"].isna().all()
    assert pairs_c["p_value"].isna().all()  # never a p-value of a non-estimate
    assert res.pairs[(res.pairs["group_a"] == "a") & (res.pairs["group_b"] == "b")]["estimable"].all()


def test_cutoff_below_one_negative_is_not_estimable():
    rng = np.random.default_rng(5)
    s, y, g = _data(rng, N=400)
    res = compare_groups(s, y, g, [0.001, 0.5], min_count=5)
    tiny = res.groups[res.groups["cutoff"] == 0.001]
    assert not tiny["estimable"].any() and tiny["note"].str.contains("fewer than one negative").all()


def test_aggregates_with_groups_match_arrays_and_empty_group_is_flagged():
    rng = np.random.default_rng(6)
    s, y, g = _data(rng, ties=True)
    df = pd.DataFrame({"group": g, "score": s, "y": y.astype(int)})
    agg = df.groupby(["group", "score"])["y"].agg(n_pos="sum", n="count").reset_index()
    agg["n_neg"] = agg.pop("n") - agg["n_pos"]
    empty = pd.DataFrame({"group": ["d"], "score": [0.0], "n_pos": [0], "n_neg": [0]})
    rep = audit_aggregates(pd.concat([agg, empty]), CUTS)
    ref = compare_groups(s, y, g, CUTS)
    mine = rep.groups[rep.groups["group"] != "d"].reset_index(drop=True)
    assert np.nanmax(np.abs(mine.select_dtypes("number").to_numpy()
                            - ref.groups.select_dtypes("number").to_numpy())) <= 1e-12
    d = rep.groups[rep.groups["group"] == "d"]
    assert (~d["estimable"]).all() and d["note"].str.contains("0 positives").all()


def test_pairs_carry_effect_size_margin_tost_and_verdict():
    from scipy import stats

    from fair_pipeline.audit.stats.equivalence import classify_gaps

    rng = np.random.default_rng(7)
    s, y, g = _data(rng, N=6000)
    res = compare_groups(s, y, g, CUTS, margins={"partial_auc_normalized": 0.03})
    p = res.pairs
    six = ["effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost", "verdict"]
    assert [c for c in p.columns if c in six] == six
    np.testing.assert_allclose(p["effect"], p["diff"] / p["cutoff"], rtol=1e-12)
    se = p["se"] / p["cutoff"]
    np.testing.assert_allclose(p["effect_ci_high"] - p["effect"], stats.norm.ppf(0.975) * se, rtol=1e-9)
    assert (p["margin"] == 0.03).all()
    verdict, p_tost = classify_gaps(p["effect"], se, 0.03, p_adjusted=p["p_holm"])  # three groups: Holm decides
    assert p["verdict"].tolist() == verdict.tolist()
    np.testing.assert_allclose(p["p_tost"], p_tost, rtol=1e-12)
    # group a's positives score 1 higher: its gaps to b and c are large, b vs c is not
    ab = p[(p["group_a"] == "a") & (p["group_b"] == "b") & (p["cutoff"] == 1.0)].iloc[0]
    assert ab["verdict"] == "gap larger than δ (significant)" and ab["effect"] > 0.03
    bc = p[(p["group_a"] == "b") & (p["group_b"] == "c")]
    assert not (bc["verdict"] == "gap larger than δ (significant)").any()
    # default margins when none are given
    assert (compare_groups(s, y, g, CUTS).pairs["margin"] == 0.02).all()


def test_not_estimable_pairs_get_the_not_estimable_verdict():
    rng = np.random.default_rng(4)
    s, y, g = _data(rng)
    small = (g == "c") & y
    keep = ~small | (np.cumsum(small) <= 3)
    res = compare_groups(s[keep], y[keep], g[keep], CUTS, min_count=10)
    pairs_c = res.pairs[(res.pairs["group_a"] == "c") | (res.pairs["group_b"] == "c")]
    assert (pairs_c["verdict"] == "not estimable").all() and pairs_c["p_tost"].isna().all()
