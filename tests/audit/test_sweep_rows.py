"""Sorted rows fed straight into the sweep (`stats.sweep_rows.SortedRowFeed`): the same audit as the in-memory grid
of the same rows and as brute force, however the rows are cut into batches (ties inside a batch, across a batch
boundary, batches of one row, empty batches)."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.audit.stats import StreamingAudit
from fair_pipeline.audit.stats.aggregate import audit_grid
from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.sweep_rows import SortedRowFeed
from tests.audit import bruteforce

CUTOFFS = [0.05, 0.3, 1.0]


def _rows(rng, n: int, tied_share: float, groups: int):
    """Rows in descending score order: a share of them on a few repeated scores (ties within and across classes
    and groups), the rest distinct; (scores, cells = group * 2 + label)."""
    scores = rng.normal(size=n)
    tied = rng.random(n) < tied_share
    scores[tied] = rng.choice([-0.5, 0.0, -0.0, 0.25], tied.sum())  # -0.0 and +0.0 are one score
    group = rng.integers(0, groups, n)
    label = (rng.random(n) < 0.35 + 0.1 * group).astype(np.int64)
    order = np.argsort(-scores, kind="stable")
    return (scores[order] + 0.0), (group * 2 + label)[order], group[order], label[order]


def _fed(scores, cells, groups: int, cuts, chunk_rows: int):
    counts = np.bincount(cells, minlength=2 * groups).astype(float)
    stream = StreamingAudit(np.arange(groups), counts[1::2], counts[0::2], CUTOFFS)
    feed = SortedRowFeed(stream, chunk_rows=chunk_rows)
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        feed.push(scores[lo:hi], cells[lo:hi].astype(np.int32))
    feed.finish()
    return stream.report()


@pytest.mark.parametrize("tied_share", [0.0, 0.02, 0.5])
@pytest.mark.parametrize("groups", [1, 3])
def test_fed_rows_equal_the_in_memory_grid_however_batched(tied_share, groups):
    rng = np.random.default_rng(int(tied_share * 100) + groups)
    scores, cells, group, label = _rows(rng, 3000, tied_share, groups)
    grid = build_grid(scores, label.astype(bool), group, np.arange(groups))
    want = audit_grid(grid, CUTOFFS)
    # batch edges: random, plus a cut inside a run of equal scores, an empty batch and one-row batches
    tie = int(np.flatnonzero(np.r_[scores[1:] == scores[:-1], False])[0]) + 1 if tied_share else 7
    cuts = np.unique(np.r_[0, rng.integers(0, scores.size, 12), tie, tie, tie + 1, 200, 201, 202, scores.size])
    cuts = np.sort(np.r_[cuts, cuts[3]])  # an empty batch
    for chunk_rows in (5, 1 << 14):
        got = _fed(scores, cells, groups, cuts, chunk_rows)
        for table in ("groups", "pairs", "overall"):
            a, b = getattr(got, table), getattr(want, table)
            numeric = a.select_dtypes("number").columns
            np.testing.assert_allclose(a[numeric].to_numpy(float), b[numeric].to_numpy(float), rtol=0, atol=1e-12)
        if groups > 1:
            np.testing.assert_allclose(got.xauc.deltas.select_dtypes("number").to_numpy(float),
                                       want.xauc.deltas.select_dtypes("number").to_numpy(float), rtol=0, atol=1e-12)
    # and the full-curve AUC and DeLong variance of each group against brute force
    full = got.groups[got.groups["cutoff"] == 1.0].reset_index(drop=True)
    for g in range(groups):
        pos, neg = scores[(group == g) & (label == 1)], scores[(group == g) & (label == 0)]
        assert full.loc[g, "auc"] == pytest.approx(bruteforce.auc(pos, neg), abs=1e-12)
        assert full.loc[g, "se"] ** 2 == pytest.approx(bruteforce.delong_var(pos, neg), abs=1e-12)


def test_rows_out_of_order_are_refused():
    stream = StreamingAudit(np.arange(1), [1.0], [1.0], CUTOFFS)
    feed = SortedRowFeed(stream)
    feed.push(np.array([2.0, 1.0]), np.array([1, 0]))
    with pytest.raises(Exception, match="descending"):
        feed.push(np.array([1.5]), np.array([1]))
        feed.finish()
