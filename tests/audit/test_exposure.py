"""exposure_parity: point estimates by brute force, influence totals by finite differences, errors, small groups."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import AuditInputError, exposure_parity
from fair_pipeline.audit.stats.equivalence import NOT_ESTIMABLE

LABELS = np.array(['Nord "Küste"', "south+east", "東京", "<b>west</b>"], dtype=object)
W = 1.0 / np.log2(1.0 + np.arange(1, 7))


def _log(seed=0, n=3000, groups=3):
    rng = np.random.default_rng(seed)
    group = LABELS[rng.integers(0, groups, n)]
    position = rng.integers(1, 7, n)
    rel = np.where(group == LABELS[0], 0.5, 0.3)
    click = (rng.random(n) < W[position - 1] * rel).astype(int)
    return pd.DataFrame({"group": group, "position": position, "click": click,
                         "item": rng.integers(0, 80, n), "request": rng.integers(0, 120, n)})


def _log_ratio(d, group, weights, mult=None):
    """log(Σ w / Σ click / w) over a group's impressions, each impression weighted by `mult`."""
    m = np.ones(len(d)) if mult is None else mult
    sel = (d["group"] == group).to_numpy()
    w = weights[d["position"].to_numpy() - 1]
    return np.log((m * w)[sel].sum()) - np.log((m * d["click"].to_numpy() / w)[sel].sum())


def test_point_estimates_match_brute_force():
    d = _log()
    res = exposure_parity(d["position"], d["click"], d["group"], W)
    for row in res.per_group.itertuples():
        sub = d[d["group"] == row.group]
        w = W[sub["position"] - 1]
        assert row.n == len(sub) and row.clicks == sub["click"].sum()
        assert row.exposure == pytest.approx(np.mean(w), rel=1e-12)
        assert row.merit == pytest.approx(np.mean(sub["click"] / w), rel=1e-12)
        assert row.exposure_over_merit == pytest.approx(np.mean(w) / np.mean(sub["click"] / w), rel=1e-12)
    ref = res.reference
    assert ref == d["group"].value_counts().idxmax()  # default reference: the largest group
    for row in res.pairs.itertuples():
        assert row.reference == ref
        expected = _log_ratio(d, row.group, W) - _log_ratio(d, ref, W)
        assert row.log_ratio == pytest.approx(expected, rel=1e-10)
        assert row.ratio == pytest.approx(np.exp(expected), rel=1e-10)


def test_ratio_does_not_depend_on_the_scale_of_the_examination_curve():
    d = _log(1)
    a = exposure_parity(d["position"], d["click"], d["group"], W, clusters=d["item"])
    b = exposure_parity(d["position"], d["click"], d["group"], 3.7 * W, clusters=d["item"])
    np.testing.assert_allclose(a.pairs["ratio"], b.pairs["ratio"], rtol=1e-12)
    np.testing.assert_allclose(a.pairs["se_log"], b.pairs["se_log"], rtol=1e-10)


def _merit_share(d, group, keys, g):
    """Cluster g's share of the group's Σ click / w (its CR2 leverage)."""
    sel = (d["group"] == group).to_numpy()
    m = d["click"].to_numpy() / W[d["position"].to_numpy() - 1]
    return m[sel & (keys == g)].sum() / m[sel].sum()


def _displaced(d, group, keys, g):
    """The exposure cluster g took from `group`: its excess Σ (w - mean w over the log) times the group's share of
    impressions, over the group's Σ w."""
    w = W[d["position"].to_numpy() - 1]
    sel = (d["group"] == group).to_numpy()
    return (w[keys == g] - w.mean()).sum() * sel.mean() / w[sel].sum()


def _fd_cluster_variance(d, a_group, r_group, cluster, eps=1e-6):
    """CR2 cluster-robust variance from finite-difference influence totals: up-weight one cluster at a time, each
    group's total divided by sqrt(1 - the cluster's share of that group's merit sum), less the exposure the cluster
    took from the group."""
    keys = d[cluster].to_numpy()
    totals = []
    for g in np.unique(keys):
        mult = np.where(keys == g, 1.0 + eps, 1.0)
        t = [(_log_ratio(d, x, W, mult) - _log_ratio(d, x, W)) / eps / np.sqrt(1 - _merit_share(d, x, keys, g))
             - _displaced(d, x, keys, g) for x in (a_group, r_group)]
        totals.append(t[0] - t[1])
    return np.sum(np.array(totals) ** 2)


@pytest.mark.parametrize("cluster", ["item", "request"])
def test_cluster_variance_matches_finite_difference_influence(cluster):
    d = _log(2, n=800)
    res = exposure_parity(d["position"], d["click"], d["group"], W, clusters={cluster: d[cluster]})
    for row in res.pairs.itertuples():
        assert row.se_log**2 == pytest.approx(_fd_cluster_variance(d, row.group, row.reference, cluster), rel=1e-4)
    assert res.per_group["n_clusters"].tolist() == [d.loc[d["group"] == g, cluster].nunique()
                                                    for g in res.per_group["group"]]


def test_two_way_is_item_plus_request_minus_intersection():
    d = _log(3, n=800)
    d["both"] = d["item"].astype(str) + "|" + d["request"].astype(str)
    row = exposure_parity(d["position"], d["click"], d["group"], W,
                          clusters={"item": d["item"], "request": d["request"]}).pairs.iloc[0]
    v = {c: _fd_cluster_variance(d, row["group"], row["reference"], c) for c in ("item", "request", "both")}
    expected = v["item"] + v["request"] - v["both"]
    assert expected > 0
    assert row["se_log"] ** 2 == pytest.approx(expected, rel=1e-4)


def test_fourth_sums_match_brute_force_in_both_forms():
    """The effective-clusters sums: from totals (numpy path) and from an inner join's differences (SQL path)."""
    from fair_pipeline.audit.stats.exposure import fourth_from_differences, fourth_sums

    rng = np.random.default_rng(7)
    t = rng.standard_t(2, size=(40, 3)) * (rng.random((40, 3)) < 0.6)  # heavy tails; clusters missing groups
    brute = np.array([[np.sum((t[:, a] - t[:, b]) ** 4) if a != b else np.sum(t[:, a] ** 4) for b in range(3)]
                      for a in range(3)])
    np.testing.assert_allclose(fourth_sums(t), brute, rtol=1e-10)
    d4 = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            both = (t[:, a] != 0) & (t[:, b] != 0)
            x, y = t[both, a], t[both, b]
            d4[a, b] = np.sum((x - y) ** 4 - x**4 - y**4)
    np.testing.assert_allclose(fourth_from_differences(d4), brute, rtol=1e-10)


def test_t_critical_value_at_the_effective_number_of_clusters():
    """One dominant item: few effective clusters, a t interval wider than the normal one by t_df / z."""
    from scipy import stats

    d = _log(11, n=3000)
    d.loc[d.index[::3], "item"] = 0  # a third of the impressions on one item
    res = exposure_parity(d["position"], d["click"], d["group"], W, clusters={"item": d["item"]})
    row = res.pairs.iloc[0]
    assert 1 <= row["df"] < 20
    half = np.log(row["ci_high"]) - row["log_ratio"]
    assert half == pytest.approx(stats.t.ppf(0.975, row["df"]) * row["se_log"], rel=1e-9)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(row["log_ratio"] / row["se_log"]), row["df"]), rel=1e-9)
    many = exposure_parity(d["position"], d["click"], d["group"], W, clusters={"request": d["request"]}).pairs
    assert many["df"].iloc[0] > row["df"]


def test_unclustered_equals_one_cluster_per_impression():
    d = _log(4)
    a = exposure_parity(d["position"], d["click"], d["group"], W)
    b = exposure_parity(d["position"], d["click"], d["group"], W, clusters=np.arange(len(d)))
    np.testing.assert_allclose(a.pairs["se_log"], b.pairs["se_log"], rtol=1e-10)
    np.testing.assert_allclose(a.per_group["se_log"], b.per_group["se_log"], rtol=1e-10)
    assert "independent" in a.variance_estimand


def test_examination_covariance_adds_the_delta_method_term():
    d = _log(5)
    cov = 0.01 * np.minimum.outer(np.arange(6), np.arange(6)).astype(float)
    base = exposure_parity(d["position"], d["click"], d["group"], W)
    res = exposure_parity(d["position"], d["click"], d["group"], W, examination_covariance=cov)
    for k, row in enumerate(res.pairs.itertuples()):
        grad = []
        for j in range(6):  # finite-difference gradient of the pair's log ratio w.r.t. log w_j
            bumped = W.copy()
            bumped[j] *= np.exp(1e-6)
            grad.append((_log_ratio(d, row.group, bumped) - _log_ratio(d, row.reference, bumped)
                         - row.log_ratio) / 1e-6)
        grad = np.array(grad)
        assert abs(grad.sum()) < 1e-4  # a common factor on every weight changes nothing
        extra = grad @ cov @ grad
        assert row.se_log**2 == pytest.approx(base.pairs["se_log"].iloc[k] ** 2 + extra, rel=1e-4)
    assert "covariance" in res.variance_estimand


def test_position_bias_table_uses_a_conservative_bound():
    d = _log(6)
    table = pd.DataFrame({"position": np.arange(1, 7), "weight": W, "se": W * 0.05 * np.arange(6)})
    bound = exposure_parity(d["position"], d["click"], d["group"], table)
    log_sd = 0.05 * np.arange(6)
    for corr in (np.eye(6), np.ones((6, 6)), 0.3 + 0.7 * np.eye(6)):
        exact = exposure_parity(d["position"], d["click"], d["group"], W,
                                examination_covariance=corr * np.outer(log_sd, log_sd))
        assert (bound.pairs["se_log"] >= exact.pairs["se_log"] - 1e-12).all()
    assert "worst case" in bound.variance_estimand


def test_all_pairs_are_holm_adjusted_as_one_family():
    d = _log(7, groups=4)
    res = exposure_parity(d["position"], d["click"], d["group"], W, pairs="all", reference=LABELS[1])
    assert len(res.pairs) == 6
    p = np.sort(res.pairs["p_value"].to_numpy())
    expected = np.minimum(np.maximum.accumulate(p * (6 - np.arange(6))), 1)
    np.testing.assert_allclose(np.sort(res.pairs["p_holm"].to_numpy()), np.sort(expected))
    for row in res.pairs.itertuples():
        low, high = np.exp(row.log_ratio - 1.959964 * row.se_log), np.exp(row.log_ratio + 1.959964 * row.se_log)
        assert (row.ci_low, row.ci_high) == pytest.approx((low, high), rel=1e-6)


def test_a_group_without_enough_clicks_is_not_estimable_and_stays():
    d = _log(8)
    tiny = pd.DataFrame({"group": "tiny", "position": [1, 2, 3], "click": [1, 0, 0], "item": 1, "request": 1})
    d = pd.concat([d, tiny], ignore_index=True)
    res = exposure_parity(d["position"], d["click"], d["group"], W, clusters=d["item"])
    row = res.per_group.set_index("group").loc["tiny"]
    assert not row["estimable"] and "1 clicks" in row["note"] and np.isnan(row["exposure_over_merit"])
    pair = res.pairs.set_index("group").loc["tiny"]
    assert pair["verdict"] == NOT_ESTIMABLE and np.isnan(pair["ratio"]) and "tiny" in pair["note"]
    assert res.pairs["verdict"].ne(NOT_ESTIMABLE).sum() == 2


def test_verdict_uses_the_log_margin():
    rng = np.random.default_rng(9)
    n = 200_000
    group = np.where(rng.random(n) < 0.5, "a", "b")
    position = np.where(group == "a", rng.integers(1, 3, n), rng.integers(4, 7, n))  # b sits low
    click = (rng.random(n) < W[position - 1] * 0.3).astype(int)
    res = exposure_parity(position, click, group, W, reference="a")
    row = res.pairs.iloc[0]
    assert row["ratio"] < 0.8 and row["verdict"].startswith("gap larger")
    position = rng.integers(1, 7, n)
    click = (rng.random(n) < W[position - 1] * 0.3).astype(int)
    same = exposure_parity(position, click, group, W, reference="a").pairs.iloc[0]
    assert same["verdict"].startswith("equivalent"), same.to_dict()


@pytest.mark.parametrize("kwargs, message", [
    ({"positions": [1, 2, 9]}, "outside the examination curve"),
    ({"positions": [1.5, 2, 3]}, "whole numbers"),
    ({"clicks": [0, 2, 1]}, "only 0 and 1"),
    ({"groups": ["a", None, "b"]}, "missing values"),
    ({"examination": [1.0, -0.5, 0.3]}, "positive and finite"),
    ({"examination": [1.0, np.nan, 0.3]}, "not estimable (NaN) at positions [2]"),
    ({"reference": "zzz"}, "reference group 'zzz'"),
    ({"clusters": [1, 2]}, "has 2 values for 3 impressions"),
    ({"margin": 0.0}, "margin"),
])
def test_bad_input_is_named(kwargs, message):
    args = {"positions": [1, 2, 3], "clicks": [1, 0, 1], "groups": ["a", "b", "a"], "examination": [1.0, 0.6, 0.4]}
    args.update(kwargs)
    extra = {k: args.pop(k) for k in ("reference", "clusters", "margin") if k in args}
    with pytest.raises(AuditInputError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        exposure_parity(args["positions"], args["clicks"], args["groups"], args["examination"],
                        min_clicks=1, **extra)


def test_off_policy_exposure_reads_the_new_positions_and_merit_the_logged_ones():
    d = _log(10, n=800)
    rng = np.random.default_rng(10)
    d["ranked"] = rng.integers(1, 7, len(d))
    res = exposure_parity(d["position"], d["click"], d["group"], W, ranked_positions=d["ranked"],
                          clusters={"item": d["item"]})
    logged = W[d["position"].to_numpy() - 1]
    ranked = W[d["ranked"].to_numpy() - 1]
    keys = d["item"].to_numpy()

    def log_ratio(group, mult):
        sel = (d["group"] == group).to_numpy()
        return np.log((mult * ranked)[sel].sum()) - np.log((mult * d["click"].to_numpy() / logged)[sel].sum())

    for row in res.per_group.itertuples():
        sel = (d["group"] == row.group).to_numpy()
        assert row.exposure == pytest.approx(ranked[sel].mean(), rel=1e-12)
        assert row.merit == pytest.approx((d["click"].to_numpy() / logged)[sel].mean(), rel=1e-12)
    row = res.pairs.iloc[0]
    ones = np.ones(len(d))
    base = log_ratio(row["group"], ones) - log_ratio(row["reference"], ones)
    assert row["log_ratio"] == pytest.approx(base, rel=1e-10)
    def displaced(group, g):  # the exposure item g took under the audited ranking, the group's share of it
        sel = (d["group"] == group).to_numpy()
        return (ranked[keys == g] - ranked.mean()).sum() * sel.mean() / ranked[sel].sum()

    totals = []
    for g in np.unique(keys):  # CR2: each group's total over sqrt(1 - the item's share of its logged merit)
        mult = np.where(keys == g, 1 + 1e-6, 1.0)
        totals.append(sum(sign * ((log_ratio(x, mult) - log_ratio(x, ones)) / 1e-6
                                  / np.sqrt(1 - _merit_share(d, x, keys, g)) - displaced(x, g))
                          for sign, x in ((1, row["group"]), (-1, row["reference"]))))
    assert row["se_log"] ** 2 == pytest.approx((np.array(totals) ** 2).sum(), rel=1e-4)


def test_examination_term_df_is_bounded_by_the_clicks_behind_the_curve():
    """An estimated curve whose uncertainty dominates must not lend the t ratio more df than its own data (the clicks
    it was estimated from, less its J - 1 free weights) plus the audit's effective clusters: Welch-Satterthwaite."""
    from fair_pipeline.audit.stats.small_sample import welch_df

    d = _log(11, n=1500)
    clusters = {"item": d["item"]}
    fixed = exposure_parity(d["position"], d["click"], d["group"], W, clusters=clusters)
    clicks = np.array([400, 300, 250, 200, 150, 100])
    curve = pd.DataFrame({"position": np.arange(1, 7), "weight": W, "se": 0.8 * W, "clicks": clicks})
    res = exposure_parity(d["position"], d["click"], d["group"], curve, clusters=clusters)
    exam_df = clicks.sum() - 5
    for row, base in zip(res.pairs.itertuples(), fixed.pairs.itertuples()):
        v_cl, v_all = base.se_log**2, row.se_log**2
        assert v_all > 3 * v_cl  # the curve's term dominates
        assert row.df == pytest.approx(float(welch_df([v_cl, v_all - v_cl], [base.df, exam_df])), rel=1e-9)
        assert base.df < row.df <= base.df + exam_df
    unknown = exposure_parity(d["position"], d["click"], d["group"], curve.drop(columns="clicks"), clusters=clusters)
    assert (unknown.pairs["df"] <= 2 * fixed.pairs["df"] + 1e-9).all()  # unknown support: no more than the audit's
    given = exposure_parity(d["position"], d["click"], d["group"], curve, clusters=clusters, examination_df=30)
    assert (given.pairs["df"] <= fixed.pairs["df"] + 30).all()
    attrs = curve.drop(columns="clicks")
    attrs.attrs["clicks"] = int(clicks.sum())  # the position-bias stage's chosen curve says it this way
    np.testing.assert_allclose(exposure_parity(d["position"], d["click"], d["group"], attrs, clusters=clusters)
                               .pairs["df"], res.pairs["df"], rtol=1e-12)
