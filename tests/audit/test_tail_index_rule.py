"""benchmarks/tail_index_rule.py: Hill's estimate against its closed form on exact Pareto quantiles and by Monte
Carlo, the repeated-label variance against the covariance matrix of a share-weighted mean's totals, the rules'
coverage against a hand count, and the documented command at a tiny size."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import gammaln

from benchmarks.tail_index_rule import (FPR1, cic, hill_tail_index, main, repeated_label_variance,
                                        rule_coverage)


def test_hill_on_exact_pareto_quantiles_matches_its_closed_form():
    # x_(i) = (n / i)^(1/a): log(x_(i) / x_(k+1)) = log((k + 1) / i) / a, so 1/â = (log(k+1) - log(k!)/k) / a
    n, a = 1000, 1.3
    x = (n / np.arange(1, n + 1)) ** (1 / a)
    k = 100
    expected = a / (np.log(k + 1) - gammaln(k + 1) / k)
    assert hill_tail_index(np.random.default_rng(0).permutation(x), share=0.1) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("a", [1.1, 1.5, 2.5])
def test_hill_recovers_the_tail_index_of_pareto_draws(a):
    rng = np.random.default_rng(7)
    est = [hill_tail_index(1.0 + rng.pareto(a, 2000)) for _ in range(200)]
    assert np.median(est) == pytest.approx(a, rel=0.05)  # k = 200: SE of one estimate a / sqrt(200)


def test_hill_refuses_too_few_sizes_and_is_infinite_on_ties():
    with pytest.raises(ValueError, match="more than 10"):
        hill_tail_index(np.arange(10))
    assert hill_tail_index(np.full(50, 3.0)) == np.inf


def test_repeated_label_variance_is_unbiased_for_a_share_weighted_mean():
    # u = diag(h) (I - 1 h') x per part with x iid of variance s²: E[u_c²] = s² h_c² (1 - 2 h_c + Σ h²); passing the
    # adjusted totals whose squares are these expectations over (1 - h) must give s² Σ h², the estimate's variance
    s2 = 2.0
    h_parts = [np.array([0.6, 0.3, 0.1]), np.array([0.25, 0.25, 0.5])]
    adjusted, shares, parts, truth = [], [], [], 0.0
    for p, h in enumerate(h_parts):
        m = np.diag(h) @ (np.eye(h.size) - np.outer(np.ones(h.size), h))
        expected_u2 = s2 * np.diag(m @ m.T)
        adjusted.append(np.sqrt(expected_u2 / (1 - h)))
        shares.append(h)
        parts.append(np.full(h.size, p))
        truth += s2 * np.sum(h ** 2)
    got = repeated_label_variance(np.concatenate(adjusted), np.concatenate(shares), np.concatenate(parts))
    assert got == pytest.approx(truth, rel=1e-12)


def test_repeated_label_variance_by_monte_carlo():
    rng = np.random.default_rng(3)
    h = np.array([0.7, 0.1, 0.1, 0.05, 0.05])
    x = rng.standard_normal((20000, h.size))
    u = h * (x - (x @ h)[:, None])
    adjusted = u / np.sqrt(1 - h)
    v = [repeated_label_variance(a, h, np.zeros(h.size)) for a in adjusted]
    assert np.mean(v) == pytest.approx(np.sum(h ** 2), rel=0.03)  # CR2's factor alone: ~0.57 of it here
    assert np.mean(np.sum(adjusted ** 2, axis=1)) < 0.8 * np.sum(h ** 2)


def test_rule_coverage_counts_by_hand():
    truth = cic.truths("pareto1.3")[FPR1]
    # four draws: t ratios 0.5, 3.0, 1.0, 2.5 at df 1e6 (critical value ~1.96); hill 1.2, 1.2, 2.5, 1.2
    raw = pd.DataFrame({"config": "pareto1.3", "statistic": FPR1, "estimable": True,
                        "error": [0.5, 3.0, 1.0, 2.5], "se": 1.0, "df": 1e6, "hill": [1.2, 1.2, 2.5, 1.2],
                        "rep_ratio": [1.0, 2.0, 1.0, 1.0], "estimate": truth})
    row = rule_coverage(raw).iloc[0]
    assert row["cr2_t"] == pytest.approx(0.5)  # 0.5 and 1.0 covered
    assert row["fpr1_dropped"] == pytest.approx(0.75) and row["not_est_fpr1"] == pytest.approx(1.0)
    assert row["miss_above"] == pytest.approx(0.5) and row["t_2df"] == pytest.approx(0.5)  # 2 x 1e6 df: ~z too
    assert row["rep_z"] == pytest.approx(0.75)  # 3.0 / 2 = 1.5 now covered; 2.5 still missed
    assert row["rep_z_miss_above"] == pytest.approx(0.25) and row["rep_z_miss_below"] == 0.0  # error +2.5


def test_documented_command_runs_at_a_tiny_size(capsys):
    main(["--rows", "pareto1.3", "--reps", "1", "--seed", "3"])
    out = capsys.readouterr().out
    assert "not_est_fpr1" in out and "I0-I1(1)" in out
