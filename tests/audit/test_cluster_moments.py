"""`ClusterMoments` (sums over clusters, merged across machines) gives the covariances, cluster counts and
Satterthwaite df of single columns and of differences of two columns that `ClusterTotals` (every cluster's
totals kept) gives, whatever way the clusters are split."""
import numpy as np
import pytest

from fair_pipeline.audit.stats.cluster_moments import ClusterMoments
from fair_pipeline.audit.stats.cluster_pass import ClusterTotals, contrast_df
from fair_pipeline.audit.stats.validation import AuditInputError


def _parts(C: int, K: int = 3, G: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    pairs = [(0, 1), (1, 0), (0, 2), (2, 1), (2, 2)]
    S = len(pairs)
    Uneg, Upos = rng.normal(size=(K, C, S)), rng.normal(size=(K, C, S))
    Uneg[:, :3] = 0.0  # clusters without negatives: their parts are exactly zero
    pos = rng.integers(0, 4, (C, G)).astype(float)
    neg = rng.integers(0, 4, (C, G)).astype(float)
    neg[:3] = 0.0
    counts = [np.c_[c, c.sum(axis=1)] for c in (pos, neg)]
    m, n = counts[0].sum(axis=0), counts[1].sum(axis=0)
    return pairs, K, S, Uneg, Upos, counts[0], counts[1], m, n


@pytest.mark.parametrize("splits", [[0, 40], [0, 7, 8, 25, 40]])
def test_moments_equal_the_kept_totals(splits):
    pairs, K, S, Uneg, Upos, pos, neg, m, n = _parts(40)
    want = ClusterTotals(pairs, K, S, 3)
    want.add(Uneg, Upos, pos, neg, m, n)
    got = ClusterMoments(pairs, K, S, 3)
    for lo, hi in zip(splits[:-1], splits[1:]):
        part = ClusterMoments(pairs, K, S, 3)
        part.add(Uneg[:, lo:hi], Upos[:, lo:hi], pos[lo:hi], neg[lo:hi], m, n)
        got.merge(ClusterMoments.from_bytes(pairs, part.to_bytes()))  # as the executors hand them over
    np.testing.assert_allclose(got.covariance(), want.covariance(), rtol=1e-12)
    np.testing.assert_allclose(got.cr1_covariance(), want.cr1_covariance(), rtol=1e-12)
    assert got.clusters == want.clusters == 40
    np.testing.assert_array_equal(got.clusters_with, want.clusters_with)
    for weights in ({0: 1.0}, {3: -2.0}, {1: 1.0, 4: -1.0}, {4: 0.5, 0: -0.5}):
        w = np.zeros(S)
        for s, c in weights.items():
            w[s] = c
        np.testing.assert_allclose(contrast_df([got.totals()], w), contrast_df([want.totals()], w), rtol=1e-12)
        np.testing.assert_allclose(contrast_df([got.totals()], w, [got.design], pairs),  # with the parts' design df
                                   contrast_df([want.totals()], w, [want.design], pairs), rtol=1e-12)
    np.testing.assert_allclose(got.design.part_cross, want.design.part_cross, rtol=1e-12)
    np.testing.assert_allclose(got.design.moments, want.design.moments, rtol=1e-12)
    # the exactly-zero parts count as clusters without that column, as with the kept totals
    assert np.isfinite(contrast_df([got], np.eye(S)[0])).all()


def test_other_contrasts_are_refused_by_name():
    pairs, K, S, Uneg, Upos, pos, neg, m, n = _parts(10)
    got = ClusterMoments(pairs, K, S, 3)
    got.add(Uneg, Upos, pos, neg, m, n)
    with pytest.raises(AuditInputError, match="one column or a difference of two"):
        got.contrast_df(np.array([1.0, 1.0, 0, 0, 0]))
    assert np.isnan(got.contrast_df(np.zeros(S))).all()
