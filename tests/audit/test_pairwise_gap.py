"""cross_group_gaps: the accuracies agree with pairwise_accuracies and the query-clustered SE with Monte Carlo."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.audit.stats.pairwise import pairwise_accuracies
from fair_pipeline.audit.stats.pairwise_gap import cross_group_gaps, marginal_gaps

Q, K = 200, 10


def _draw(rng):
    g = np.where(rng.random(Q * K) < 0.4, "a", "b")
    y = rng.random(Q * K) < 0.3
    s = rng.normal(y * 1.0 + (g == "b") * 0.4 + np.repeat(rng.normal(0, 1, Q), K), 1)  # query effects
    return s, y, g, np.repeat(np.arange(Q), K)


def test_accuracies_agree_with_the_matrix():
    s, y, g, q = _draw(np.random.default_rng(0))
    row = cross_group_gaps(s, y, g, q).iloc[0]
    m = pairwise_accuracies(s, y, g, q).matrix.set_index(["group_better", "group_worse"])["accuracy"]
    assert row["A_a>b"] == pytest.approx(m[("a", "b")]) and row["A_b>a"] == pytest.approx(m[("b", "a")])
    marg = pairwise_accuracies(s, y, g, q).marginals.query("role == 'better'").set_index("group")["accuracy"]
    row = marginal_gaps(s, y, g, q).iloc[0]
    assert row["A_a>:"] == pytest.approx(marg["a"]) and row["gap"] == pytest.approx(marg["a"] - marg["b"])


def test_se_matches_the_monte_carlo_spread():
    rng = np.random.default_rng(1)
    draws = [_draw(rng) for _ in range(200)]
    for fn in (cross_group_gaps, marginal_gaps):
        res = [fn(*d).iloc[0] for d in draws]
        sd = np.std([r.gap for r in res], ddof=1)
        assert np.mean([r.se for r in res]) == pytest.approx(sd, rel=0.15)


def test_gap_tables_carry_verdicts():
    s, y, g, q = _draw(np.random.default_rng(0))
    for table in (cross_group_gaps(s, y, g, q), marginal_gaps(s, y, g, q, margins={"pairwise_accuracy": 0.5})):
        row = table.iloc[0]
        assert row["effect"] == row["gap"] and row["effect_ci_low"] == pytest.approx(row["ci_low"])
        assert row["verdict"] in ("gap larger than δ (significant)", "gap significant but within ±δ",
                                  "equivalent within ±δ (TOST, 95%)", "inconclusive")
    assert table.iloc[0]["margin"] == 0.5 and table.iloc[0]["verdict"] != "gap larger than δ (significant)"
