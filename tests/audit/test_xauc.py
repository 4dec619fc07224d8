"""xAUC (Kallus & Zhou): brute force, DeLong variances and covariances, identities, xROC."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.audit import compare_groups, xauc
from tests.audit import bruteforce as bf


def _data(rng, N=400, ties=True, groups=("a", "b", "c")):
    g = rng.choice(groups, N)
    y = rng.random(N) < 0.4
    s = rng.normal(size=N) + y * (1 + (g == groups[0])) - 0.5 * (g == groups[1])
    return (np.round(s, 1) if ties else s), y, g


@pytest.mark.parametrize("ties", [False, True])
def test_xauc_pairs_and_deltas_match_bruteforce(ties):
    rng = np.random.default_rng(1 + ties)
    s, y, g = _data(rng, ties=ties)
    res = xauc(s, y, g, min_count=2)
    for _, row in res.pairs.iterrows():
        P, Nn = s[(g == row["group_a"]) & y], s[(g == row["group_b"]) & ~y]
        assert row["xauc"] == pytest.approx(bf.auc(P, Nn), abs=1e-12)
        assert row["variance"] == pytest.approx(bf.delong_var(P, Nn), rel=1e-10)
        assert row["n_pos_a"] == P.size and row["n_neg_b"] == Nn.size
    for _, row in res.deltas.iterrows():
        a, b = row["group_a"], row["group_b"]
        ab = bf.auc(s[(g == a) & y], s[(g == b) & ~y])
        ba = bf.auc(s[(g == b) & y], s[(g == a) & ~y])
        var = bf.delong_var(s[(g == a) & y], s[(g == b) & ~y]) + bf.delong_var(s[(g == b) & y], s[(g == a) & ~y])
        assert row["delta"] == pytest.approx(ab - ba, abs=1e-12)
        assert row["se"] == pytest.approx(np.sqrt(var), rel=1e-10)
    assert "p_holm" in res.deltas.columns  # three groups


def test_balanced_xauc_and_their_differences_match_bruteforce():
    rng = np.random.default_rng(3)
    s, y, g = _data(rng)
    res = xauc(s, y, g, min_count=2)
    bal = res.balanced.set_index("group")
    for k in "abc":
        x0 = bf.auc(s[y], s[(g == k) & ~y])
        x1 = bf.auc(s[(g == k) & y], s[~y])
        assert bal.loc[k, "xauc0"] == pytest.approx(x0, abs=1e-12)
        assert bal.loc[k, "xauc1"] == pytest.approx(x1, abs=1e-12)
        assert bal.loc[k, "se0"] ** 2 == pytest.approx(bf.delong_var(s[y], s[(g == k) & ~y]), rel=1e-10)
        assert bal.loc[k, "se1"] ** 2 == pytest.approx(bf.delong_var(s[(g == k) & y], s[~y]), rel=1e-10)
    for _, row in res.balanced_deltas.iterrows():
        a, b = row["group_a"], row["group_b"]
        if row["kind"] == "xauc0":  # same positives (all), negatives of a vs of b
            va, vb = bf.delong_var(s[y], s[(g == a) & ~y]), bf.delong_var(s[y], s[(g == b) & ~y])
            cov = bf.delong_cov_shared_pos(s[y], s[(g == a) & ~y], s[(g == b) & ~y])
        else:  # same negatives (all): swap roles by negating scores
            va, vb = bf.delong_var(s[(g == a) & y], s[~y]), bf.delong_var(s[(g == b) & y], s[~y])
            cov = bf.delong_cov_shared_pos(-s[~y], -s[(g == a) & y], -s[(g == b) & y])
        assert row["se"] == pytest.approx(np.sqrt(va + vb - 2 * cov), rel=1e-9)


def test_proposition_1_decompositions_hold_in_sample():
    """AUC = sum_b' P(b'|Y=0) sum_a' P(a'|Y=1) xAUC(a', b') = sum_a P(a|Y=1) xAUC_1(a) = ..."""
    rng = np.random.default_rng(4)
    s, y, g = _data(rng, N=2000)
    res = xauc(s, y, g, min_count=2)
    auc = bf.auc(s[y], s[~y])
    w1 = {k: ((g == k) & y).sum() / y.sum() for k in "abc"}
    w0 = {k: ((g == k) & ~y).sum() / (~y).sum() for k in "abc"}
    within = compare_groups(s, y, g, [1.0], min_count=2).groups.set_index("group")["auc"]
    cross = {(r.group_a, r.group_b): r.xauc for r in res.pairs.itertuples()}
    total = sum(w0[b] * w1[a] * (within[a] if a == b else cross[(a, b)]) for a in "abc" for b in "abc")
    assert total == pytest.approx(auc, abs=1e-12)
    bal = res.balanced.set_index("group")
    assert sum(w1[k] * bal.loc[k, "xauc1"] for k in "abc") == pytest.approx(auc, abs=1e-12)
    assert sum(w0[k] * bal.loc[k, "xauc0"] for k in "abc") == pytest.approx(auc, abs=1e-12)


def _curve_bruteforce(pos, neg, t):
    """Piecewise-linear ROC through (FPR, TPR) at every threshold; highest TPR on vertical steps."""
    thr = np.unique(np.r_[pos, neg])[::-1]
    fpr = np.r_[0.0, [(neg >= v).mean() for v in thr]]
    tpr = np.r_[0.0, [(pos >= v).mean() for v in thr]]
    out = []
    for x in t:
        at = fpr == x
        if at.any():
            out.append(tpr[at].max())
        else:
            j = np.searchsorted(fpr, x)
            out.append(tpr[j - 1] + (tpr[j] - tpr[j - 1]) * (x - fpr[j - 1]) / (fpr[j] - fpr[j - 1]))
    return np.array(out)


def test_xroc_curves_match_bruteforce():
    rng = np.random.default_rng(5)
    s, y, g = _data(rng, N=300)
    curves = xauc(s, y, g, min_count=2).curves
    for (kind, a, b), c in curves.groupby(["kind", "group_a", "group_b"]):
        pos, neg = s[(g == a) & y], s[(g == b) & ~y]
        assert np.allclose(c["tpr"], _curve_bruteforce(pos, neg, c["fpr"].to_numpy()), atol=1e-12)
        assert (kind == "roc") == (a == b)


def test_shared_sample_covariance_gives_correct_coverage():
    """xAUC_0(a) - xAUC_0(b) with equal truth: CIs using the shared-positives covariance cover
    ~95%; dropping the covariance term (independent-samples formula) would not."""
    rng = np.random.default_rng(6)
    reps, hits, hits_indep = 400, 0, 0
    for _ in range(reps):
        N = 600
        g = rng.choice(["a", "b"], N)
        y = rng.random(N) < 0.5
        s = rng.normal(size=N) + 1.5 * y * np.where(g == "a", 1.0, 0.2)  # positives differ by group
        d = xauc(s, y, g, min_count=2)
        row = d.balanced_deltas[d.balanced_deltas["kind"] == "xauc0"].iloc[0]
        hits += row["ci_low"] <= 0 <= row["ci_high"]
        bal = d.balanced.set_index("group")
        se_ind = np.hypot(bal.loc["a", "se0"], bal.loc["b", "se0"])
        hits_indep += abs(row["delta"]) <= 1.959964 * se_ind
    assert abs(hits / reps - 0.95) <= 0.03, hits / reps
    assert hits_indep / reps > 0.985  # too wide without the covariance


def test_group_cdf_transform_keeps_group_aucs_but_moves_xauc():
    """Per-group monotone maps (like the EO CDF transform) leave within-group AUCs unchanged
    but change cross-group rankings, hence xAUC (to be shown in the audit assets)."""
    rng = np.random.default_rng(7)
    s, y, g = _data(rng, N=3000, ties=False, groups=("a", "b"))
    t = s.copy()
    for k in "ab":  # empirical CDF of the group's positives, as in Lemma 1 of Nandy et al.
        pos = np.sort(s[(g == k) & y])
        t[g == k] = np.searchsorted(pos, s[g == k], side="right") / pos.size
    before = compare_groups(s, y, g, [1.0]).groups["auc"].to_numpy()
    after = compare_groups(t, y, g, [1.0]).groups["auc"].to_numpy()
    xb, xa = xauc(s, y, g), xauc(t, y, g)
    assert np.allclose(before, after, atol=0.002)  # only ties created by the step CDF move it
    assert abs(xb.deltas["delta"].iloc[0]) > 0.2
    assert abs(xa.deltas["delta"].iloc[0]) < abs(xb.deltas["delta"].iloc[0]) - 0.1


def test_delta_tables_carry_verdicts_with_their_own_margins():
    from fair_pipeline.audit.stats.equivalence import classify_gaps

    rng = np.random.default_rng(9)
    s, y, g = _data(rng, N=3000)
    res = xauc(s, y, g, margins={"xauc": 0.05, "balanced_xauc": 0.01})
    for table, delta in ((res.deltas, 0.05), (res.balanced_deltas, 0.01)):
        six = ["effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost", "verdict"]
        assert [c for c in table.columns if c in six] == six
        assert (table["margin"] == delta).all()
        np.testing.assert_allclose(table["effect"], table["delta"], rtol=0, atol=0)
        verdict, _ = classify_gaps(table["delta"], table["se"], delta, p_adjusted=table["p_holm"])
        assert table["verdict"].tolist() == verdict.tolist()
    # a vs b: a's positives score higher and b's lower, a large imbalance
    ab = res.deltas[(res.deltas["group_a"] == "a") & (res.deltas["group_b"] == "b")].iloc[0]
    assert ab["verdict"] == "gap larger than δ (significant)"
