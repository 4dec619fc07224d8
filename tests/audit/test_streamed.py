"""The audit streamed through DuckDB in batches (`audit.streamed`) equals the in-memory `audit_aggregates`:
labels and counts exactly, estimates to 1e-12, with batches far smaller than a cluster, a block or a group."""
import duckdb
import numpy as np
import pandas as pd
import pytest

import fair_pipeline.audit.prefix_stream as prefix_stream
from fair_pipeline.audit import AuditInputError, audit_aggregates
from fair_pipeline.audit.stats.clustered import BlockTable, BoundaryTracker, CountRows
from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.streamed import audit_spilled, frame_rows
from tests.audit.tables import assert_tables_close

CUTS = [0.05, 0.1, 0.3, 1.0]


def _rows(rng, n: int, ties: bool) -> pd.DataFrame:
    score = rng.normal(size=n)
    return pd.DataFrame({
        "group": rng.choice(["a", "b", "<unknown>"], n, p=[0.5, 0.4, 0.1]),
        "item_id": rng.integers(0, 400, n).astype(str), "query_id": rng.integers(0, 150, n).astype(str),
        "score": score.round(1) if ties else score,
        "n_pos": rng.integers(0, 3, n), "n_neg": rng.integers(0, 3, n)})


def _equal(got, want) -> None:
    for name in ("groups", "pairs", "overall"):
        assert_tables_close(getattr(got, name), getattr(want, name), name)
    for name in ("pairs", "deltas", "balanced", "balanced_deltas", "curves"):
        assert_tables_close(getattr(got.xauc, name), getattr(want.xauc, name), f"xauc.{name}")


@pytest.mark.parametrize("variance, cols", [("conditional", ()), ("item_clustered", ("item_id",)),
                                            ("two_way", ("item_id", "query_id"))])
@pytest.mark.parametrize("ties", [False, True])
def test_streamed_audit_equals_in_memory_with_many_small_batches(tmp_path, monkeypatch, variance, cols, ties):
    monkeypatch.setattr(prefix_stream, "CLUSTER_FEED_ROWS", 101)  # blocks and clusters straddle the feeds too
    rng = np.random.default_rng(11)
    df = _rows(rng, 6_000, ties)
    assert (df["score"].nunique() < 100) == ties

    def rescore(frame):  # a within-group monotone map, like the EO transforms
        return np.where(frame["group"] == "a", 2.0 * frame["score"].to_numpy() + 0.5, frame["score"].to_numpy())

    want = audit_aggregates(df.assign(score=rescore(df)), CUTS, cluster_cols=list(cols) or None, estimand=variance)
    with duckdb.connect() as con:
        con.execute("SET threads = 2")
        rows = frame_rows(df, cols, str(tmp_path), "rows")
        got = audit_spilled(con, rows, rescore, "test", CUTS, min_count=10, confidence=0.95, estimand=variance,
                            batch_rows=97)
    _equal(got, want)
    assert (got.groups["variance_estimand"] == variance).all()
    assert list(tmp_path.iterdir()) == [tmp_path / "rows.parquet"]  # its scratch files are gone


def test_count_rows_give_the_block_table_values():
    """`CountRows` (a row's block counts, as the SQL join carries them) and `BoundaryTracker` (fed the blocks in
    chunks) reproduce every value the in-memory `BlockTable` looks up, bit for bit."""
    rng = np.random.default_rng(5)
    n, G = 3_000, 3
    s = rng.integers(0, 200, n) / 7.0
    y = rng.random(n) < 0.3
    codes = rng.integers(0, G, n)
    grid = build_grid(s, y, codes, np.array(["x", "y", "z"], dtype=object))
    table = BlockTable(grid)
    alphas = np.array([0.05, 0.2, 1.0])
    tracker = BoundaryTracker(grid.n_pos, grid.n_neg, alphas)
    for lo in range(0, grid.scores.size, 13):
        tracker.update(grid.neg[lo:lo + 13].T)
    totals = tracker.totals()
    np.testing.assert_array_equal(totals.m, table.m)
    np.testing.assert_array_equal(totals.n, table.n)
    for j in range(G + 1):
        np.testing.assert_array_equal(totals.boundary(j, alphas * table.n[j]), table.boundary(j, alphas * table.n[j]))
    looked_up = table.rows(s)
    b = looked_up.blocks
    carried = CountRows(b, grid.pos[b].T, grid.neg[b].T, np.cumsum(grid.pos, axis=0)[b].T,
                        np.cumsum(grid.neg, axis=0)[b].T, totals.m, totals.n).take(np.arange(n)[::-1])
    looked_up = looked_up.take(np.arange(n)[::-1])
    for v in range(G + 1):
        np.testing.assert_array_equal(carried.mid_roc(v), looked_up.mid_roc(v))
        np.testing.assert_array_equal(carried.mid_fpr(v), looked_up.mid_fpr(v))
        for got, want in zip(carried.incl(v) + carried.counts(v), looked_up.incl(v) + looked_up.counts(v)):
            np.testing.assert_array_equal(got, want)


def test_bad_scores_and_missing_clusters_are_named(tmp_path):
    df = _rows(np.random.default_rng(2), 500, ties=False)
    with duckdb.connect() as con:
        rows = frame_rows(df, ("item_id",), str(tmp_path), "rows")
        with pytest.raises(AuditInputError, match="score"):
            audit_spilled(con, rows, lambda f: np.where(f["group"] == "a", np.nan, 0.0), "t", CUTS, min_count=1,
                          confidence=0.95, batch_rows=50)
        with pytest.raises(AuditInputError, match="test: scorer returned shape"):
            audit_spilled(con, rows, lambda f: np.zeros(3), "test", CUTS, min_count=1, confidence=0.95)
        rows = frame_rows(df.assign(item_id=df["item_id"].where(df.index != 7)), ("item_id",), str(tmp_path), "holes")
        with pytest.raises(AuditInputError, match="item_id has 1 missing"):
            audit_spilled(con, rows, lambda f: f["score"].to_numpy(), "t", CUTS, min_count=1, confidence=0.95)
