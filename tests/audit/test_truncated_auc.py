"""truncated_auc: brute force, the ROC slides' 20-row example, DeLong, sklearn, aggregates, paths."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from fair_pipeline.audit import truncated_auc
from fair_pipeline.audit.stats.blocks import build_grid, positive_positions
from fair_pipeline.audit.stats.sweep import SPLIT_BLOCKS, RocSweep, products
from fair_pipeline.audit.stats.sweep_no_ties import sweep_no_cross_ties
from tests.audit import bruteforce as bf

ALPHAS = [0.01, 0.05, 0.1, 0.2, 0.33, 0.5, 0.77, 1.0]


def _sample(rng, ties: bool):
    N = int(rng.integers(8, 120))
    y = rng.random(N) < rng.uniform(0.2, 0.6)
    y[:2], y[2:4] = True, False
    s = rng.normal(size=N) + 0.8 * y
    if ties:
        s = np.round(s * 2) / 2  # a handful of distinct values: many pos/neg ties
    return s, y


@pytest.mark.parametrize("ties", [False, True])
def test_matches_bruteforce_auc_and_variance(ties):
    rng = np.random.default_rng(11 + ties)
    for _ in range(40):
        s, y = _sample(rng, ties)
        t = truncated_auc(s, y, ALPHAS)
        for a, I, v in zip(t["cutoff"], t["auc"], t["variance"]):
            I_bf, v_bf = bf.truncated(s, y, a)
            assert I == pytest.approx(I_bf, abs=1e-12)
            assert v == pytest.approx(v_bf, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("ties", [False, True])
def test_full_auc_is_mann_whitney_with_delong_variance(ties):
    rng = np.random.default_rng(3 + ties)
    for _ in range(30):
        s, y = _sample(rng, ties)
        row = truncated_auc(s, y, [1.0]).iloc[0]
        assert row["auc"] == pytest.approx(bf.auc(s[y], s[~y]), abs=1e-12)
        assert row["variance"] == pytest.approx(bf.delong_var(s[y], s[~y]), rel=1e-10)
        assert row["mcclish"] == row["auc"] == row["auc_normalized"]


def test_mcclish_equals_sklearn_max_fpr_without_ties():
    rng = np.random.default_rng(5)
    for _ in range(30):
        s, y = _sample(rng, ties=False)
        t = truncated_auc(s, y, ALPHAS[:-1])
        for a, mc in zip(t["cutoff"], t["mcclish"]):
            assert mc == pytest.approx(roc_auc_score(y, s, max_fpr=a), abs=1e-12)
        assert np.allclose(t["auc_normalized"], t["auc"] / t["cutoff"])


def test_mcclish_vs_sklearn_with_ties_differs_only_inside_a_tied_block():
    """sklearn interpolates the ROC linearly inside a tied block; we give each tied negative
    half credit. Identical at block edges; inside a block |dI| <= (block width) / 8."""
    rng = np.random.default_rng(6)
    for _ in range(30):
        s, y = _sample(rng, ties=True)
        n = int((~y).sum())
        g = build_grid(s, y)
        edges = np.cumsum(g.neg[:, 0])[:-1] / n
        edges = edges[(edges > 0) & (edges < 1)]
        for a in np.unique(edges):
            mc = truncated_auc(s, y, [a])["mcclish"].iloc[0]
            assert mc == pytest.approx(roc_auc_score(y, s, max_fpr=a), abs=1e-12)
        width = g.neg[:, 0].max() / n
        for a in (0.1, 0.3, 0.5):
            I = truncated_auc(s, y, [a])["auc"].iloc[0]
            I_sk = (roc_auc_score(y, s, max_fpr=a) - 0.5) * 2 * (a - a * a / 2) + a * a / 2
            assert abs(I - I_sk) <= width / 8 + 1e-12


def test_roc_slides_twenty_row_example():
    """Rakotomalala's table: scores 1, .95, ..., .05; classes + + + - + - - + - - - + - ... -."""
    scores = np.round(np.arange(20, 0, -1) * 0.05, 2)
    labels = np.zeros(20, dtype=int)
    labels[[0, 1, 2, 4, 7, 11]] = 1  # individuals 1, 2, 3, 5, 8, 12
    t = truncated_auc(scores, labels, [0.2, 0.5, 1.0]).set_index("cutoff")
    assert t.loc[1.0, "auc"] == pytest.approx(74 / 84, abs=1e-15)  # slides: AUC = 0.881
    assert round(t.loc[1.0, "auc"], 3) == 0.881
    # FPR 0.2 = 2.8 negatives: TPR above negatives 1..3 is 3/6, 4/6, 4/6
    assert t.loc[0.2, "auc"] == pytest.approx((3 + 4 + 0.8 * 4) / 84, abs=1e-15)
    assert t.loc[0.2, "roc_at_cutoff"] == pytest.approx(4 / 6)
    assert t.loc[0.5, "auc"] == pytest.approx((3 + 4 + 4 + 5 + 5 + 5 + 6) / 84, abs=1e-15)
    assert (t["n_pos"] == 6).all() and (t["n_neg"] == 14).all()
    # the slides' (TFP, TVP) table: highest TVP reached at each TFP = k/14
    fpr = np.arange(15) / 14
    sweep = RocSweep(fpr, [6], [14])
    g = build_grid(scores.astype(float), labels.astype(bool))
    sweep.update(g.pos, g.neg)
    tvp = sweep.result()["tpr_interp"][0]
    expected = [3, 4, 4, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6]
    assert np.allclose(tvp, np.array(expected) / 6)


def test_aggregates_give_identical_numbers():
    rng = np.random.default_rng(8)
    for ties in (False, True):
        s, y = _sample(rng, ties)
        s = np.r_[s, rng.normal(size=3000)]
        y = np.r_[y, rng.random(3000) < 0.3]
        df = pd.DataFrame({"score": s, "y": y.astype(int)})
        agg = df.groupby("score")["y"].agg(n_pos="sum", n="count").reset_index()
        agg["n_neg"] = agg["n"] - agg["n_pos"]
        # split every aggregate row in two and shuffle: the table need not be unique or sorted
        half = agg.assign(n_pos=agg.n_pos // 2, n_neg=agg.n_neg // 2)
        rest = agg.assign(n_pos=agg.n_pos - half.n_pos, n_neg=agg.n_neg - half.n_neg)
        agg2 = pd.concat([half, rest]).sample(frac=1.0, random_state=1)
        a = truncated_auc(s, y, ALPHAS)
        b = truncated_auc(aggregates=agg2[["score", "n_pos", "n_neg"]], cutoffs=ALPHAS)
        assert (a["variance_estimand"] == b["variance_estimand"]).all()
        numeric = a.columns.drop("variance_estimand")
        diff = np.abs(a[numeric].to_numpy(float) - b[numeric].to_numpy(float))
        assert np.nanmax(diff) <= 1e-12


def test_streamed_chunks_equal_one_pass():
    rng = np.random.default_rng(9)
    s = np.round(rng.normal(size=5000), 2)
    y = rng.random(5000) < 0.3
    g = build_grid(s, y)
    m, n = y.sum(), (~y).sum()
    whole = RocSweep(ALPHAS, [m], [n])
    whole.update(g.pos, g.neg)
    parts = RocSweep(ALPHAS, [m], [n])
    cuts = np.sort(rng.choice(g.pos.shape[0], 7, replace=False))
    for p, q in zip(np.split(g.pos, cuts), np.split(g.neg, cuts)):
        parts.update(p, q)
    for key in ("auc", "variance", "roc_at_cutoff"):
        assert np.allclose(whole.result()[key], parts.result()[key], rtol=0, atol=1e-12)


def test_curve_only_cutoffs_keep_their_curve_heights_and_leave_the_others_unchanged():
    rng = np.random.default_rng(12)
    s = np.round(rng.normal(size=4000), 2)  # ties, so curve points fall inside tied blocks too
    y = rng.random(4000) < 0.3
    g = build_grid(s, y)
    alphas = np.unique(np.r_[ALPHAS, np.linspace(0, 1, 101)])
    curve_only = ~np.isin(alphas, ALPHAS)
    full = RocSweep(alphas, [y.sum()], [(~y).sum()])
    light = RocSweep(alphas, [y.sum()], [(~y).sum()], curve_only=curve_only)
    for p, q in zip(np.split(g.pos, [300, 301, 900]), np.split(g.neg, [300, 301, 900])):
        full.update(p, q)
        light.update(p, q)
    want, got = full.result(), light.result()
    for key in ("tpr_interp", "roc_at_cutoff"):
        np.testing.assert_array_equal(got[key], want[key])
    for key in ("auc", "variance"):
        np.testing.assert_allclose(got[key][:, ~curve_only], want[key][:, ~curve_only], rtol=0, atol=1e-15)
        assert np.isnan(got[key][:, curve_only]).all()


def test_no_tie_fast_path_equals_block_sweep():
    rng = np.random.default_rng(10)
    s = rng.normal(size=20000)
    y = rng.random(20000) < 0.25
    fast = sweep_no_cross_ties(positive_positions(s, y), s.size, ALPHAS)
    g = build_grid(s, y)
    sweep = RocSweep(ALPHAS, [y.sum()], [(~y).sum()])
    sweep.update(g.pos, g.neg)
    slow = sweep.result()
    for key in ("auc", "variance", "roc_at_cutoff", "var_neg_term", "var_pos_term"):
        assert np.allclose(fast[key], slow[key], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("transform", [
    lambda s: s,  # mixed signs, narrow: packed sort with sign fix-up
    lambda s: np.abs(s),  # non-negative: raw IEEE bits
    lambda s: -np.abs(s) * 1e-300,  # negative, tiny
    lambda s: s * 1e300,  # key range too wide to pack: argsort fallback
    lambda s: np.where(np.abs(s) < 0.3, 0.0, s) * np.where(np.arange(s.size) % 2, 1.0, -1.0),
])
def test_score_encodings_do_not_change_results(transform):
    """Order-preserving integer keys must keep order and ties (incl. -0.0 == +0.0)."""
    rng = np.random.default_rng(12)
    base = rng.normal(size=400)
    y = rng.random(400) < 0.4
    s = transform(base)
    t = truncated_auc(s, y, ALPHAS)
    for a, I, v in zip(t["cutoff"], t["auc"], t["variance"]):
        I_bf, v_bf = bf.truncated(s, y, a)
        assert I == pytest.approx(I_bf, abs=1e-12)
        assert v == pytest.approx(v_bf, rel=1e-9)


def test_negative_zero_ties_positive_zero():
    s = np.array([0.0, -0.0, 1.0, -1.0, 0.0, -0.0])
    y = np.array([1, 0, 1, 0, 0, 1])
    row = truncated_auc(s, y, [1.0]).iloc[0]
    assert row["auc"] == pytest.approx(bf.auc(s[y == 1], s[y == 0]))


def test_one_ulp_apart_across_classes_falls_back_to_exact_blocks():
    """Mixed-sign scores drop the key's last bit for the label: 0.5 and the next double up share
    a key, which looks like a cross-class tie; the exact block path must then take over."""
    up = np.nextafter(0.5, 1.0)
    s = np.array([0.5, up, -1.0, 0.2, 0.9, -0.4, up, 0.5, -2.0, 1.5])
    y = np.array([1, 0, 0, 1, 1, 0, 0, 1, 0, 1], dtype=bool)
    assert positive_positions(s, y) is None
    assert positive_positions(np.abs(s), y) is not None  # non-negative scores keep every bit
    t = truncated_auc(s, y, ALPHAS)
    for a, I, v in zip(t["cutoff"], t["auc"], t["variance"]):
        I_bf, v_bf = bf.truncated(s, y, a)
        assert I == pytest.approx(I_bf, abs=1e-12)
        assert v == pytest.approx(v_bf, rel=1e-9)
    assert t["auc"].iloc[-1] == pytest.approx(bf.auc(s[y], s[~y]))  # 0.5 beats 0.5+ulp: no tie


def _assert_matches_brute_force(s, y):
    t = truncated_auc(s, y, ALPHAS)
    for a, I, v in zip(t["cutoff"], t["auc"], t["variance"]):
        I_bf, v_bf = bf.truncated(s, y, a)
        assert I == pytest.approx(I_bf, abs=1e-12)
        assert v == pytest.approx(v_bf, rel=1e-9)


@pytest.mark.parametrize("negative", [-5e-324, -0.0])
@pytest.mark.parametrize("positive", [0.0, -0.0, 5e-324])
def test_ties_at_zero_are_found_whatever_the_sign_bits(negative, positive):
    """Mixed-sign scores are sorted as doubles, where -0.0 == +0.0 and the smallest denormals merge into
    zero once the label takes their last bit: a positive and a negative there must not be split."""
    rng = np.random.default_rng(21)
    s = np.r_[rng.normal(size=30), negative, positive, -0.0, 0.0]
    y = np.r_[rng.random(30) < 0.5, False, True, False, True]
    y[:2], y[2:4] = True, False
    if (negative == 0.0) and (positive == 0.0):  # equal values: a real tie needs half credit
        assert positive_positions(s, y) is None
    _assert_matches_brute_force(s, y)


def test_ties_below_zero_are_found():
    """For negative scores the positive's key sorts below the negative's (further from zero)."""
    s = np.array([-0.7, -0.7, -1.2, -0.3, -2.0, 0.4, -1.2, 0.9])
    y = np.array([1, 0, 0, 1, 0, 1, 1, 0], dtype=bool)
    assert positive_positions(s, y) is None
    distinct = s - np.arange(s.size) * 1e-3
    assert positive_positions(distinct, y) is not None
    np.testing.assert_array_equal(positive_positions(distinct, y), np.flatnonzero(y[np.argsort(distinct)]))
    _assert_matches_brute_force(s, y)


@pytest.mark.parametrize("top", [1.0, np.nextafter(1.5, 0.0), 1.5, 7.0])
def test_non_negative_keys_are_exact_below_and_above_one_and_a_half(top):
    """Probabilities (< 1.5) are sorted as doubles, larger non-negative scores as integers: both keep
    every bit, so scores one ulp apart in different classes are not ties."""
    rng = np.random.default_rng(22)
    s = np.r_[rng.uniform(0.0, top, 50), top, np.nextafter(top, 0.0), 0.0, 5e-324]
    y = np.r_[rng.random(50) < 0.4, True, False, False, True]
    y[:2], y[2:4] = True, False
    positions = positive_positions(s, y)
    assert positions is not None
    np.testing.assert_array_equal(positions, np.flatnonzero(y[np.argsort(s, kind="stable")]))
    _assert_matches_brute_force(s, y)


@pytest.mark.parametrize("counts", [np.array([[0.0, 1, 3, 0, 2], [5, 0, 0, 1, 0]]),  # whole: int64 running sums
                                    np.array([[0.5, 1, 2.25, 0, 1], [2.5, -0.5, 0, 1, 0]]),  # fractions: float
                                    np.array([[2.0**62, 2.0**62, 1, 0, 0], [1, 0, 0, 0, 0]])])  # beyond int64
@pytest.mark.parametrize("start", [np.array([0.0, 0.0]), np.array([7.0, 2.0**40]), np.array([0.5, 3.0]),
                                   np.array([2.0**53, 1.0])])  # whole, fractional, beyond the exact integers
def test_cumulate_equals_cumsum_for_whole_fractional_and_huge_counts(counts, start):
    from fair_pipeline.audit.stats.sweep import cumulate

    out = np.empty_like(counts)
    assert np.array_equal(cumulate(counts, start, out), start[:, None] + np.cumsum(counts, axis=1))


@pytest.mark.parametrize("rows_a, rows_b", [(1, 1), (1, 3), (3, 1), (2, 3), (3, 3), (3, 4), (5, 2), (4, 4)])
def test_products_of_odd_row_counts_equal_the_plain_product(rows_a, rows_b):
    """`products` splits an odd row off gemm past SPLIT_BLOCKS blocks: every entry still sums all the blocks."""
    rng = np.random.default_rng(rows_a * 10 + rows_b)
    a, b = rng.random((rows_a, 2 * SPLIT_BLOCKS)), rng.random((rows_b, 2 * SPLIT_BLOCKS))
    brute = np.array([[sum(x * y for x, y in zip(u.tolist(), v.tolist())) for v in b] for u in a])
    assert products(a, b).shape == (rows_a, rows_b)
    np.testing.assert_allclose(products(a, b), brute, rtol=1e-12)
    np.testing.assert_allclose(products(a[:, :100], b[:, :100]), a[:, :100] @ b[:, :100].T, rtol=1e-12)
