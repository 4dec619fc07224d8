"""Two-way's intersection stream with its one-impression cells summed apart (`stats.singleton_cells`) against every
cell kept as its own cluster (`PrefixClusterSums`): the same CR1 and CR2 cross products, ties, straddling blocks and
three groups included."""
import numpy as np
import pytest

import fair_pipeline.audit.stats.prefix_clusters as prefix
from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.grid_audit import run_grid_audit, variance_alphas
from fair_pipeline.audit.stats.singleton_cells import SINGLE, IntersectionSums
from fair_pipeline.audit.stats.sweep import block_curves

CUTS = [0.05, 0.3, 1.0]
GROUPS = np.array(['a "quoted"', "b+", "в"], dtype=object)


def _cells(rng, n, ties):
    """Rows whose (item, query) cells mostly hold one row; scores with ties across classes and groups."""
    item, query = rng.integers(0, 150, n), rng.integers(0, 40, n)
    effect = rng.normal(size=150)[item]
    y = rng.random(n) < 1 / (1 + np.exp(-effect))
    s = effect + y + rng.normal(scale=0.7, size=n)
    s = np.round(s * ties) / ties if ties else s
    return s, y, rng.integers(0, 3, n), item * 40 + query


def _feed(accs, s, y, g, codes_of, batch_rows):
    """Rows in descending score order in batches into each (sums, codes) as `prefix_stream.feed_rows` does."""
    grid = build_grid(s, y, g, GROUPS)
    res = run_grid_audit(grid, CUTS)
    order = np.argsort(-s, kind="stable")
    blocks = prefix.SortedRowBlocks(2 * len(GROUPS))
    cells = g * 2 + y
    running = [np.zeros(len(GROUPS) + 1), np.zeros(len(GROUPS) + 1)]

    def update(done):
        if done is None:
            return
        _, table, row_block, cell, counts, *codes = done
        pos, neg = table[1::2], table[0::2]
        curves = block_curves(np.vstack([pos, pos.sum(axis=0)]), np.vstack([neg, neg.sum(axis=0)]), *running,
                              accs[0].several.m if hasattr(accs[0], "several") else accs[0].m,
                              accs[0].several.n if hasattr(accs[0], "several") else accs[0].n)
        running[0], running[1] = curves[0][:, -1], curves[1][:, -1]
        label = cell & 1
        for acc, code in zip(accs, codes):
            acc.update(pos, neg, row_block, cell >> 1, counts * label, counts * (1 - label), code, curves)

    for lo in range(0, s.size, batch_rows):
        take = order[lo:lo + batch_rows]
        update(blocks.push(s[take], cells[take], np.ones(take.size), *(c[take] for c in codes_of)))
    update(blocks.finish())
    return res


@pytest.mark.parametrize("ties", [0, 2])
@pytest.mark.parametrize("batch_rows", [41, 10_000])
def test_singleton_cells_give_the_per_cell_cross_products(ties, batch_rows):
    rng = np.random.default_rng(5)
    s, y, g, cell = _cells(rng, 3000, ties)
    dense = np.unique(cell, return_inverse=True)[1].ravel()
    size = np.bincount(dense)
    several = size[dense] > 1
    split = np.full(s.size, SINGLE)
    split[several] = np.unique(dense[several], return_inverse=True)[1].ravel()
    assert 0.3 < np.mean(~several) < 0.9  # both kinds of cell, many of each
    grid = build_grid(s, y, g, GROUPS)
    alphas = variance_alphas(CUTS)
    res0 = run_grid_audit(grid, CUTS)
    args = (grid.n_pos, grid.n_neg, alphas, res0["pairs"])
    want = prefix.PrefixClusterSums(*args, int(dense.max()) + 1)
    got = IntersectionSums(*args, int(split.max()) + 1)
    res = _feed([want, got], s, y, g, [dense, split], batch_rows)
    sel = np.searchsorted(res["alphas"], alphas)
    auc, roc = res["auc"][:, sel], res["tpr_interp"][:, sel]
    a, b = want.covariance(auc, roc, keep_totals=False), got.covariance(auc, roc)
    assert a.clusters == b.clusters == size.size
    scale = np.abs(a.cross).max()
    np.testing.assert_allclose(b.cross, a.cross, rtol=1e-11, atol=1e-13 * scale)
    np.testing.assert_allclose(b.cross_cr2, a.cross_cr2, rtol=1e-11, atol=1e-13 * scale)
    assert not np.allclose(b.cross_cr2, b.cross, rtol=1e-6)  # CR2 scaled something


def test_a_singleton_row_must_be_one_impression():
    sums = IntersectionSums([3, 2], [4, 5], [0.5, 1.0], [(0, 0), (1, 1), (2, 2)], 0)
    pos, neg = np.array([[2.0], [0.0]]), np.array([[0.0], [1.0]])
    curves = block_curves(np.vstack([pos, pos.sum(axis=0)]), np.vstack([neg, neg.sum(axis=0)]), np.zeros(3),
                          np.zeros(3), sums.several.m, sums.several.n)
    with pytest.raises(Exception, match="exactly one positive or one negative"):
        sums.update(pos, neg, [0], [0], [2.0], [0.0], [SINGLE], curves)
