"""Item-, query- and two-way clustered pairwise accuracies against pair-by-pair brute force."""
import numpy as np
import pytest

from fair_pipeline.audit import pairwise_accuracies
from fair_pipeline.audit.stats.pairwise_clustered import PairwiseClusters, inside_sides, row_pairs, row_sides


def _data(seed=0, n=70):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 7, n)
    s = np.round(rng.normal(size=n), 1)  # ties
    y = rng.random(n) < 0.4
    g = rng.integers(0, 2, n)
    item = rng.integers(0, 25, n)  # items repeat across and within queries
    return q, s, y, g, item


def _pairs(q, s, y, g, cell):
    out = []
    for i in range(q.size):
        for j in range(q.size):
            if q[i] == q[j] and y[i] and not y[j] and (g[i], g[j]) == cell:
                out.append((i, j, 1.0 if s[i] > s[j] else (0.5 if s[i] == s[j] else 0.0)))
    return out


def _brute_variance(pairs, unit_of_row, cr2: bool):
    """Sum over clusters of the squared sum of e_p over the pairs touching the cluster (each pair once per
    cluster), CR2-scaled by the cluster's share of the pairs."""
    T = len(pairs)
    A = sum(h for _, _, h in pairs) / T
    tot, n_pairs = {}, {}
    for i, j, h in pairs:
        for k in {unit_of_row[i], unit_of_row[j]}:
            tot[k] = tot.get(k, 0.0) + (h - A) / T
            n_pairs[k] = n_pairs.get(k, 0) + 1
    return sum(v * v / ((1 - n_pairs[k] / T) if cr2 else 1.0) for k, v in tot.items())


def test_row_pairs_count_every_pair_once_at_each_end():
    q, s, y, g, _ = _data()
    t, c = row_pairs(q, s, g, y, 2)
    for cell in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        pairs = _pairs(q, s, y, g, cell)
        assert t.sum(axis=0)[cell] / 2 == len(pairs)
        assert c.sum(axis=0)[cell] / 2 == pytest.approx(sum(h for _, _, h in pairs))


@pytest.mark.parametrize("unit", ["item", "query", "two_way", "two_way_sessions", "two_way_days"])
def test_clustered_variances_match_brute_force(unit):
    q, s, y, g, item = _data()
    pairs = _pairs(q, s, y, g, (0, 1))
    if unit.startswith("two_way"):
        # second key: the queries; sessions of two queries (one per query, not the queries); days drawn per row
        second = {"two_way": q, "two_way_sessions": q // 2,
                  "two_way_days": np.random.default_rng(3).integers(0, 3, q.size)}[unit]
        cells = item * 100 + second
        want = (_brute_variance(pairs, item, True) + _brute_variance(pairs, second, True)
                - _brute_variance(pairs, cells, True))
        clusters = (item, second)
    else:
        units = item if unit == "item" else q
        want = _brute_variance(pairs, units, True)
        clusters = units
    est, var, _, df = PairwiseClusters(clusters, q, s, g, y, 2).contrast([([(0, 1)], 1.0)])
    assert est == pytest.approx(sum(h for _, _, h in pairs) / len(pairs))
    assert var == pytest.approx(max(want, 0.0), rel=1e-10)
    assert 1 <= df


def test_query_clusters_reproduce_the_query_linearization_and_items_widen_it():
    q, s, y, g, item = _data(1, 200)
    plain = pairwise_accuracies(s, y, g, q)
    by_query = PairwiseClusters(q, q, s, g, y, 2)
    _, _, cr1, _ = by_query.contrast([([(0, 1)], 1.0)])
    row = plain.matrix[(plain.matrix["group_better"] == 0) & (plain.matrix["group_worse"] == 1)].iloc[0]
    assert cr1 == pytest.approx(row["se"] ** 2, rel=1e-10)
    assert (plain.gaps["variance_estimand"] == "query_clustered").all()
    two = pairwise_accuracies(s, y, g, q, clusters=(item, q))
    assert (two.gaps["variance_estimand"] == "two_way").all() and "df" in two.gaps
    assert two.gaps["effect_ci_high"].iloc[0] - two.gaps["effect_ci_low"].iloc[0] == pytest.approx(
        two.gaps["ci_high"].iloc[0] - two.gaps["ci_low"].iloc[0])
    assert np.isfinite(two.marginals["se"]).all() and np.isfinite(two.overall["se"]).all()


def test_aggregated_rows_give_the_row_level_two_way_result():
    """The pipeline's (query, group, item, score -> n_pos, n_neg) rows, two-way clustered by default."""
    import pandas as pd

    from fair_pipeline.audit.stats.pairwise import pairwise_from_counts

    q, s, y, g, item = _data(2, 150)
    s = np.round(s)  # several rows per (query, item, score)
    item = item % 8
    rows = pd.DataFrame({"q": q, "g": g, "item": item, "s": s, "y": y.astype(int)})
    agg = rows.groupby(["q", "g", "item", "s"])["y"].agg(n_pos="sum", n="count").reset_index()
    got = pairwise_from_counts(agg["q"], agg["g"], agg["s"], agg["n_pos"], agg["n"] - agg["n_pos"], np.array([0, 1]),
                               item_ids=agg["item"])
    want = pairwise_accuracies(s, y, g, q, clusters=(item, q))
    for table in ("matrix", "marginals", "overall", "gaps"):
        a, b = getattr(got, table), getattr(want, table)
        assert np.allclose(a["se"], b["se"], rtol=1e-10, equal_nan=True), table
        assert (a["variance_estimand"] == "two_way").all()
    assert np.allclose(got.gaps["df"], want.gaps["df"], rtol=1e-10)


def test_inside_sides_count_pairs_only_in_repeated_cells_and_equal_row_sides_there():
    rng = np.random.default_rng(12)
    n = 400
    cell, s = rng.integers(0, 300, n), np.round(rng.normal(size=n), 1)  # ~a third of the rows share a cell
    codes, y, w = rng.integers(0, 3, n), rng.random(n) < 0.4, rng.integers(1, 4, n).astype(float)
    rows, t, c = inside_sides(cell, s, codes, y, 3, w)
    want_t, want_c = row_sides(cell, s, codes, y, 3, w)
    repeated = np.bincount(cell)[cell] > 1
    np.testing.assert_array_equal(rows, np.flatnonzero(repeated))
    np.testing.assert_array_equal(t, want_t[rows] * w[rows, None])
    np.testing.assert_array_equal(c, want_c[rows] * w[rows, None])
    assert not want_t[~repeated].any() and t.sum() > 20  # a cell of one row pairs with nothing inside it
