"""Pairwise accuracies (Narasimhan et al.): brute force over within-query pairs, cluster SEs."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.audit import AuditInputError, pairwise_accuracies
from fair_pipeline.audit.stats.pairwise import PairwiseAccumulator


def _data(rng, N=500, Q=40):
    q = rng.integers(0, Q, N)
    g = rng.choice(["a", "b", "c"], N, p=[0.5, 0.3, 0.2])
    y = rng.random(N) < 0.35
    s = np.round(rng.normal(size=N) + y * (1 + (g == "a")), 1)  # ties in scores
    z = np.round(rng.normal(size=N), 1)  # ties in the continuous attribute
    return s, y, g, q, z


def _h(a, b):
    return float(a > b) + 0.5 * float(a == b)


def _bruteforce(s, y, g, q, z):
    """Per query: correct and total pairs for every statistic, by enumerating all pairs."""
    levels = sorted(set(g))
    Q = q.max() + 1
    G = len(levels)
    out = {k: (np.zeros((Q, G, G)), np.zeros((Q, G, G))) for k in ("matrix", "parity")}
    out.update({k: (np.zeros(Q), np.zeros(Q)) for k in ("gt", "lt")})
    for i in range(len(s)):
        for j in range(len(s)):
            if i == j or q[i] != q[j]:
                continue
            a, b, k = levels.index(g[i]), levels.index(g[j]), q[i]
            if a != b:
                out["parity"][0][k, a, b] += _h(s[i], s[j])
                out["parity"][1][k, a, b] += 1
            if y[i] and not y[j]:
                out["matrix"][0][k, a, b] += _h(s[i], s[j])
                out["matrix"][1][k, a, b] += 1
                if z[i] > z[j]:
                    out["gt"][0][k] += _h(s[i], s[j])
                    out["gt"][1][k] += 1
                if z[i] < z[j]:
                    out["lt"][0][k] += _h(s[i], s[j])
                    out["lt"][1][k] += 1
    return levels, out


def _cluster(C, T):
    keep = T > 0
    A = C.sum() / T.sum()
    qn = keep.sum()
    return A, qn / (qn - 1) * ((C - A * T)[keep] ** 2).sum() / T.sum() ** 2


def test_all_statistics_match_bruteforce():
    rng = np.random.default_rng(1)
    s, y, g, q, z = _data(rng)
    res = pairwise_accuracies(s, y, g, q, continuous_feature=z)
    levels, bf = _bruteforce(s, y, g, q, z)
    C, T = bf["matrix"]
    for row in res.matrix.itertuples():
        a, b = levels.index(row.group_better), levels.index(row.group_worse)
        A, v = _cluster(C[:, a, b], T[:, a, b])
        assert row.accuracy == pytest.approx(A, abs=1e-12)
        assert row.se == pytest.approx(np.sqrt(v), rel=1e-9)
        assert row.n_pairs == T[:, a, b].sum()
        assert row.n_queries == (T[:, a, b] > 0).sum()
    for row in res.marginals.itertuples():
        k = levels.index(row.group)
        Cm, Tm = (C[:, k, :].sum(1), T[:, k, :].sum(1)) if row.role == "better" else (C[:, :, k].sum(1), T[:, :, k].sum(1))
        A, v = _cluster(Cm, Tm)
        assert row.accuracy == pytest.approx(A, abs=1e-12) and row.se == pytest.approx(np.sqrt(v), rel=1e-9)
    A, v = _cluster(C.sum((1, 2)), T.sum((1, 2)))
    assert res.overall["accuracy"].iloc[0] == pytest.approx(A, abs=1e-12)
    assert res.overall["se"].iloc[0] == pytest.approx(np.sqrt(v), rel=1e-9)
    Cs, Ts = bf["parity"]
    for row in res.parity.itertuples():
        i, j = levels.index(row.group_i), levels.index(row.group_j)
        A, v = _cluster(Cs[:, i, j], Ts[:, i, j])
        assert row.p_i_above_j == pytest.approx(A, abs=1e-12) and row.se == pytest.approx(np.sqrt(v), rel=1e-9)
    cont = res.continuous.set_index("metric")
    for key, name in (("gt", "A_>"), ("lt", "A_<")):
        A, v = _cluster(*bf[key])
        assert cont.loc[name, "accuracy"] == pytest.approx(A, abs=1e-12)
        assert cont.loc[name, "se"] == pytest.approx(np.sqrt(v), rel=1e-9)
        assert cont.loc[name, "n_pairs"] == bf[key][1].sum()
    Ag, Tg = bf["gt"][0].sum() / bf["gt"][1].sum(), bf["gt"][1].sum()
    Al, Tl = bf["lt"][0].sum() / bf["lt"][1].sum(), bf["lt"][1].sum()
    e = (bf["gt"][0] - Ag * bf["gt"][1]) / Tg - (bf["lt"][0] - Al * bf["lt"][1]) / Tl
    nq = ((bf["gt"][1] > 0) | (bf["lt"][1] > 0)).sum()
    assert cont.loc["A_> - A_<", "accuracy"] == pytest.approx(Ag - Al, abs=1e-12)
    assert cont.loc["A_> - A_<", "se"] == pytest.approx(np.sqrt(nq / (nq - 1) * (e**2).sum()), rel=1e-9)


def test_parity_is_antisymmetric_and_pairs_only_within_queries():
    rng = np.random.default_rng(2)
    s, y, g, q, z = _data(rng)
    res = pairwise_accuracies(s, y, g, q)
    p = res.parity.set_index(["group_i", "group_j"])["p_i_above_j"]
    assert p[("a", "b")] + p[("b", "a")] == pytest.approx(1.0)
    # one query per item: no pairs at all
    with pytest.raises(AuditInputError, match="no query has both"):
        pairwise_accuracies(s, y, g, np.arange(s.size))


def test_weighted_aggregated_rows_equal_raw_rows():
    rng = np.random.default_rng(3)
    s, y, g, q, z = _data(rng, N=800)
    levels, codes = np.unique(g, return_inverse=True)
    raw = PairwiseAccumulator(levels)
    raw.update(q, s, codes, y)
    key = np.stack([q, codes, y.astype(int), np.round(s * 10).astype(int)], axis=1)
    uniq, inv, cnt = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    agg = PairwiseAccumulator(levels)
    agg.update(uniq[:, 0], uniq[:, 3] / 10, uniq[:, 1], uniq[:, 2].astype(bool), weights=cnt)
    for a, b in zip(raw.tables(), agg.tables()):
        num_a, num_b = a.select_dtypes("number").to_numpy(), b.select_dtypes("number").to_numpy()
        assert np.allclose(num_a, num_b, rtol=1e-12, atol=1e-14, equal_nan=True)


def test_cluster_se_coverage_monte_carlo():
    """Queries are the independent units: the cluster SE gives ~95% coverage of A_{a>b}."""
    rng = np.random.default_rng(4)
    reps, Q, k = 300, 80, 12
    # truth by a huge simulation of the same design
    def draw(nq):
        q = np.repeat(np.arange(nq), k)
        g = rng.choice(["a", "b"], q.size)
        y = rng.random(q.size) < 0.3
        s = rng.normal(size=q.size) + y * np.where(g == "a", 1.2, 0.6) + rng.normal(size=nq)[q]
        return s, y, g, q
    truth = pairwise_accuracies(*draw(40000)).matrix.set_index(["group_better", "group_worse"])["accuracy"]
    hits = 0
    for _ in range(reps):
        m = pairwise_accuracies(*draw(Q)).matrix.set_index(["group_better", "group_worse"])
        row = m.loc[("a", "b")]
        hits += row["ci_low"] <= truth[("a", "b")] <= row["ci_high"]
    assert abs(hits / reps - 0.95) <= 0.035, hits / reps


def test_single_query_is_not_estimable():
    rng = np.random.default_rng(5)
    s, y, g, _, _ = _data(rng, N=100)
    res = pairwise_accuracies(s, y, g, np.zeros(100, int))
    assert not res.matrix["estimable"].any() and res.matrix["se"].isna().all()
    assert res.matrix["accuracy"].notna().all()  # point estimate exists, uncertainty does not
