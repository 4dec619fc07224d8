"""exposure_parity's df: the effective number of clusters with the lone clicks' fourth-power mass taken out,
bounded by the smallest group's clusters - 1, against a brute force from finite-difference cluster totals and
click-by-click merit shares, and known answers of `effective_df`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import exposure_parity
from fair_pipeline.audit.stats.exposure import ClusterSums, fourth_sums
from fair_pipeline.audit.stats.exposure_df import effective_df

W = 1.0 / np.log2(1.0 + np.arange(1, 6))
GROUPS = np.array(["big", "mid", "tiny"], dtype=object)


def _log(seed: int, n: int = 900) -> pd.DataFrame:
    """Few items with skewed popularity, each item in one group; the tiny group has 4 items."""
    rng = np.random.default_rng(seed)
    item_group = np.repeat([0, 1, 2], [10, 6, 4])
    popularity = rng.pareto(1.3, item_group.size) + 1.0
    item = rng.choice(item_group.size, size=n, p=popularity / popularity.sum())
    position = rng.integers(1, 6, n)
    rel = np.array([0.5, 0.35, 0.6])[item_group[item]]
    return pd.DataFrame({"group": GROUPS[item_group[item]], "item": item, "request": rng.integers(0, 50, n),
                         "position": position,
                         "click": (rng.random(n) < W[position - 1] * rel).astype(int)})


def _log_ratios(d: pd.DataFrame, mult: np.ndarray) -> np.ndarray:
    w = W[d["position"].to_numpy() - 1]
    click = d["click"].to_numpy()
    return np.array([np.log((mult * w)[d["group"].to_numpy() == g].sum())
                     - np.log((mult * click / w)[d["group"].to_numpy() == g].sum()) for g in GROUPS])


def _brute_totals(d: pd.DataFrame, key: str, eps: float = 1e-7) -> tuple[np.ndarray, np.ndarray]:
    """(clusters × groups CR2 totals by finite differences, clusters × groups presence): up-weight one cluster,
    divide by sqrt(1 - its merit share), subtract the exposure it displaced from each group."""
    w = W[d["position"].to_numpy() - 1]
    merit = d["click"].to_numpy() / w
    base = _log_ratios(d, np.ones(len(d)))
    keys, groups = d[key].to_numpy(), d["group"].to_numpy()
    rows, present = [], []
    for g in np.unique(keys):
        mine = keys == g
        fd = (_log_ratios(d, np.where(mine, 1.0 + eps, 1.0)) - base) / eps
        share = np.array([merit[mine & (groups == c)].sum() / merit[groups == c].sum() for c in GROUPS])
        displaced = np.array([(w[mine] - w.mean()).sum() * (groups == c).mean() / w[groups == c].sum()
                              for c in GROUPS])
        rows.append(fd / np.sqrt(1.0 - share) - displaced)
        present.append([np.any(mine & (groups == c)) for c in GROUPS])
    return np.array(rows), np.array(present)


def _brute_lone(d: pd.DataFrame) -> np.ndarray:
    """Per group: Σ over its clicks, one at a time, of the click's share of the group's Σ click / w, to the 4th."""
    out = []
    for c in GROUPS:
        clicked = d[(d["group"] == c) & (d["click"] == 1)]
        inverse = 1.0 / W[clicked["position"].to_numpy() - 1]
        out.append(sum((x / inverse.sum()) ** 4 for x in inverse))
    return np.array(out)


def _brute_df(dims, lam: np.ndarray, lone: np.ndarray) -> float:
    removed = float(np.sum(lam**4 * lone))
    whole, out, smallest = [], [], []
    for totals, present in dims:
        u = totals @ lam
        counts = present[:, lam != 0].sum(axis=0)
        cap = counts.sum() - 1.0
        s2, s4 = np.sum(u**2), np.sum(u**4)
        whole.append(max(min(s2**2 / s4, cap), 1.0))
        out.append(max(min(s2**2 / (s4 - removed), cap), 1.0) if s4 > removed else cap)
        smallest.append(counts.min() - 1.0)
    return min(min(out), max(min(whole), min(smallest)))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("keys", [("item",), ("item", "request")])
def test_df_equals_the_brute_force(seed, keys):
    d = _log(seed)
    res = exposure_parity(d["position"], d["click"], d["group"], W, clusters={k: d[k] for k in keys}, pairs="all",
                          min_clicks=3)
    dims = [_brute_totals(d, k) for k in keys]
    lone = _brute_lone(d)
    eye = dict(zip(GROUPS, np.eye(GROUPS.size)))
    for row in res.per_group.itertuples():
        assert row.df == pytest.approx(_brute_df(dims, eye[row.group], lone), rel=1e-4), row.group
    for row in res.pairs.itertuples():
        assert row.df == pytest.approx(_brute_df(dims, eye[row.group] - eye[row.reference], lone), rel=1e-4)


def _sums(totals: np.ndarray, per_group) -> ClusterSums:
    return ClusterSums("item", totals.T @ totals, totals.shape[0], np.asarray(per_group), fourth_sums(totals),
                       leverage_adjusted=True)


def test_effective_df_known_answers():
    rng = np.random.default_rng(0)
    t = rng.standard_t(3, size=(30, 3))
    lam = np.array([1.0, 0.0, -1.0])
    u = t @ lam
    s2, s4 = u @ u, np.sum(u**4)
    whole = s2 * s2 / s4
    assert 3 < whole < 15
    dims = [_sums(t, [30, 30, 30])]
    assert effective_df(dims, lam, 1.0, 0.0, None) == pytest.approx(whole, rel=1e-12)
    half = np.array([s4 / 4, 5.0, s4 / 4])  # half of Σ U⁴ is lone clicks: twice the df
    assert effective_df(dims, lam, 1.0, 0.0, None, half) == pytest.approx(2 * whole, rel=1e-12)
    assert effective_df(dims, lam, 1.0, 0.0, None, np.array([s4, 0.0, 0.0])) == 29.0  # all of it: the bound (30 - 1)
    # the smallest group has 4 clusters: the df may rise only to 3 (here the whole-Σ U⁴ df is above it: stays)
    four = [_sums(t, [30, 30, 4])]
    assert effective_df(four, lam, 1.0, 0.0, None, half) == pytest.approx(max(min(whole, 33.0), 3.0), rel=1e-12)
    twelve = [_sums(t, [30, 30, 12])]
    assert effective_df(twelve, lam, 1.0, 0.0, None, half) == pytest.approx(min(2 * whole, 11.0), rel=1e-12)
    # an own value: its bound is its own cap
    own = np.array([1.0, 0.0, 0.0])
    s2a, s4a = t[:, 0] @ t[:, 0], np.sum(t[:, 0] ** 4)
    assert effective_df(twelve, own, 1.0, 0.0, None, np.array([s4a / 2, 0.0, 0.0])) == pytest.approx(
        min(2 * s2a**2 / s4a, 29.0), rel=1e-12)
    # two dimensions: the smaller one's
    two = [_sums(t, [30, 30, 30]), _sums(t[:5], [5, 5, 5]), _sums(t[:5], [5, 5, 5])]
    u5 = u[:5]
    assert effective_df(two, lam, 1.0, 0.0, None) == pytest.approx(
        min(whole, (u5 @ u5) ** 2 / np.sum(u5**4), 9.0), rel=1e-12)


def test_the_lone_click_df_is_never_below_the_whole_fourth_one_and_rises_where_clicks_are_spread():
    rises = 0
    for seed in range(4, 9):
        d = _log(seed)
        res = exposure_parity(d["position"], d["click"], d["group"], W, clusters={"item": d["item"]},
                              pairs="all", min_clicks=3)
        dims = [_brute_totals(d, "item")]
        eye = dict(zip(GROUPS, np.eye(GROUPS.size)))
        for row in res.pairs.itertuples():
            lam = eye[row.group] - eye[row.reference]
            whole = _brute_df(dims, lam, np.zeros(3))
            assert row.df >= whole * (1 - 1e-4)
            rises += row.df > whole * 1.1
    assert rises >= 2
