"""Paired differences of cost + mu · D (selection/elicitation/paired_exposure.py): D's per-item influence totals
against a delete-one-item jackknife of D (plus the exposure each item displaces, which deleting rows cannot show),
the joined variance against a brute force over items, weight 0 against the rates-only paired difference, bad input,
and the interval's coverage by Monte Carlo over fresh item pools (benchmarks/exposure_paired_coverage.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks import exposure_paired_coverage as sim
from fair_pipeline.audit.exposure_offpolicy import reranked_positions
from fair_pipeline.audit.stats.exposure import displacement_coefficients, exposure_parity
from fair_pipeline.selection.elicitation.paired import candidate_parts, paired_summary
from fair_pipeline.audit.stats.small_sample import critical_value
from fair_pipeline.selection.elicitation.paired_exposure import (_JoinedParts, _root_scale_interval, disparity_totals,
                                                                exposure_weighted_cost, exposure_weighted_difference)


def _cells(logged: pd.DataFrame, ranked: np.ndarray, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(items, per item impressions by (group, ranked slot), per item clicks by (group, logged slot))."""
    items, item = np.unique(logged["item_id"], return_inverse=True)
    g = pd.Index(labels).get_indexer(logged["group"])
    n = np.zeros((items.size, len(labels), sim.SLOTS))
    y = np.zeros_like(n)
    np.add.at(n, (item, g, ranked - 1), 1.0)
    np.add.at(y, (item, g, logged["position"].to_numpy() - 1), logged["click"].to_numpy(dtype=float))
    return items, n, y


def _d(n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """D = 1/2 Σ_{u<v} (L_u - L_v)², L_g = log(Σ n w / Σ y / w), by its definition, for cell counts (..., K, J)."""
    w = sim.examination()
    l = np.log(n @ w) - np.log(y @ (1.0 / w))
    return 0.25 * ((l[..., :, None] - l[..., None, :]) ** 2).sum(axis=(-1, -2))


def _jackknife_totals(held: pd.DataFrame, logged: pd.DataFrame, name: str) -> tuple[pd.Series, pd.Series, float]:
    """(per item: cost - cost without the item's held-out rows; D - D without the item's logged rows, plus the
    exposure the item displaced, -Σ_g (dD/dL_g) d_g X_i with X_i = Σ (w - mean w) over its impressions; D)."""
    score, threshold = held[f"score_{name}"].to_numpy(), sim.THRESHOLDS[name]
    sel = (score >= threshold).astype(float)
    g = pd.Index(sim.LABELS).get_indexer(held["group"])
    items, item = np.unique(held["item_id"], return_inverse=True)
    sums = np.zeros((items.size, len(sim.LABELS), 4))  # per item and group: TP, P, TN, N
    p, q = held["n_pos"].to_numpy(dtype=float), held["n_neg"].to_numpy(dtype=float)
    for j, v in enumerate((p * sel, p, q * (1 - sel), q)):
        np.add.at(sums[:, :, j], (item, g), v)

    def cost(s):
        return float(sim.METRIC(np.column_stack([s[:, 0] / s[:, 1], s[:, 2] / s[:, 3]])))

    full = sums.sum(axis=0)
    rates = pd.Series([cost(full) - cost(full - sums[i]) for i in range(items.size)], index=items)
    ranked = reranked_positions(logged["request_id"], logged["position"], logged[f"score_{name}"])
    ids, n, y = _cells(logged, ranked, sim.LABELS)
    d_full = float(_d(n.sum(axis=0), y.sum(axis=0)))
    jack = d_full - _d(n.sum(axis=0)[None] - n, y.sum(axis=0)[None] - y)
    w = sim.examination()
    l = np.log(n.sum(axis=0) @ w) - np.log(y.sum(axis=0) @ (1.0 / w))
    c = l.size * l - l.sum()  # dD / dL_g
    d, mean_w = displacement_coefficients(n.sum(axis=0), y.sum(axis=0), w)
    displaced = -((n * (w - mean_w)).sum(axis=(1, 2))) * float(c @ d)
    return rates, pd.Series(jack + displaced, index=ids), d_full


@pytest.fixture(scope="module")
def replication():
    held, logged = sim.draw(np.random.default_rng(11), n_items=300, requests=1500)
    return held, logged, sim.totals(held, logged)


def test_disparity_item_totals_match_a_jackknife_of_d_plus_the_displaced_exposure(replication):
    held, logged, found = replication
    for name in sim.THRESHOLDS:
        ours = found[name][2].totals["item_id"]
        _, jack, value = _jackknife_totals(held, logged, name)
        jack = jack.reindex(ours.index)
        assert np.corrcoef(ours, jack)[0, 1] > 0.995
        # CR2 scales a total by 1 / sqrt(1 - h), the jackknife by about 1 / (1 - h): equal for small shares h
        assert float((ours**2).sum()) == pytest.approx(float((jack**2).sum()), rel=0.05)
        assert found[name][2].value == pytest.approx(value, rel=1e-12)


@pytest.fixture(scope="module")
def one_way(replication):
    """Both candidates' (cost, parts, DisparityTotals) with the exposure audit clustered by items only."""
    held, logged, _ = replication
    one_way = {}
    for name, threshold in sim.THRESHOLDS.items():
        ranked = reranked_positions(logged["request_id"], logged["position"], logged[f"score_{name}"])
        res = exposure_parity(logged["position"], logged["click"], logged["group"], sim.examination(),
                              clusters={"item_id": logged["item_id"]}, ranked_positions=ranked, reference="a",
                              keep_totals=True)
        cost, parts, _ = candidate_parts(sim.METRIC, held, held[f"score_{name}"], sim.LABELS, threshold=threshold)
        one_way[name] = (cost, parts, disparity_totals(res))
    return one_way


def test_joined_variance_is_the_item_clustered_sum_of_the_joined_jackknife_totals(replication, one_way):
    """One-way (items) audit: Var = Σ_i (R_A - R_W + mu (T_A - T_W))², items of both kinds of rows joined."""
    held, logged, _ = replication
    (ca, pa, da), (cw, pw, dw) = one_way["A"], one_way["W"]
    out = exposure_weighted_difference(ca, pa, da, cw, pw, dw, held, sim.LABELS, 3.0, clusters=held["item_id"])
    assert out.estimate == pytest.approx(ca - cw + 3.0 * (da.value - dw.value))
    (ra, ea, _), (rw, ew, _) = (_jackknife_totals(held, logged, n) for n in ("A", "W"))
    joined = (ra - rw).add(3.0 * (ea - ew), fill_value=0.0)
    assert out.se**2 == pytest.approx(float((joined**2).sum()), rel=0.06)
    # the items are shared: adding the two parts' variances as if independent gives another (here larger) answer
    apart = float(((ra - rw) ** 2).sum() + (3.0 * (ea - ew)).pow(2).sum())
    assert abs(apart - out.se**2) > 0.1 * out.se**2


def test_own_total_variance_is_the_item_clustered_sum_of_its_joined_jackknife_totals(replication, one_way):
    """A candidate's own cost + mu · D: Var = Σ_i (R_i + mu T_i)², its rates' and exposure's totals joined by
    item (not the sum of the two parts' variances: the items are shared)."""
    held, logged, _ = replication
    for name in sim.THRESHOLDS:
        cost, parts, disparity = one_way[name]
        own = exposure_weighted_cost(cost, parts, disparity, held, sim.LABELS, 3.0, clusters=held["item_id"])
        assert own.estimate == pytest.approx(cost + 3.0 * disparity.value)
        rates, exposure, _ = _jackknife_totals(held, logged, name)
        joined = rates.add(3.0 * exposure, fill_value=0.0)
        assert own.se**2 == pytest.approx(float((joined**2).sum()), rel=0.06)
        apart = float((rates**2).sum() + (3.0 * exposure).pow(2).sum())
        assert abs(apart - own.se**2) > 0.1 * own.se**2
        assert own.ci_high - own.ci_low > 2 * 1.96 * own.se  # Student t at the joined totals' effective items
    with pytest.raises(ValueError, match="positive"):
        exposure_weighted_cost(cost, parts, disparity, held, sim.LABELS, 0.0, clusters=held["item_id"])


def test_own_total_interval_is_the_root_scale_interval_squared_back():
    """Without a cost part, the own total's interval is cost + (Ŝ ± t SE(Ŝ))², Ŝ = sqrt(mu D̂) and
    SE(Ŝ) = SE(mu D̂) / (2 Ŝ): not the delta method's symmetric mu D̂ ± t SE (whose width grows with D̂)."""
    rng = np.random.default_rng(3)
    exposure = rng.normal(0.0, 0.001, 60)
    cost, weighted_d = 0.4, 0.05
    joined = _JoinedParts(cost + weighted_d, cost + weighted_d, 0.0, np.zeros(60), exposure, None, 0.0, 0.0, 30.0,
                          np.inf, 30.0, 60)
    delta = joined.summary(0.95)
    low, high = _root_scale_interval(joined, cost, weighted_d, delta, 0.95)
    root, se_root = np.sqrt(weighted_d), delta.se / (2 * np.sqrt(weighted_d))
    crit = float(critical_value(0.95, delta.df))
    assert low == pytest.approx(cost + (root - crit * se_root) ** 2, rel=1e-9)
    assert high == pytest.approx(cost + (root + crit * se_root) ** 2, rel=1e-9)
    assert high - delta.estimate > delta.estimate - low  # longer above: D is a square
    assert high - low == pytest.approx(delta.ci_high - delta.ci_low, rel=1e-9)  # 4 Ŝ t SE(Ŝ): the same width
    # D̂ = 0: no gradient, the delta method's interval
    assert _root_scale_interval(joined, cost, 0.0, delta, 0.95) == (delta.ci_low, delta.ci_high)


def test_own_total_interval_holds_its_values_and_only_them(replication, one_way):
    """The own total's interval is the set {T0 : |T̂ - T0| <= t SE(T0)}: its ends solve it with equality, values
    just inside satisfy it and just outside do not."""
    held, _, _ = replication
    cost, parts, disparity = one_way["A"]
    own = exposure_weighted_cost(cost, parts, disparity, held, sim.LABELS, 3.0, clusters=held["item_id"])
    joined = _JoinedParts.of(cost, parts, disparity, 0.0, np.zeros_like(parts), None, held, sim.LABELS, 3.0,
                             held["item_id"], 0.95)
    crit = float(critical_value(0.95, own.df))

    def excess(t0):
        k = 0.5 * (1 + np.sqrt(max(t0 - cost, 0.0) / (3.0 * disparity.value)))
        return abs(own.estimate - t0) - crit * np.sqrt(joined.variance(k))

    width = own.ci_high - own.ci_low
    for end, inward in ((own.ci_low, 1), (own.ci_high, -1)):
        assert abs(excess(end)) < 1e-9 * width
        assert excess(end + inward * 1e-3 * width) < 0 < excess(end - inward * 1e-3 * width)
    assert own.se ** 2 == pytest.approx(joined.variance(1.0))


def test_weight_zero_is_the_rates_only_paired_difference(replication):
    held, _, found = replication
    (ca, pa, da), (cw, pw, dw) = found["A"], found["W"]
    out = exposure_weighted_difference(ca, pa, da, cw, pw, dw, held, sim.LABELS, 0.0, clusters=held["item_id"])
    assert out == paired_summary(ca, pa, cw, pw, held, sim.LABELS, held["item_id"])


def test_bad_input_is_named(replication):
    held, _, found = replication
    (ca, pa, da), (cw, pw, dw) = found["A"], found["W"]
    with pytest.raises(ValueError, match="non-negative"):
        exposure_weighted_difference(ca, pa, da, cw, pw, dw, held, sim.LABELS, -1.0, clusters=held["item_id"])
    with pytest.raises(ValueError, match="same ids"):
        exposure_weighted_difference(ca, pa, da, cw, pw, dw, held, sim.LABELS, 1.0,
                                     clusters=held["item_id"].map(lambda i: f"item-{i}"))


@pytest.mark.slow
def test_paired_total_ci_covers_the_population_difference_over_fresh_item_pools():
    """150 fresh pools (items, their held-out rows and a log showing them): the joined interval of the total's
    difference covers the population value 91-99% of the time with SE / SD within [0.8, 1.2], and a candidate's
    own total's joined SE matches its spread; the printed lines also show the parts' variances added as if
    independent (the items are shared)."""
    raw = pd.DataFrame([row for seed in range(150) for row in sim.one_replication(5_000 + seed)])
    total, rates, own = sim.truth(150)
    table = sim.summary(raw, total, rates, own).set_index("interval")
    print(table.to_string())
    assert len(raw) >= 145
    joined = table.loc["paired total, joined by item (reported)"]
    assert 0.91 <= joined["coverage"] <= 0.99, table
    assert 0.8 <= joined["SE / SD"] <= 1.2, table
    # a candidate's own total: its interval on D's root scale covers near the nominal level, where the delta
    # method's symmetric one over-covers (D is a square: its SE grows with D̂)
    own = table.loc["A's own total, joined by item (reported)"]
    assert 0.9 <= own["coverage"] <= 0.99 and 0.8 <= own["SE / SD"] <= 1.2, table


def test_model_selection_ranking_gets_the_totals_paired_differences(replication):
    """`weigh_exposure` with the held-out parts: the loser's row is the joined paired difference to the winner."""
    from fair_pipeline.selection.exposure import HeldOut, weigh_exposure

    held, logged, found = replication
    exposure = pd.concat([sim.exposure_of(logged, name).pairs.assign(candidate=name) for name in found])
    ranking = pd.DataFrame({"rank": [1.0, 2.0], "model": ["A", "W"], "cost": [found["A"][0], found["W"][0]],
                            "cost_se": 0.01, "ci_low": np.nan, "ci_high": np.nan, "diff_vs_winner": np.nan,
                            "diff_se": np.nan, "diff_ci_low": np.nan, "diff_ci_high": np.nan, "diff_p": np.nan,
                            "diff_df": np.nan, "estimable": True, "reason": ""})
    parts = {name: (cost, p, np.nan) for name, (cost, p, _) in found.items()}
    disparities = {name: d for name, (_, _, d) in found.items()}
    out = weigh_exposure(ranking, exposure, 5.0, held_out=HeldOut(held, sim.LABELS, parts, disparities))
    winner, loser = out["model"].iloc[0], out["model"].iloc[1]
    d = exposure_weighted_difference(*found[loser], *found[winner], held, sim.LABELS, 5.0,
                                     clusters=held["item_id"].to_numpy())
    row = out.set_index("model").loc[loser]
    assert row["diff_vs_winner"] == pytest.approx(d.estimate) and d.estimate > 0
    assert (row["diff_se"], row["diff_ci_low"], row["diff_ci_high"], row["diff_df"]) == pytest.approx(
        (d.se, d.ci_low, d.ci_high, d.df))
    assert np.isnan(out.set_index("model").loc[winner, "diff_se"])
    for name in found:  # each own CI: rates and exposure joined by item
        own = exposure_weighted_cost(*found[name], held, sim.LABELS, 5.0, clusters=held["item_id"].to_numpy())
        mine = out.set_index("model").loc[name]
        assert (mine["cost_se"], mine["cost_se_clustered"]) == pytest.approx((own.se, own.se))
        assert (mine["ci_high"] - mine["ci_low"]) == pytest.approx(own.ci_high - own.ci_low)
        assert mine["cost"] == pytest.approx(own.estimate)
    without = weigh_exposure(ranking, exposure, 5.0)
    assert without["diff_se"].isna().all()
