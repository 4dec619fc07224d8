"""Cluster-robust variances from the one pass in score order (`stats.prefix_clusters`) against brute force and
against the sort-by-cluster accumulator (`stats.clustered`), ties and several groups included."""
import functools

import numpy as np
import pandas as pd
import pytest

import fair_pipeline.audit.files as files
import fair_pipeline.audit.prefix_stream as prefix_stream
import fair_pipeline.audit.stats.checkpoint_copies as checkpoint_copies
import fair_pipeline.audit.stats.cluster_parts as cluster_parts
import fair_pipeline.audit.stats.prefix_clusters as prefix
from fair_pipeline.audit import audit_aggregates
from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.cluster_pass import contrast_df
from fair_pipeline.audit.stats.grid_audit import run_grid_audit, variance_alphas
from tests.audit import bruteforce as bf
from tests.audit.tables import assert_reports_close

CUTS = [0.05, 0.3, 1.0]
GROUPS = np.array(['a "quoted"', "b+", "в"], dtype=object)


def _rows(rng, n=900, clusters=70, ties=4):
    """Rows in clusters that span groups, discrete scores (ties within and across classes and groups)."""
    c = rng.integers(0, clusters, n)
    effect = rng.normal(size=clusters)[c]
    y = rng.random(n) < 1 / (1 + np.exp(-effect))
    s = np.round((effect + y + rng.normal(scale=0.7, size=n)) * ties) / ties
    g = rng.integers(0, 3, n)
    return s, y, g, c


def _feed(s, y, g, c, batch_rows, kind=prefix.PrefixClusterSums):
    """Sweep the rows in descending score order in batches (ties straddling batches held back), feeding the
    prefix sums (``kind``) as `audit_file` does; returns the sweep's result and the sums."""
    grid = build_grid(s, y, g, GROUPS)
    res = run_grid_audit(grid, CUTS)
    pairs = res["pairs"]
    sums = kind(grid.n_pos, grid.n_neg, variance_alphas(CUTS), pairs, int(c.max()) + 1)
    order = np.argsort(-s, kind="stable")
    blocks = prefix.SortedRowBlocks(2 * len(GROUPS))
    cells = g * 2 + y

    def update(done):
        if done is not None:
            _, table, row_block, cell, counts, code = done
            label = cell & 1
            sums.update(table[1::2], table[0::2], row_block, cell >> 1, counts * label, counts * (1 - label), code)

    for lo in range(0, s.size, batch_rows):
        take = order[lo:lo + batch_rows]
        update(blocks.push(s[take], cells[take], np.ones(take.size), c[take]))
    update(blocks.finish())
    return res, sums


@pytest.mark.parametrize("dense_share", [0.0, np.inf])  # every run scattered row by row / summed per cell first
@pytest.mark.parametrize("batch_rows", [37, 10_000])
@pytest.mark.parametrize("chunk", [None, 16])  # 16: the final step's clusters in chunks, the last one partial
def test_prefix_sums_equal_brute_force_cluster_variances(monkeypatch, dense_share, batch_rows, chunk):
    monkeypatch.setattr(prefix, "DENSE_RUN_SHARE", dense_share)
    if chunk:
        monkeypatch.setattr(prefix, "CROSS_CHUNK", chunk)
        monkeypatch.setattr(cluster_parts, "CROSS_CHUNK", chunk)
    s, y, g, c = _rows(np.random.default_rng(11))
    res, sums = _feed(s, y, g, c, batch_rows)
    alphas = variance_alphas(CUTS)
    sel = np.searchsorted(res["alphas"], alphas)
    finished = sums.covariance(res["auc"][:, sel], res["tpr_interp"][:, sel])
    cov, clusters = finished.cr1_covariance(), finished.clusters  # the sums' raw sandwich (CR2 scales it per cluster)
    assert clusters == np.unique(c).size
    G = len(GROUPS)
    member = [g == v for v in range(G)] + [np.ones(s.size, dtype=bool)]
    infl = {}
    for col, (i, j) in enumerate(res["pairs"]):
        for k, alpha in enumerate(alphas):
            rows = (y & member[i]) | (~y & member[j])  # positives of vector i, negatives of vector j
            full = np.zeros(s.size)
            full[rows] = bf.influence_values(s[rows], y[rows], alpha)[2]
            infl[col, k] = full
            assert cov[k, col, col] == pytest.approx(bf.clustered_variance(full, c), rel=1e-12, abs=1e-15)
    xab = res["columns"].index(("xauc", 0, 1))
    xba = res["columns"].index(("xauc", 1, 0))
    k1 = len(alphas) - 1  # xAUC(a, b) - xAUC(b, a): an item feeds both sides, the covariance counts
    want = bf.clustered_variance(infl[xab, k1] - infl[xba, k1], c)
    assert cov[k1, xab, xab] + cov[k1, xba, xba] - 2 * cov[k1, xab, xba] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("two_way", [False, True])
@pytest.mark.parametrize("ties", [0, 3])  # 0: distinct scores, the rows are sorted; 3: GROUP BY score, cell, clusters
def test_file_audit_equals_the_sort_by_cluster_accumulator(tmp_path, monkeypatch, two_way, ties):
    """`audit_file` (one pass in score order, small feeds so ties and clusters straddle updates) against the
    in-memory audit whose variances sort rows by cluster: every float of every table to 1e-12 (1e-11 relative
    for derived figures such as z)."""
    monkeypatch.setattr(prefix_stream, "CLUSTER_FEED_ROWS", 101)
    rng = np.random.default_rng(12)
    s, y, g, c = _rows(rng, n=2500, clusters=180, ties=ties or 1)
    if not ties:
        s = s + rng.normal(scale=1e-3, size=s.size)
    q = rng.integers(0, 60, s.size)
    frame = pd.DataFrame({"score": s, "label": y.astype(int), "grp": GROUPS[g], "item": [f"it {v}" for v in c],
                          "query": q})
    path = tmp_path / "scored rows.parquet"
    frame.to_parquet(path)
    clusters = ["item", "query"] if two_way else ["item"]
    got = files.audit_file(path, "score", "label", "grp", clusters=clusters, batch_rows=53).report
    aggregates = frame.assign(n_pos=frame["label"], n_neg=1 - frame["label"]).rename(columns={"grp": "group"})
    want = audit_aggregates(aggregates, cluster_cols=clusters, estimand="two_way" if two_way else "clustered")
    assert_reports_close(got, want)


@pytest.mark.parametrize("diagonal", [False, True])
def test_columns_needed_at_the_last_cutoff_only_equal_the_full_sums_there(monkeypatch, diagonal):
    """The one-way audit forms the xAUC columns' cross products at FPR 1 only (`cluster_parts.LastCutoffColumns`):
    the covariances, df and counts it forms equal those of every column at every cutoff; the others are NaN.
    ``diagonal``: the sums themselves keep only what those columns read below FPR 1 (`checkpoint_copies`), the
    final step in chunks of 16 clusters, so copies of straddling clusters are picked per chunk."""
    monkeypatch.setattr(prefix, "CROSS_CHUNK", 16)
    monkeypatch.setattr(cluster_parts, "CROSS_CHUNK", 16)
    monkeypatch.setattr(checkpoint_copies, "BUCKET_BITS", 3)
    s, y, g, c = _rows(np.random.default_rng(13))
    res, full_sums = _feed(s, y, g, c, 200)
    kind = functools.partial(prefix.PrefixClusterSums, diagonal=True) if diagonal else prefix.PrefixClusterSums
    _, sums = _feed(s, y, g, c, 200, kind)
    assert sum(len(p) for p in sums.copies._parts.values()) > 20  # clusters straddling checkpoints
    sel = np.searchsorted(res["alphas"], variance_alphas(CUTS))
    auc, roc = res["auc"][:, sel], res["tpr_interp"][:, sel]
    every = [k for k, (kind, _, _) in enumerate(res["columns"]) if kind in ("group", "overall")]
    full, part = full_sums.covariance(auc, roc), sums.covariance(auc, roc, every=every)
    if diagonal:
        with pytest.raises(ValueError, match="diagonal"):
            sums.covariance(auc, roc)
        with pytest.raises(ValueError, match="diagonal"):
            sums.per_cluster()
    K, S = auc.shape[1], auc.shape[0]
    formed = np.zeros((K, S, S), dtype=bool)
    formed[:-1, np.ix_(every, every)[0], np.ix_(every, every)[1]] = True
    formed[-1] = True
    for name in ("covariance", "cr1_covariance"):
        want, got = getattr(full, name)(), getattr(part, name)()
        np.testing.assert_allclose(got[formed], want[formed], rtol=1e-13, atol=1e-17)
        assert np.isnan(got[~formed]).all()
    assert part.clusters == full.clusters and np.array_equal(part.clusters_with, full.clusters_with)
    xab, xba = res["columns"].index(("xauc", 0, 1)), res["columns"].index(("xauc", 1, 0))
    for weights in ({every[0]: 1.0}, {every[0]: 1.0, every[1]: -1.0}, {xab: 1.0}, {xab: 1.0, xba: -1.0}):
        w = np.zeros(S)
        w[list(weights)] = list(weights.values())
        want = contrast_df([full.totals()], w, [full.design], res["pairs"])
        got = contrast_df([part.totals()], w, [part.design], res["pairs"])
        at = slice(None) if set(weights) <= set(every) else slice(-1, None)
        np.testing.assert_allclose(got[at], want[at], rtol=1e-12)
        assert set(weights) <= set(every) or np.isnan(got[:-1]).all()
