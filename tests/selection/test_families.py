"""The new model-selection families (selection/families.py) and decision candidates in the paired ranking.

Numbers checked: expected rates of decision probabilities against counting by hand; a decision candidate's
influences against finite differences of its cost in each row's weight (and against the score path when the
decisions are a fixed threshold's); the derived predictor's budget and rate equalities on its fit rows; the reject
option's fairness bound on its fit rows; the family column; failed fits kept with their reason, never dropped.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.selection import families as fam
from fair_pipeline.selection.candidates import Ranker
from fair_pipeline.selection.elicitation import FairQuadraticMetric, rank_candidates
from fair_pipeline.selection.elicitation.operating_point import group_rates
from fair_pipeline.selection.elicitation.paired import candidate_influence

METRIC = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], lam=0.5)
LABELS = ["0", "1"]
BASE = Ranker("r-lam0", 0.0, ("f0", "f1"), np.array([1.5, -0.5]), -0.3, dt.date(2026, 1, 1), dt.date(2026, 1, 2), None)


def _items(seed: int, n: int = 400) -> pd.DataFrame:
    """Item counts: relevance rises with f0; group "1" has lower f0 (a score that favours group "0")."""
    rng = np.random.default_rng(seed)
    group = rng.choice(LABELS, n)
    f0 = rng.normal(size=n) - 0.7 * (group == "1")
    f1 = rng.normal(size=n)
    shown = rng.integers(1, 8, n)
    p = 1.0 / (1.0 + np.exp(-(1.2 * f0 + 0.8 * (group == "1") + 0.3 * rng.normal(size=n))))
    n_pos = rng.binomial(shown, p)
    return pd.DataFrame({"group": group, "item_id": [f"i{seed}_{k}" for k in range(n)], "n_pos": n_pos,
                         "n_neg": shown - n_pos, "f0": f0, "f1": f1})


def test_expected_group_rates_count_by_hand():
    frame = pd.DataFrame({"group": ["a", "a", "b", "b"], "n_pos": [2, 1, 3, 0], "n_neg": [1, 3, 1, 4],
                          "decision": [1.0, 0.25, 0.5, 0.0]})
    out = fam.expected_group_rates(frame).set_index("group")
    assert out.loc["a", "tpr"] == pytest.approx((2 * 1.0 + 1 * 0.25) / 3)
    assert out.loc["a", "tnr"] == pytest.approx((1 * 0.0 + 3 * 0.75) / 4)
    assert out.loc["b", "tpr"] == pytest.approx(0.5)
    assert out.loc["b", "tnr"] == pytest.approx((1 * 0.5 + 4 * 1.0) / 5)
    assert out.loc["a", "selected_share"] == pytest.approx((3 * 1.0 + 4 * 0.25) / 7)
    # 0/1 decisions are the rates of the same threshold rule
    score = np.array([3.0, 1.0, 2.0, 0.0])
    hard = fam.expected_group_rates(frame.assign(decision=(score >= 2.0).astype(float)))
    assert np.allclose(hard[["tpr", "tnr"]], group_rates(frame.assign(score=score), 2.0)[["tpr", "tnr"]])


def test_decision_influence_is_the_derivative_in_each_row_weight():
    items = _items(0, 60).rename(columns={})
    rng = np.random.default_rng(1)
    decision = rng.uniform(size=len(items))
    rows = items[["group", "n_pos", "n_neg"]]
    cost, infl, threshold = candidate_influence(METRIC, rows, None, LABELS, decision=decision)
    assert np.isnan(threshold)
    eps = 1e-6
    for i in rng.choice(len(items), 8, replace=False):
        w = np.ones(len(items))
        w[i] += eps
        moved = rows.assign(n_pos=rows["n_pos"] * w, n_neg=rows["n_neg"] * w)
        bumped, _, _ = candidate_influence(METRIC, moved, None, LABELS, decision=decision)
        assert (bumped - cost) / eps == pytest.approx(infl[i], abs=1e-5)
    # decisions equal to a fixed threshold's give the score path's cost and influences
    score = rng.normal(size=len(items))
    c_s, i_s, _ = candidate_influence(METRIC, rows, score, LABELS, threshold=0.2)
    c_d, i_d, _ = candidate_influence(METRIC, rows, None, LABELS, decision=(score >= 0.2).astype(float))
    assert c_d == pytest.approx(c_s) and np.allclose(i_d, i_s)


def test_derived_predictor_keeps_the_budget_and_equalizes_rates_on_its_fit_rows():
    fit = _items(2)
    members = {c.setting: c for c in fam.fit_postprocessors(BASE, fit, 0.3, ["threshold_postprocessor"])}
    assert set(members) == {"constraint=equal_opportunity", "constraint=equalized_odds"}
    for setting, cand in members.items():
        assert cand.family == "threshold_postprocessor" and cand.decides and not cand.reason
        rates = fam.expected_group_rates(fit.assign(decision=cand.decisions(fit))).set_index("group")
        share = (rates["selected_share"] * (rates["n_pos"] + rates["n_neg"])).sum() / (rates["n_pos"] + rates["n_neg"]).sum()
        assert share == pytest.approx(0.3, abs=1e-9)
        assert rates.loc["0", "tpr"] == pytest.approx(rates.loc["1", "tpr"], abs=1e-9)
        if setting == "constraint=equalized_odds":
            assert rates.loc["0", "tnr"] == pytest.approx(rates.loc["1", "tnr"], abs=1e-9)
    # the unconstrained base score at the same budget has a real TPR gap: the constraint did something
    raw = fit.assign(decision=(BASE.score(fit) >= np.quantile(BASE.score(fit), 0.7)).astype(float))
    gap = fam.expected_group_rates(raw).set_index("group")["tpr"]
    assert abs(gap["0"] - gap["1"]) > 0.1


def test_reject_option_meets_its_bound_on_the_fit_rows():
    fit = _items(3)
    members = fam.fit_postprocessors(BASE, fit, 0.4, ["reject_option"])
    assert [c.setting for c in members] == ["bound=0.1", "bound=0.05", "bound=0.02"]
    for cand, bound in zip(members, fam.REJECT_OPTION_BOUNDS):
        assert cand.model.feasible_
        rates = fam.expected_group_rates(fit.assign(decision=cand.decisions(fit))).set_index("group")
        assert abs(rates.loc["0", "tpr"] - rates.loc["1", "tpr"]) <= bound + 1e-12
        assert cand.model.threshold_ == pytest.approx(float(fam.probability(np.quantile(
            np.repeat(BASE.score(fit), fit["n_pos"] + fit["n_neg"]), 0.6, method="higher"))), abs=1e-12)


def test_pairwise_members_and_a_failed_fit_keeps_its_reason():
    rng = np.random.default_rng(4)
    n = 2000
    X = rng.normal(size=(n, 2))
    groups = rng.choice(LABELS, n).astype(object)
    clicked = (X[:, 0] + 0.5 * (groups == "0") + rng.normal(size=n) > 1.0).astype(int)
    pairs = fam.ClickPairs(X, clicked, groups, np.arange(n) // 20, np.ones(n), "2026-01-01..2026-01-02")
    members = fam.fit_pairwise(BASE, pairs)
    assert [c.name for c in members] == ["pairwise_fair/slack=none", "pairwise_fair/slack=0.1",
                                         "pairwise_fair/slack=0.05", "pairwise_fair/slack=0.02"]
    assert all(c.model is not None and not c.decides for c in members)
    one_class = _items(5).assign(n_pos=lambda f: np.where(f["group"] == "1", 0, f["n_pos"]))
    failed = fam.fit_postprocessors(BASE, one_class, 0.4, ["threshold_postprocessor"])
    assert all(c.model is None and "group '1' has 0 positives" in c.reason for c in failed)

    held_out = _items(6)
    rates, scores, decisions = fam.family_rates(members + failed, held_out, 0.4)
    assert set(scores) == {c.name for c in members} and decisions == {}
    bad = rates[rates["family"] == "threshold_postprocessor"]
    assert len(bad) == 2 * len(LABELS) and bad["tpr"].isna().all() and (bad["candidate_reason"] != "").all()


def test_all_families_rank_together_with_paired_differences():
    fit, held_out = _items(7), _items(8)
    ranker_rates = pd.DataFrame([  # two ranker candidates at the same budget as the families
        {"candidate": name, "ranker": BASE.candidate_id, "lam": 0.0, "alpha": alpha, "trained_through": "2026-01-02",
         "candidate_reason": "", **row}
        for name, alpha, score in (("r/alpha=0", 0.0, BASE.score(held_out)), ("r/alpha=1", 1.0, held_out["f1"].to_numpy()))
        for row in group_rates(held_out.assign(score=score), float(np.sort(np.repeat(score, held_out["n_pos"] + held_out["n_neg"]))[::-1][
            int(np.ceil(0.4 * (held_out["n_pos"] + held_out["n_neg"]).sum())) - 1])).assign(
            threshold=lambda f, s=score: float(np.sort(np.repeat(s, held_out["n_pos"] + held_out["n_neg"]))[::-1][
                int(np.ceil(0.4 * (held_out["n_pos"] + held_out["n_neg"]).sum())) - 1])).to_dict("records")])
    scores = {"r/alpha=0": BASE.score(held_out), "r/alpha=1": held_out["f1"].to_numpy()}
    members = fam.fit_postprocessors(BASE, fit, 0.4, fam.DECIDING_FAMILIES)
    rates, all_scores, decisions = fam.add_families(ranker_rates, scores, members, held_out, 0.4)
    ranking = rank_candidates(rates.drop(columns=["selected_share", "candidate_reason"]), METRIC, groups=LABELS,
                              held_out=held_out, scores=all_scores, decisions=decisions, selection_rate=0.4)
    family = ranking.set_index("candidate")["family"]
    assert family["r/alpha=0"] == "mi_penalty" and family["r/alpha=1"] == "eo_transform"
    assert set(family) == {"mi_penalty", "eo_transform", "threshold_postprocessor", "reject_option"}
    assert ranking["estimable"].all() and ranking["diff_se"].iloc[1:].gt(0).all()
    # a decision candidate's cost is Definition 4 of its expected rates, counted by hand
    name = "threshold_postprocessor/r-lam0/constraint=equalized_odds"
    d = decisions[name]
    r = np.array([[(d * held_out["n_pos"])[held_out["group"] == g].sum() / held_out["n_pos"][held_out["group"] == g].sum(),
                   ((1 - d) * held_out["n_neg"])[held_out["group"] == g].sum() / held_out["n_neg"][held_out["group"] == g].sum()]
                  for g in LABELS])
    assert ranking.set_index("candidate").at[name, "cost"] == pytest.approx(METRIC(r), abs=1e-12)
    assert fam.winning_family(ranking) == ranking.iloc[0]["family"]
