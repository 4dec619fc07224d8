"""Elicited metrics agree with random ground truths (Assumption 4), k = 2.

Ground truths follow the paper authors' experiments (see ``random_fair_metric``); 100 metrics per
setting as the issue asks, default configuration (one answer per question, a slice re-asked with
majorities only when its answers fit no quadratic).  The README figures come from
``python -m benchmarks.elicitation_evidence`` (seed 0); these tests use other fixed seeds.
"""
from __future__ import annotations

import pytest

from fair_pipeline.selection.elicitation import evaluate_elicitation

N_METRICS = 100
PAPER_TABLE1_QUERIES = {2: 332.10, 3: 867.65}  # fair QPME, k = 2, by number of groups m


@pytest.mark.slow
@pytest.mark.parametrize("m", [2, 3])
def test_exact_answers_recover_the_metric(m):
    summary = evaluate_elicitation(N_METRICS, m, tolerance=1e-2, seed=11)
    med = summary.median_errors()
    assert summary.n_failed == 0
    assert summary.agreement.mean() >= 0.98
    assert med.a <= 0.05 and med.B <= 0.05 and med.lam <= 0.05
    assert summary.n_queries.mean() <= PAPER_TABLE1_QUERIES[m]


@pytest.mark.slow
@pytest.mark.parametrize("m", [2, 3])
def test_five_percent_flipped_answers(m):
    """Item 4 with the default configuration; the noisy query count stays below table 1 as well."""
    summary = evaluate_elicitation(N_METRICS, m, flip_fraction=0.05, tolerance=1e-2, seed=12)
    assert summary.agreement.mean() >= 0.90
    assert summary.n_queries.mean() <= PAPER_TABLE1_QUERIES[m]


@pytest.mark.slow
def test_rechecking_inconsistent_slices_is_what_tolerates_flips():
    """One answer per question (the paper's protocol, max_votes=1) on the same metrics and oracles
    loses several points of agreement to 5% flips; re-asking the inconsistent slices wins them back."""
    single = evaluate_elicitation(N_METRICS, 2, flip_fraction=0.05, tolerance=1e-2, seed=13, max_votes=1)
    rechecked = evaluate_elicitation(N_METRICS, 2, flip_fraction=0.05, tolerance=1e-2, seed=13)
    assert single.agreement.mean() < 0.95  # the flips do cost something without re-asking
    assert rechecked.agreement.mean() - single.agreement.mean() > 0.03


@pytest.mark.slow
def test_three_classes_work_too():
    """k = 3 (not used by the pipeline, but part of the API): table 1 gives 796.37 queries for m = 2."""
    summary = evaluate_elicitation(10, 2, n_classes=3, tolerance=1e-2, seed=14)
    med = summary.median_errors()
    assert summary.agreement.mean() >= 0.98 and med.B <= 0.05 and med.lam <= 0.05
    assert summary.n_queries.mean() <= 796.37
