"""Monte Carlo proof of the Lemma 3 variance (with the mirror-ROC term) and of the CIs.

Binormal scores with unequal variances: negatives N(0, 1), positives N(1, 2^2), so that
ROC(t) = Phi((1 + Phi^-1(t)) / 2) and the true I(alpha) = int_0^alpha ROC is known.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from fair_pipeline.audit import compare_groups, truncated_auc

pytestmark = pytest.mark.slow

ALPHAS = np.array([0.05, 0.1, 0.2, 0.5, 1.0])
MU, SD = 1.0, 2.0
REPS, M, N = 2000, 500, 600


def true_I(alpha: float) -> float:
    return integrate.quad(lambda t: stats.norm.cdf((MU + stats.norm.ppf(t)) / SD), 0, alpha, limit=200)[0]


@pytest.fixture(scope="module")
def replications():
    rng = np.random.default_rng(20260522)
    y = np.r_[np.ones(M, bool), np.zeros(N, bool)]
    est, var, var_printed = (np.empty((REPS, ALPHAS.size)) for _ in range(3))
    for r in range(REPS):
        s = np.r_[rng.normal(MU, SD, M), rng.normal(0.0, 1.0, N)]
        t = truncated_auc(s, y, ALPHAS)
        est[r], var[r] = t["auc"], t["variance"]
        # the printed Algorithm 1 (tildes lost): ROC accumulators in the 1/m term as well
        I, R, a = t["auc"].to_numpy(), t["roc_at_cutoff"].to_numpy(), ALPHAS
        se2 = t["se"].to_numpy() ** 2
        var_neg = _var_neg_term(s, y)
        sq_minus = var_neg - a * (1 - a) * R**2 + 2 * (1 - a) * R * I  # sqauc - auc^2
        printed_pos = sq_minus + a**2 * R * (1 - R) - 2 * a * (1 - R) * I
        var_printed[r] = var_neg / (N - 1) + printed_pos / (M - 1)
        assert np.allclose(se2, var[r])
    return est, var, var_printed


def _var_neg_term(s, y):
    from fair_pipeline.audit.stats.blocks import positive_positions
    from fair_pipeline.audit.stats.sweep_no_ties import sweep_no_cross_ties

    return sweep_no_cross_ties(positive_positions(s, y), s.size, ALPHAS)["var_neg_term"][0]


def test_ci_coverage_between_93_and_97_percent(replications):
    est, var, _ = replications
    truth = np.array([true_I(a) for a in ALPHAS])
    z = stats.norm.ppf(0.975)
    covered = (np.abs(est - truth) <= z * np.sqrt(var)).mean(axis=0)
    assert np.all((covered >= 0.93) & (covered <= 0.97)), dict(zip(ALPHAS, covered))


def test_mean_analytic_variance_within_10_percent_of_empirical(replications):
    est, var, _ = replications
    ratio = var.mean(axis=0) / est.var(axis=0, ddof=1)
    assert np.all(np.abs(ratio - 1) <= 0.10), dict(zip(ALPHAS, ratio))


def test_printed_algorithm_without_mirror_roc_is_wrong(replications):
    """Using the ROC accumulators in the 1/m term (as printed) misstates the variance."""
    est, _, var_printed = replications
    ratio = var_printed.mean(axis=0) / est.var(axis=0, ddof=1)
    assert np.max(np.abs(ratio - 1)) > 0.25, dict(zip(ALPHAS, ratio))


def test_group_difference_ci_coverage():
    """Two independent groups with the same binormal ROC: the difference CI covers 0 ~95%."""
    rng = np.random.default_rng(7)
    reps, m, n = 400, 150, 200
    g = np.r_[np.zeros(m + n, int), np.ones(m + n, int)]
    y = np.r_[np.ones(m, bool), np.zeros(n, bool)]
    y = np.r_[y, y]
    hits = np.zeros(ALPHAS.size)
    for _ in range(reps):
        s = np.r_[rng.normal(MU, SD, m), rng.normal(0, 1, n)]
        s = np.r_[s, 3.0 + 0.5 * np.r_[rng.normal(MU, SD, m), rng.normal(0, 1, n)]]  # same ROC
        pairs = compare_groups(s, y, g, ALPHAS).pairs
        hits += (pairs["ci_low"] <= 0) & (0 <= pairs["ci_high"])
    assert np.all(np.abs(hits / reps - 0.95) <= 0.035), hits / reps
