"""cross_group_gaps: the accuracies agree with pairwise_accuracies and the query-clustered SE with Monte Carlo."""
from __future__ import annotations

import numpy as np
import pandas as pd
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


def test_accumulated_gaps_equal_the_per_query_linearization_in_chunks_and_with_three_groups():
    from fair_pipeline.audit.stats.inference import holm
    from fair_pipeline.audit.stats.pairwise import PairwiseAccumulator, add_query_counts

    rng = np.random.default_rng(3)
    s, y, g, q = _draw(rng)
    g = np.where(rng.random(g.size) < 0.3, "c", g)
    direct = cross_group_gaps(s, y, g, q).set_index(["group_a", "group_b"])
    mine = pairwise_accuracies(s, y, g, q).gaps.set_index(["group_a", "group_b"])
    assert len(mine) == 3 and "p_holm" in mine.columns
    for key, row in direct.iterrows():
        for column in ("A_a>b", "A_b>a", "gap", "se", "ci_low", "p_value", "n_queries"):
            assert mine.at[key, column] == pytest.approx(row[column], rel=1e-10), column
    np.testing.assert_allclose(mine["p_holm"], holm(mine["p_value"].to_numpy()))
    assert list(mine.columns[-6:]) == ["effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost", "verdict"]
    # the same from aggregated rows fed in two chunks of whole queries
    frame = pd.DataFrame({"q": q, "g": g, "s": s, "y": y.astype(int)})
    agg = frame.groupby(["q", "g", "s"])["y"].agg(n_pos="sum", n="count").reset_index()
    acc = PairwiseAccumulator(np.array(["a", "b", "c"], dtype=object))
    for part in (agg[agg["q"] < 90], agg[agg["q"] >= 90]):
        add_query_counts(acc, part["q"], part["g"], part["s"], part["n_pos"], part["n"] - part["n_pos"])
    chunked = acc.gaps().set_index(["group_a", "group_b"])
    np.testing.assert_allclose(chunked[["gap", "se", "p_value"]].to_numpy(float),
                               mine[["gap", "se", "p_value"]].to_numpy(float), rtol=1e-10)
    assert chunked["verdict"].tolist() == mine["verdict"].tolist()
