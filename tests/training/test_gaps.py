"""Held-out audit of lambda paths: wiring of the audit's numbers, gap sign and scale, figures."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.audit import compare_groups
from fair_pipeline.training import lambda_path
from fair_pipeline.training.penalized.gaps import audit_path, gap_table, group_table
from fair_pipeline.training.penalized.path import PathPoint
from fair_pipeline.training.figures import plot_group_comparison, plot_partial_auc_path
from tests.charts.svg_reading import marks, panels, parse


def _scores(seed=0, n=4000):
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b"], n)
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + y * np.where(g == "a", 1.5, 0.8)  # group a is ranked better
    return s, y, g


def _brute_auc(s, y):
    pos, neg = s[y == 1], s[y == 0]
    return np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :])


def test_gap_is_normalized_a_minus_b_with_consistent_ci():
    s, y, g = _scores()
    comparison = compare_groups(s, y, g, (0.1, 1.0))
    forward = gap_table(comparison, "a", "b").set_index("cutoff")
    backward = gap_table(comparison, "b", "a").set_index("cutoff")
    table = group_table(comparison).set_index(["group", "cutoff"])
    for cutoff in (0.1, 1.0):
        diff = table.loc[("a", cutoff), "pauc"] - table.loc[("b", cutoff), "pauc"]
        assert forward.loc[cutoff, "gap"] == pytest.approx(diff, rel=1e-10)
        assert backward.loc[cutoff, "gap"] == pytest.approx(-diff, rel=1e-10)
        se = np.hypot(table.loc[("a", cutoff), "se"], table.loc[("b", cutoff), "se"])
        assert forward.loc[cutoff, "se"] == pytest.approx(se, rel=1e-10)
        assert forward.loc[cutoff, "ci_low"] == pytest.approx(-backward.loc[cutoff, "ci_high"], rel=1e-10)
        assert forward.loc[cutoff, "ci_low"] < forward.loc[cutoff, "gap"] < forward.loc[cutoff, "ci_high"]
    assert (forward["gap"] > 0).all() and (forward["p_value"] < 1e-3).all()
    assert (forward["n_a"] + forward["n_b"] == len(y)).all()
    # At alpha = 1 the normalized partial AUC is the Mann-Whitney AUC.
    in_a = g == "a"
    assert table.loc[("a", 1.0), "pauc"] == pytest.approx(_brute_auc(s[in_a], y[in_a]), rel=1e-12)
    with pytest.raises(ValueError, match="must both be audited"):
        gap_table(comparison, "a", "zzz")


def test_small_group_is_not_estimable_not_zero():
    s, y, g = _scores(n=600)
    g = g.astype(object)
    g[np.flatnonzero(y == 1)[:3].tolist() + np.flatnonzero(y == 0)[:30].tolist()] = "tiny"
    table = group_table(compare_groups(s, y, g, (0.1, 1.0)))
    rows = table[table["group"] == "tiny"]
    assert (~rows["estimable"]).all() and rows["pauc"].isna().all() and (rows["n_pos"] == 3).all()
    assert rows["note"].str.contains("not estimable").all()


def test_audit_path_tables_and_figures():
    s, y, g = _scores(n=1500)
    X = np.column_stack([s, np.random.default_rng(0).normal(size=s.size)])
    X[:, 0] *= np.where(g == "a", 1.0, 0.5)
    path = lambda_path(X[:1000], y[:1000], g[:1000], [0.0, 1.0, 10.0])
    per_group, gaps, overall = audit_path(path, X[1000:], y[1000:], g[1000:], "a", "b", (0.2,))
    assert len(per_group) == 3 * 2 * 2 and len(gaps) == 3 * 2  # alpha = 1 is always added
    assert list(overall["lam"]) == [0.0, 1.0, 10.0] and overall["auc_drop"].iloc[0] == 0
    assert (overall["n_test"] == 500).all()
    scores = path[1].model.decision_function(X[1000:])
    assert overall["auc"].iloc[1] == pytest.approx(_brute_auc(scores, y[1000:]), rel=1e-12)
    assert (np.diff(overall["mi_proxy_train"]) < 0).all()
    root = parse(plot_partial_auc_path(per_group))
    assert [p.get("data-title") for p in panels(root)] == ["cutoff 0.2", "cutoff 1"]
    assert [len(marks(p, "points")) for p in panels(root)] == [2, 2]  # one errorbar series per group
    root = parse(plot_group_comparison(per_group[per_group["lam"] == 0.0]))
    assert len(marks(root, "points")) == 2
    assert isinstance(path[0], PathPoint)
