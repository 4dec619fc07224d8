"""Pointwise ROC band (Hsieh & Turnbull variance): Monte Carlo coverage on binormal scores, edge cases."""
from __future__ import annotations

import numpy as np
from scipy import stats

from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.grid_audit import CURVE_GRID, run_grid_audit
from fair_pipeline.audit.stats.roc_band import roc_band, roc_slope


def _empirical_roc(scores, labels):
    res = run_grid_audit(build_grid(scores, labels.astype(bool)), [1.0], xauc=False, curves=True)
    return res["tpr_interp"][0, np.searchsorted(res["alphas"], CURVE_GRID)]


def test_band_covers_the_true_binormal_roc_about_95_percent():
    rng = np.random.default_rng(20261122)
    m, n, reps = 300, 500, 600
    ts = np.array([0.1, 0.3, 0.5, 0.8])
    truth = stats.norm.sf((stats.norm.isf(ts) - 1.0) / 1.5)  # positives N(1, 1.5^2), negatives N(0, 1)
    idx = np.searchsorted(CURVE_GRID, ts)
    covered = np.zeros(ts.size)
    widths = np.zeros(ts.size)
    labels = np.r_[np.ones(m), np.zeros(n)]
    for _ in range(reps):
        scores = np.r_[rng.normal(1.0, 1.5, m), rng.normal(0.0, 1.0, n)]
        band = roc_band(CURVE_GRID, _empirical_roc(scores, labels), m, n)
        lo, hi = band["tpr_ci_low"][idx], band["tpr_ci_high"][idx]
        covered += (lo <= truth) & (truth <= hi)
        widths += hi - lo
    coverage = covered / reps
    assert np.all((coverage > 0.91) & (coverage < 0.985)), coverage
    # the band is wider than the positives-only binomial interval where the curve is steep (threshold noise)
    binomial = 2 * 1.96 * np.sqrt(truth * (1 - truth) / m)
    assert widths[0] / reps > 1.1 * binomial[0]


def test_slope_of_a_straight_line_and_empty_classes():
    fpr = np.linspace(0, 1, 101)
    np.testing.assert_allclose(roc_slope(fpr, 0.5 * fpr + 0.5 * fpr**0), 0.5)
    band = roc_band(fpr, fpr, 0, 10)
    assert np.isnan(band["se"]).all() and np.isnan(band["tpr_ci_low"]).all()
    band = roc_band(fpr, np.ones_like(fpr), 10, 10)
    assert band["tpr_ci_high"].max() <= 1.0 and band["tpr_ci_low"].min() >= 0.0
