"""Held-out audit of lambda paths: per-group tables, Wald gaps, not-estimable groups, figures."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fair_pipeline.core.audit.truncated_auc import truncated_auc
from fair_pipeline.core.penalized_report import audit_path, group_gap, group_partial_aucs
from fair_pipeline.penalized import lambda_path
from fair_pipeline.penalized_plots import plot_group_comparison, plot_partial_auc_path


def _scores(seed=0, n=4000):
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b"], n)
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + y * np.where(g == "a", 1.5, 0.8)  # group a is ranked better
    return s, y, g


def test_group_table_and_gap_are_the_audit_numbers():
    s, y, g = _scores()
    table = group_partial_aucs(s, y, g, (0.1, 1.0))
    gap = group_gap(table, "a", "b").set_index("cutoff")
    a = truncated_auc(s[g == "a"], y[g == "a"], (0.1, 1.0)).set_index("cutoff")
    b = truncated_auc(s[g == "b"], y[g == "b"], (0.1, 1.0)).set_index("cutoff")
    for cutoff in (0.1, 1.0):
        diff = a.loc[cutoff, "auc_normalized"] - b.loc[cutoff, "auc_normalized"]
        se = np.hypot(a.loc[cutoff, "se_normalized"], b.loc[cutoff, "se_normalized"])
        assert gap.loc[cutoff, "gap"] == pytest.approx(diff, rel=1e-12)
        assert gap.loc[cutoff, "se"] == pytest.approx(se, rel=1e-12)
        assert gap.loc[cutoff, "p_value"] == pytest.approx(2 * stats.norm.sf(abs(diff / se)), rel=1e-9)
    assert (gap["p_value"] < 1e-3).all() and (gap["n_a"] + gap["n_b"] == len(y)).all()
    # At alpha = 1 the normalized partial AUC is the Mann-Whitney AUC.
    in_a = g == "a"
    pos, neg = s[in_a & (y == 1)], s[in_a & (y == 0)]
    brute = np.mean(pos[:, None] > neg[None, :])
    assert table.query("group == 'a' and cutoff == 1.0")["pauc"].iloc[0] == pytest.approx(brute, rel=1e-12)


def test_gap_coverage_by_monte_carlo():
    # Two groups with the same score model: the gap's 95% CI should cover 0 about 95% of the time.
    covered = []
    for seed in range(150):
        s, y, g = _scores(seed, n=600)
        s = np.random.default_rng(1000 + seed).normal(size=s.size) + 1.0 * y
        gap = group_gap(group_partial_aucs(s, y, g, (0.2,)), "a", "b").iloc[0]
        covered.append(gap["ci_low"] <= 0 <= gap["ci_high"])
    assert 0.89 <= np.mean(covered) <= 0.99


def test_group_too_small_is_not_estimable_not_zero():
    s, y, g = _scores(n=500)
    g = g.astype(object)
    tiny = np.flatnonzero(y == 1)[:1].tolist() + np.flatnonzero(y == 0)[:10].tolist()
    g[tiny] = "tiny"
    table = group_partial_aucs(s, y, g, (0.1, 1.0))
    rows = table[table["group"] == "tiny"]
    assert (~rows["estimable"]).all() and rows["pauc"].isna().all() and (rows["n_pos"] == 1).all()
    assert table[table["group"] != "tiny"]["estimable"].all()


def test_audit_path_tables_and_figures():
    s, y, g = _scores(n=1500)
    X = np.column_stack([s, np.random.default_rng(0).normal(size=s.size)])
    X[:, 0] *= np.where(g == "a", 1.0, 0.5)
    path = lambda_path(X[:1000], y[:1000], g[:1000], [0.0, 1.0, 10.0])
    per_group, gaps, overall = audit_path(path, X[1000:], y[1000:], g[1000:], "a", "b", (0.2, 1.0))
    assert len(per_group) == 3 * 2 * 2 and len(gaps) == 3 * 2 and list(overall["lam"]) == [0.0, 1.0, 10.0]
    assert overall["auc_drop"].iloc[0] == 0 and (overall["n_test"] == 500).all()
    assert (np.diff(overall["mi_proxy_train"]) < 0).all()
    fig = plot_partial_auc_path(per_group)
    assert len(fig.axes) == 2 and len(fig.axes[0].containers) == 2  # one errorbar series per group
    fig = plot_group_comparison(per_group[per_group["lam"] == 0.0])
    assert len(fig.axes[0].containers) == 2
