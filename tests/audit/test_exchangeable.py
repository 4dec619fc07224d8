"""The exchangeable-items variance (audit.stats.exchangeable): by hand, equal to CR2 with equal clusters, parts add."""
import numpy as np
import pytest

from fair_pipeline.audit.stats.exchangeable import exchangeable_parts_variance, exchangeable_variance
from fair_pipeline.audit.stats.small_sample import adjusted_parts, cluster_robust_interval


def test_by_hand():
    # r = U / s = (0.2, -0.8, 0.4): m2 = 0.28, Σ s² = 0.375; df 2 x 3 x 0.28² / (m4 - m2²) = 7, capped at C - 1 = 2
    variance, df = exchangeable_variance([0.1, -0.2, 0.1, 0.0], [0.5, 0.25, 0.25, 0.0])
    assert variance == pytest.approx(0.28 * 0.375, rel=1e-12) and df == 2.0
    # many clusters: Satterthwaite's df of the mean of r²
    rng = np.random.default_rng(0)
    s = rng.pareto(1.3, 400) + 1
    s /= s.sum()
    r = rng.standard_normal(400)
    variance, df = exchangeable_variance(s * r, s)
    r2 = r**2
    assert variance == pytest.approx(r2.mean() * (s**2).sum(), rel=1e-12)
    assert df == pytest.approx(2 * 400 * r2.mean() ** 2 / ((r2**2).mean() - r2.mean() ** 2), rel=1e-12)
    assert 100 < df < 399  # a normal r: df ≈ C (κ = 3 gives 2C / 2)
    assert np.isnan(exchangeable_variance([0.3, 0.0], [1.0, 0.0])[0])  # one cluster: nothing to pool


def test_equal_clusters_give_cr2_exactly():
    rng = np.random.default_rng(1)
    values = rng.normal(size=30)
    shares = np.full(30, 1 / 30)
    totals = (values - values.mean()) / 30
    cr2 = cluster_robust_interval(values.mean(), totals, shares)
    variance, df = exchangeable_variance(adjusted_parts(totals, shares), shares)
    assert variance == pytest.approx(cr2.se**2, rel=1e-12) and 1 <= df <= 29


def test_parts_on_disjoint_clusters_add_with_welch_df():
    u = np.array([[0.1, -0.2, 0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.3, -0.1, -0.2]])
    s = np.array([[0.5, 0.25, 0.25, 0, 0, 0], [0, 0, 0, 0.2, 0.3, 0.5]])
    (v1, d1), (v2, d2) = exchangeable_variance(u[0], s[0]), exchangeable_variance(u[1], s[1])
    variance, df = exchangeable_parts_variance(u, s)
    assert variance == pytest.approx(v1 + v2, rel=1e-12)
    assert df == pytest.approx((v1 + v2) ** 2 / (v1**2 / d1 + v2**2 / d2), rel=1e-12)
