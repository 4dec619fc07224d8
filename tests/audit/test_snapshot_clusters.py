"""Cluster sums copied at every checkpoint (`stats.snapshot_clusters`, two-way's query stream) against the running
sums of `stats.prefix_clusters` and brute force: clusters spanning the whole score range, ties, three groups."""
import numpy as np
import pytest

import fair_pipeline.audit.stats.prefix_clusters as prefix
from fair_pipeline.audit.stats.snapshot_clusters import SnapshotClusterSums
from fair_pipeline.audit.stats.grid_audit import variance_alphas
from tests.audit import bruteforce as bf
from tests.audit.test_prefix_clusters import CUTS, _feed, _rows


def _spanning_rows(rng, n=1200, clusters=25, ties=4):
    """Rows whose clusters (queries) are drawn independently of the score: each spans the score range, so it
    straddles every cutoff; one cluster holds a single row and one lies wholly in the top band."""
    s, y, g, _ = _rows(rng, n=n, clusters=90, ties=ties or 1)
    if not ties:  # distinct scores
        s = s + rng.normal(scale=1e-3, size=n)
    c = rng.integers(0, clusters, n)
    order = np.argsort(-s, kind="stable")
    c[c == clusters - 1] = 0
    c[order[-1]] = clusters - 1  # a query with one row (the lowest score)
    c[c == clusters - 2] = 1
    c[order[:3]] = clusters - 2  # a query wholly above every cutoff
    return s, y, g, c


@pytest.mark.parametrize("dense_share", [0.0, np.inf])
@pytest.mark.parametrize("batch_rows", [29, 10_000])
@pytest.mark.parametrize("ties", [0, 4])  # 0: distinct scores; 4: ties within and across classes and groups
def test_snapshot_sums_equal_the_running_sums_and_brute_force(monkeypatch, dense_share, batch_rows, ties):
    monkeypatch.setattr(prefix, "DENSE_RUN_SHARE", dense_share)
    s, y, g, c = _spanning_rows(np.random.default_rng(31 + ties), ties=ties)
    res, running = _feed(s, y, g, c, batch_rows)
    _, copied = _feed(s, y, g, c, batch_rows, kind=SnapshotClusterSums)
    assert copied.copied > 2  # rows were fed after several checkpoints
    np.testing.assert_allclose(copied.per_cluster(), running.per_cluster(), rtol=1e-12, atol=1e-12)
    alphas = variance_alphas(CUTS)
    sel = np.searchsorted(res["alphas"], alphas)
    auc, roc = res["auc"][:, sel], res["tpr_interp"][:, sel]
    got, want = copied.covariance(auc, roc), running.covariance(auc, roc)
    np.testing.assert_allclose(got.covariance(), want.covariance(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.cr1_covariance(), want.cr1_covariance(), rtol=1e-12, atol=1e-15)
    assert got.clusters == want.clusters == np.unique(c).size
    np.testing.assert_array_equal(got.clusters_with, want.clusters_with)
    member = [g == v for v in range(3)] + [np.ones(s.size, dtype=bool)]
    cov = got.cr1_covariance()
    for col, (i, j) in enumerate(res["pairs"]):
        rows = (y & member[i]) | (~y & member[j])
        for k, alpha in enumerate(alphas):
            full = np.zeros(s.size)
            full[rows] = bf.influence_values(s[rows], y[rows], alpha)[2]
            assert cov[k, col, col] == pytest.approx(bf.clustered_variance(full, c), rel=1e-12, abs=1e-15)
