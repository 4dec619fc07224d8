"""Issue 8, item 4: elicited metrics agree with random ground truths (Assumption 4), k = 2.

Ground truths follow the paper authors' experiments (see ``random_fair_metric``).  The full
100-metric figures come from ``python -m benchmarks.elicitation_evidence``; here 40 metrics per
setting keep the file within the CPU budget while leaving the thresholds meaningful (the agreement
standard error over 40 metrics is ~0.0002 exact and ~0.01 with flips).
"""
from __future__ import annotations

import pytest

from fair_pipeline.core.elicitation import evaluate_elicitation

N_METRICS = 40
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
def test_five_percent_flipped_answers_with_votes_on_coarse_questions(m):
    summary = evaluate_elicitation(N_METRICS, m, flip_fraction=0.05, votes=3, vote_scope="coarse",
                                   tolerance=1e-2, seed=12)
    assert summary.agreement.mean() >= 0.90
    assert summary.n_queries.mean() <= PAPER_TABLE1_QUERIES[m]


@pytest.mark.slow
def test_single_answers_degrade_gracefully_under_flips():
    """One answer per question (the paper's protocol) sits near the 90% line (see the benchmark);
    guard against regressions without claiming more than it delivers."""
    noisy = evaluate_elicitation(N_METRICS, 2, flip_fraction=0.05, tolerance=1e-2, seed=13)
    exact = evaluate_elicitation(N_METRICS, 2, tolerance=1e-2, seed=13)
    assert noisy.agreement.mean() >= 0.85
    assert exact.agreement.mean() - noisy.agreement.mean() > 0.02  # the flips do cost something


@pytest.mark.slow
def test_three_classes_work_too():
    """k = 3 (not used by the pipeline, but part of the API): table 1 gives 796.37 queries for m = 2."""
    summary = evaluate_elicitation(10, 2, n_classes=3, tolerance=1e-2, seed=14)
    med = summary.median_errors()
    assert summary.agreement.mean() >= 0.98 and med.B <= 0.05 and med.lam <= 0.05
    assert summary.n_queries.mean() <= 796.37
