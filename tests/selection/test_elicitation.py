"""Unit tests of the elicitation core: LPME, QPME, fair QPME, query log, oracles, validation."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.selection.elicitation import (
    FairQuadraticMetric,
    InconsistentOracleError,
    InconsistentOracleWarning,
    MissingPreferenceError,
    QueryLog,
    RateProfileError,
    RecordedPreferenceOracle,
    ReplayMismatchError,
    ReplayOracle,
    SimulatedOracle,
    cut_partitions,
    elicit_fair_quadratic_metric,
    elicitation_errors,
    lpme,
    metric_from_dict,
    metric_to_dict,
    qpme,
    random_regular_metrics,
)
from fair_pipeline.selection.elicitation._qpme import solve_gradient_system
from fair_pipeline.selection.elicitation.sphere import angle_ranges_for_signs, direction_from_angles

# --- sphere parametrisation and LPME -------------------------------------------------------------

@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_angles_give_unit_vectors_in_the_orthant(k):
    rng = np.random.default_rng(k)
    for _ in range(50):
        signs = rng.choice([-1, 1], size=k)
        ranges = angle_ranges_for_signs(signs)
        theta = rng.uniform(ranges[:, 0], ranges[:, 1])
        u = direction_from_angles(theta)
        assert np.linalg.norm(u) == pytest.approx(1.0)
        assert np.all(np.sign(u) == signs)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_lpme_recovers_a_linear_metric_within_tolerance(k):
    """Lemma 1: the best point of a sphere for <g, s> is centre + radius g/|g|."""
    rng = np.random.default_rng(10 + k)
    center = np.full(k, 1.0 / k)
    for _ in range(20):
        g = rng.standard_normal(k)
        est = lpme(lambda s1, s2: g @ s1 > g @ s2, center, 0.1, tolerance=1e-4)
        # error per angle <= tolerance / 2, and k - 1 angles
        assert np.linalg.norm(est.direction - g / np.linalg.norm(g)) < 1e-3 * (k - 1)


def test_lpme_query_count_matches_the_bisection_budget():
    """k = 2: 2 orthant queries + at most 3 per halving of pi/2 down to the tolerance."""
    calls = []

    def compare(s1, s2):
        calls.append(1)
        return s1 @ [0.3, 0.7] > s2 @ [0.3, 0.7]

    lpme(compare, [0.5, 0.5], 0.1, tolerance=1e-2)
    halvings = int(np.ceil(np.log2((np.pi / 2) / 1e-2)))
    assert halvings + 2 <= len(calls) <= 3 * halvings + 2


def test_lpme_recovers_a_direction_just_across_the_orthant_edge():
    """Curvature can flip the orthant answer of a tiny coordinate; the edge retry still finds it."""
    g = np.array([1.0, -0.02])
    curvature = np.array([[0.0, 0.0], [0.0, -30.0]])  # strongly penalises moving in coordinate 2
    center = np.array([0.5, 0.5])

    def utility(s):
        x = s - center
        return g @ x + 0.5 * x @ curvature @ x

    est = lpme(lambda s1, s2: utility(s1) > utility(s2), center, 0.02, tolerance=1e-4)
    angles = np.linspace(0, 2 * np.pi, 200001)
    pts = center + 0.02 * np.c_[np.cos(angles), np.sin(angles)]
    best = (pts[np.argmax([utility(p) for p in pts])] - center) / 0.02
    assert np.linalg.norm(est.direction - best) < 1e-3


# --- QPME ---------------------------------------------------------------------------------------

def test_gradient_system_is_exact_for_exact_gradients():
    rng = np.random.default_rng(3)
    for k in (2, 3, 4):
        d = rng.standard_normal(k)
        q = rng.standard_normal((k, k))
        B = -(q @ q.T)
        offsets = rng.normal(scale=0.2, size=(2 * k + 1, k))
        grads = d + offsets @ B
        dirs = grads / np.linalg.norm(grads, axis=1, keepdims=True)
        d_hat, B_hat, _ = solve_gradient_system(offsets, dirs)
        scale = np.linalg.norm(d_hat) / np.linalg.norm(d)
        np.testing.assert_allclose(d_hat / scale, d, atol=1e-8)
        np.testing.assert_allclose(B_hat / scale, B, atol=1e-8)


@pytest.mark.parametrize("anchor,bound", [("boundary", 0.01), ("center", 0.2)])
def test_qpme_recovers_a_quadratic_metric(anchor, bound):
    """Boundary anchoring removes the O(varrho) Taylor bias of the paper's closed form."""
    rng = np.random.default_rng(4)
    k, o = 3, np.full(3, 1 / 3)
    errors = []
    for _ in range(8):
        d = np.abs(rng.standard_normal(k))
        q = rng.standard_normal((k, k))
        B = -0.5 * q @ q.T
        psi = lambda s: d @ (s - o) + 0.5 * (s - o) @ B @ (s - o)  # noqa: E731
        est = qpme(lambda s1, s2: psi(s1) > psi(s2), o, 0.2, 0.05, 1e-4, anchor=anchor)
        truth = np.concatenate([d, B.ravel()])
        got = np.concatenate([est.d, est.B.ravel()])
        errors.append(np.linalg.norm(got / np.linalg.norm(got) - truth / np.linalg.norm(truth)))
    assert np.median(errors) < bound
    if anchor == "center":
        assert np.median(errors) > 0.01  # the Taylor bias is real, so the comparison above means something


# --- fair QPME ----------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_cut_partitions_are_invertible(m):
    partitions, xi = cut_partitions(m)
    assert xi.shape == (m * (m - 1) // 2,) * 2
    assert abs(np.linalg.det(xi)) > 0.5


def test_hand_written_metric_is_recovered_and_queries_stay_in_the_sphere():
    a = np.array([0.6, 0.8])
    b = np.array([[1.5, 0.5], [0.5, 1.0]])
    b *= 2 / np.linalg.norm(b)  # 1/2 |B^{12}|_F = 1
    truth = FairQuadraticMetric.from_pairs(a, [b], lam=0.4)
    est = elicit_fair_quadratic_metric(SimulatedOracle(truth), 2, tolerance=1e-4, radius=0.2)
    np.testing.assert_allclose(est.a, a, atol=2e-3)
    np.testing.assert_allclose(est.B[0, 1], b, atol=2e-2)
    np.testing.assert_allclose(est.B[1, 0], b, atol=2e-2)
    assert est.lam == pytest.approx(0.4, abs=2e-3)
    log = est.diagnostics["query_log"]
    assert est.n_queries == log.n_queries > 0
    o = np.full(2, 0.5)
    for rec in log.records:
        for r in (rec.r1, rec.r2):
            assert np.linalg.norm(r - o, axis=1).max() <= 0.2 + 1e-12
    assert est.diagnostics["cycles"] == []


def test_group_weights_change_the_overall_rates_and_are_recovered_through():
    rng = np.random.default_rng(5)
    tau = np.array([[0.3, 0.6], [0.7, 0.4]])
    (truth,), _ = random_regular_metrics(rng, 1, 2, group_weights=tau)
    est = elicit_fair_quadratic_metric(SimulatedOracle(truth), 2, tolerance=1e-4, group_weights=tau)
    err = elicitation_errors(truth, est)
    assert err.a < 5e-3 and err.B < 5e-2 and err.lam < 5e-3
    r = np.array([[0.6, 0.5], [0.4, 0.55]])
    expected = (1 - truth.lam) * truth.a @ (1 - (tau * r).sum(0)) + truth.lam / 2 * (r[0] - r[1]) @ truth.B[0, 1] @ (r[0] - r[1])
    assert truth(r) == pytest.approx(expected)


def test_tolerance_band_covers_the_truth():
    """The band redraws every slope within its final bisection interval, where the truth lies."""
    rng = np.random.default_rng(15)
    metrics, _ = random_regular_metrics(rng, 12, 2, group_weights="random")
    covered, widths = [], []
    for truth in metrics:
        est = elicit_fair_quadratic_metric(SimulatedOracle(truth), 2, tolerance=1e-2, group_weights=truth.group_weights)
        band = est.diagnostics["tolerance_band"]
        lo, hi = band["lam_interval"]
        covered.append(lo <= truth.lam <= hi)
        widths.append(hi - lo)
        assert band["n_draws"] == 200 and band["B_sd"].shape == (1, 2, 2)
    assert np.mean(covered) >= 0.9
    assert 0 < np.median(widths) < 0.05  # informative, not a trivially wide band
    assert metric_to_dict(est)["lam_interval"] == list(est.diagnostics["tolerance_band"]["lam_interval"])


def test_metric_round_trips_through_a_dict():
    rng = np.random.default_rng(6)
    (truth,), _ = random_regular_metrics(rng, 1, 3)
    back = metric_from_dict(metric_to_dict(truth))
    np.testing.assert_allclose(back.B, truth.B)
    np.testing.assert_allclose(back.a, truth.a)
    assert back.lam == truth.lam


# --- bad input ----------------------------------------------------------------------------------

def test_rate_profiles_are_validated():
    truth = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], 0.5)
    with pytest.raises(RateProfileError, match=r"shape \(n_groups, n_classes\) = \(2, 2\)|shape \(2, 2\)"):
        truth(np.array([0.5, 0.5]))
    with pytest.raises(RateProfileError, match=r"group 1, class 0 of profile 0 is 1.2"):
        truth(np.array([[0.5, 0.5], [1.2, 0.5]]))
    log = QueryLog(lambda r1, r2: True, 2, 2)
    with pytest.raises(RateProfileError, match="r2"):
        log.ask(np.full((2, 2), 0.5), np.full((3, 2), 0.5))
    with pytest.raises(RateProfileError, match="nan"):
        log.ask(np.full((2, 2), 0.5), np.array([[0.5, np.nan], [0.5, 0.5]]))


def test_bad_arguments_are_rejected():
    oracle = SimulatedOracle(FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], 0.5))
    with pytest.raises(ValueError, match="n_groups"):
        elicit_fair_quadratic_metric(oracle, 1)
    with pytest.raises(ValueError, match="radius"):
        elicit_fair_quadratic_metric(oracle, 2, radius=0.7)
    with pytest.raises(ValueError, match=r"group_weights\[:, 1\] must sum to 1"):
        elicit_fair_quadratic_metric(oracle, 2, group_weights=[[0.5, 0.5], [0.5, 0.4]])
    with pytest.raises(TypeError, match="must return a bool"):
        elicit_fair_quadratic_metric(lambda r1, r2: "A", 2)


def test_a_cyclic_oracle_is_detected_and_reported():
    """Answers that depend on the order of presentation are not a metric: cycles appear."""
    rng = np.random.default_rng(7)

    def coin(r1, r2):
        return bool(rng.integers(2))

    with pytest.raises(InconsistentOracleError, match="preference cycle through queries"):
        elicit_fair_quadratic_metric(coin, 2, on_inconsistency="raise")
    with pytest.warns(InconsistentOracleWarning):
        try:
            elicit_fair_quadratic_metric(coin, 2)
        except InconsistentOracleError:
            pass  # may also fail at the end; the warning must have come first


def test_cycle_detection_on_a_hand_made_cycle():
    a, b, c = (np.full((2, 2), x) for x in (0.4, 0.5, 0.6))
    answers = {(0.4, 0.5): True, (0.5, 0.6): True, (0.6, 0.4): True}  # a > b > c > a
    log = QueryLog(lambda r1, r2: answers[(r1[0, 0], r2[0, 0])], 2, 2, on_inconsistency="ignore")
    log.ask(a, b)
    log.ask(b, c)
    assert log.cycles == []
    log.ask(c, a)
    assert [cy.query_indices for cy in log.cycles] == [(0, 1, 2)]
    assert log.ask(b, a) is False and log.n_queries == 3  # reversed pair answered from cache


def test_votes_take_the_majority():
    calls = iter([True, False, False, True, True])
    log = QueryLog(lambda r1, r2: next(calls), 2, 2, votes=3)
    assert log.ask(np.full((2, 2), 0.4), np.full((2, 2), 0.5)) is False  # T, F, F
    assert log.ask(np.full((2, 2), 0.6), np.full((2, 2), 0.5)) is True   # T, T
    assert log.n_queries == 5 and log.n_split_votes == 1



def test_raised_majorities_top_up_earlier_answers_and_can_overturn_them():
    calls = iter([True, False, False])
    a, b = np.full((2, 2), 0.4), np.full((2, 2), 0.5)
    log = QueryLog(lambda r1, r2: next(calls), 2, 2)
    assert log.ask(a, b) is True and log.n_queries == 1
    with log.requiring(votes=3):
        assert log.ask(b, a) is True  # T + F, F: out-voted (asked reversed, answered consistently)
    assert log.n_queries == 3 and log.n_split_votes == 1
    assert log.ask(a, b) is False and log.n_queries == 3  # the majority stays, no new calls
    assert log.votes == 1


def _flip_call(truth, call_no):
    """Oracle that answers from ``truth`` except for call number ``call_no`` (1-based)."""
    calls = []

    def oracle(r1, r2):
        calls.append(1)
        return bool(truth(r1) < truth(r2)) != (len(calls) == call_no)

    return oracle


def test_one_early_wrong_answer_is_detected_and_out_voted():
    """A flipped second question (orthant) wrecks the single-answer estimate; the slice's answers then
    fit no quadratic, its questions are re-asked with majorities, and the exact estimate returns."""
    truth = random_regular_metrics(np.random.default_rng(3), 1, 2)[0][0]
    exact = elicit_fair_quadratic_metric(SimulatedOracle(truth), 2, tolerance=1e-2, n_band_draws=0)
    single = elicit_fair_quadratic_metric(_flip_call(truth, 2), 2, tolerance=1e-2, max_votes=1,
                                          n_band_draws=0, on_inconsistency="ignore")
    rechecked = elicit_fair_quadratic_metric(_flip_call(truth, 2), 2, tolerance=1e-2, n_band_draws=0,
                                             on_inconsistency="ignore")
    assert elicitation_errors(truth, single).B > 0.5
    assert np.allclose(rechecked.B, exact.B) and rechecked.lam == pytest.approx(exact.lam)
    assert rechecked.n_queries > exact.n_queries + 100  # the slice was asked again with majorities


@pytest.mark.parametrize("m", [2, 3])
def test_exact_answers_are_never_asked_twice(m):
    metrics, _ = random_regular_metrics(np.random.default_rng(20 + m), 5, m)
    for truth in metrics:
        default = elicit_fair_quadratic_metric(SimulatedOracle(truth), m, tolerance=1e-2, n_band_draws=0)
        single = elicit_fair_quadratic_metric(SimulatedOracle(truth), m, tolerance=1e-2, max_votes=1, n_band_draws=0)
        assert default.n_queries == single.n_queries
        assert default.diagnostics["n_split_votes"] == 0

# --- oracles ------------------------------------------------------------------------------------

def test_simulated_oracle_flips_the_requested_fraction():
    truth = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], 0.5)
    oracle = SimulatedOracle(truth, flip_fraction=0.05, seed=0)
    r1, r2 = np.full((2, 2), 0.6), np.full((2, 2), 0.5)  # r1 is better (higher rates, no disparity)
    answers = np.array([oracle(r1, r2) for _ in range(20000)])
    assert 1 - answers.mean() == pytest.approx(0.05, abs=3 * np.sqrt(0.05 * 0.95 / 20000))
    assert oracle.n_flipped == (~answers).sum()


def test_recorded_preferences_replay_a_session():
    rng = np.random.default_rng(8)
    (truth,), _ = random_regular_metrics(rng, 1, 2)
    first = elicit_fair_quadratic_metric(SimulatedOracle(truth), 2, tolerance=1e-2)
    records = first.diagnostics["query_log"].records
    table = pd.DataFrame({"r1": [r.r1.ravel() for r in records], "r2": [r.r2.ravel() for r in records],
                          "r1_preferred": [r.r1_preferred for r in records]})
    oracle = RecordedPreferenceOracle(table, 2, 2)
    again = elicit_fair_quadratic_metric(oracle, 2, tolerance=1e-2)
    np.testing.assert_allclose(again.B, first.B)
    assert again.lam == first.lam and oracle.n_replayed == first.n_queries
    with pytest.raises(MissingPreferenceError, match="no recorded answer"):
        elicit_fair_quadratic_metric(oracle, 2, tolerance=1e-3)  # finer search asks new questions
    bad = table.copy()
    bad.loc[len(bad)] = [table.r2[0], table.r1[0], table.r1_preferred[0]]  # same pair, same winner claimed twice
    with pytest.raises(ValueError, match="contradicts an earlier row"):
        RecordedPreferenceOracle(bad, 2, 2)
    with pytest.raises(ValueError, match="missing"):
        RecordedPreferenceOracle(table.drop(columns="r2"), 2, 2)


def test_replay_oracle_checks_the_questions():
    r = [np.full((2, 2), x) for x in (0.4, 0.5, 0.6)]
    replay = ReplayOracle([(r[0], r[1], True)], fallback=lambda r1, r2: False)
    assert replay(r[0], r[1]) is True
    assert replay(r[1], r[2]) is False  # falls through to the person
    with pytest.raises(ReplayMismatchError, match="question 0 differs"):
        ReplayOracle([(r[0], r[1], True)])(r[1], r[2])


def test_oracle_noise_is_tolerated_without_failing_often():
    rng = np.random.default_rng(9)
    metrics, _ = random_regular_metrics(rng, 5, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InconsistentOracleWarning)
        for i, truth in enumerate(metrics):
            est = elicit_fair_quadratic_metric(SimulatedOracle(truth, 0.05, seed=i), 2, tolerance=1e-2, votes=3)
            assert est.diagnostics["n_split_votes"] > 0  # flips did happen and were out-voted
