"""Elicitation a person can finish: scripted answerers that follow a hidden metric the way a person does
(about the same below a 2% relative cost difference, 5% of the clear answers wrong)."""
from __future__ import annotations

import io

import numpy as np
import pytest

from fair_pipeline.selection import INTERACTIVE_DEFAULTS, ScriptedAnswerer, elicit_fair_quadratic_metric
from fair_pipeline.selection.elicitation import random_fair_metric, relative_difference, sample_sphere_profiles
from fair_pipeline.selection.elicitation.adaptive import equal_overall_partners


def agreement_on_clear_pairs(truth, estimate, r1, r2, resolution=0.02) -> float:
    """Share of pairs whose costs differ by >= ``resolution`` (relative, under the truth) ordered like the truth."""
    c1, c2 = truth(r1), truth(r2)
    clear = np.abs(relative_difference(c1, c2)) >= resolution
    return float(np.mean(np.sign(c1 - c2)[clear] == np.sign(estimate(r1) - estimate(r2))[clear]))


@pytest.mark.parametrize("n_groups, can_say_same", [(2, True), (3, True), (2, False)],
                         ids=["2 groups", "3 groups", "2 groups, yes-no answers"])
def test_a_noisy_person_finishes_in_40_answers_with_90_percent_agreement(n_groups, can_say_same):
    rng = np.random.default_rng(100 + n_groups)
    r1 = sample_sphere_profiles(rng, 3000, n_groups)
    r2 = sample_sphere_profiles(rng, 3000, n_groups)
    agreements, gap_agreements, answers, slips = [], [], [], 0
    for seed in range(4):
        truth = random_fair_metric(rng, n_groups, group_weights="random", lam_range=(0.1, 0.9))
        person = ScriptedAnswerer(truth, resolution=0.02, error_rate=0.05, seed=seed, can_say_same=can_say_same)
        estimate = elicit_fair_quadratic_metric(person, n_groups, group_weights=truth.group_weights,
                                                **INTERACTIVE_DEFAULTS)
        assert estimate.n_queries == person.n_calls <= 40
        agreements.append(agreement_on_clear_pairs(truth, estimate, r1, r2))
        # pairs with the same overall rates differ only in their gaps: the fairness term was learnt too (a harder
        # check than the random pairs; a truth with 3 slips in 16 answers reaches 0.88 there)
        fair_only = equal_overall_partners(rng, r1[:1000], truth.group_weights, 0.2)
        if np.mean(np.abs(relative_difference(truth(r1[:1000]), truth(fair_only))) >= 0.02) > 0.2:
            gap_agreements.append(agreement_on_clear_pairs(truth, estimate, r1[:1000], fair_only))
        answers.append(estimate.n_queries)
        slips += person.n_wrong
    assert min(agreements) >= 0.9, (agreements, answers)
    assert min(gap_agreements, default=1.0) >= 0.85, (gap_agreements, answers)
    assert slips > 0  # the answerers did make mistakes, and none ended a session


def test_the_default_noisy_answerer_of_the_old_questions_ended_the_session_and_now_does_not():
    """752 answers then "no positive misclassification cost" with the paper's questions; with a much sloppier
    person (20% wrong) the interactive elicitation still ends with a metric, at the answer limit at worst."""
    rng = np.random.default_rng(4)
    truth = random_fair_metric(rng, 2, group_weights="random")
    person = ScriptedAnswerer(truth, error_rate=0.2, seed=1)
    estimate = elicit_fair_quadratic_metric(person, 2, group_weights=truth.group_weights, **INTERACTIVE_DEFAULTS)
    assert estimate.n_queries <= 40 and person.n_wrong >= 1
    r1, r2 = sample_sphere_profiles(rng, 2000, 2), sample_sphere_profiles(rng, 2000, 2)
    assert agreement_on_clear_pairs(truth, estimate, r1, r2) >= 0.85


def test_questions_are_whole_percent_profiles_in_the_sphere_with_a_visible_difference():
    truth = random_fair_metric(np.random.default_rng(8), 3, group_weights="random")
    person = ScriptedAnswerer(truth, seed=2)
    estimate = elicit_fair_quadratic_metric(person, 3, group_weights=truth.group_weights, **INTERACTIVE_DEFAULTS)
    records = estimate.diagnostics["records"]
    for r1, r2, _ in records:
        for r in (r1, r2):
            assert np.allclose(r * 100, np.round(r * 100))
            assert (np.linalg.norm(r - 0.5, axis=1) <= 0.2 + 1e-9).all(), r
        assert np.abs(r1 - r2).max() >= 0.02  # at least 2 percentage points apart somewhere
    # the person sees a difference in most questions: those are the informative ones
    assert person.n_same <= 0.5 * len(records)


def test_picking_among_candidates_stops_once_their_order_is_settled():
    rng = np.random.default_rng(11)
    truth = random_fair_metric(rng, 2, group_weights="random", lam_range=(0.3, 0.7))
    candidates = sample_sphere_profiles(rng, 5, 2)
    person = ScriptedAnswerer(truth, seed=3)
    tau = truth.group_weights
    estimate = elicit_fair_quadratic_metric(person, 2, group_weights=tau, **INTERACTIVE_DEFAULTS, candidates=candidates)
    general = elicit_fair_quadratic_metric(ScriptedAnswerer(truth, seed=3), 2, group_weights=tau, **INTERACTIVE_DEFAULTS)
    assert estimate.diagnostics["stopped_because"] == "the answers settle the order of the candidates"
    assert estimate.n_queries <= general.n_queries
    true_cost, est_cost = truth(candidates), estimate(candidates)
    for i in range(5):
        for j in range(i + 1, 5):
            if abs(relative_difference(true_cost[i], true_cost[j])) >= 0.02:
                assert np.sign(true_cost[i] - true_cost[j]) == np.sign(est_cost[i] - est_cost[j])


def test_a_boolean_oracle_is_still_accepted_and_a_bad_answer_is_named():
    truth = random_fair_metric(np.random.default_rng(2), 2)
    estimate = elicit_fair_quadratic_metric(lambda r1, r2: bool(truth(r1) < truth(r2)), 2, **INTERACTIVE_DEFAULTS)
    assert estimate.n_queries <= 40
    with pytest.raises(TypeError, match="True .r1 preferred., False .r2 preferred. or None .about the same."):
        elicit_fair_quadratic_metric(lambda r1, r2: "A", 2, **INTERACTIVE_DEFAULTS)


def test_more_groups_than_a_person_can_judge_are_refused_with_the_reason(tmp_path):
    import argparse

    from fair_pipeline.commands.elicit import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match=r"--groups 50: a question would show 200 rates .* at most 4 groups"):
        run(parser.parse_args(["--db", str(tmp_path / "e.duckdb"), "--groups", "50"]), stdin=io.StringIO(""),
            stdout=io.StringIO())
