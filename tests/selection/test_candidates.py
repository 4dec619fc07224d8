"""selection.candidates.ranker_weighted_sums: one scan for every ranker gives the EO fit's sufficient statistic
of one query per ranker.

The reference is the per-ranker path the one pass replaced (one join of every production impression with the
items per ranker, counted per group x position x score bin, then weighted by 1 / w_position in numpy by
`weighted_positives`); the one pass applies the weights in SQL and sums over positions, so counts and distinct
scores agree exactly and the weighted sums to rounding (1e-12). The warehouse has what the one pass must not get
wrong: rankers with different windows and features, impressions outside every window and of other policies, NULL
groups, items missing from the catalogue, a NULL feature, and repeated (item, position) cells.
"""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.eo.aggregate import EOInputError, aggregate_weighted_sums, weighted_positives
from fair_pipeline.selection import candidates as sc
from fair_pipeline.selection.candidates import Ranker, SelectionInputError

DAY = dt.date(2026, 1, 1)
WIDTH = 0.05
KEYS = ["group_id", "score_value"]
WEIGHTS = pd.DataFrame({"position": np.arange(1, 6), "weight": [1.0, 0.7, 0.45, 0.3, 0.2]})


def _warehouse(rows: int = 20_000, seed: int = 3) -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(seed)
    n_items = 300
    items = pd.DataFrame({"item_id": [f"i{k}" for k in range(n_items)],
                          "f0": rng.normal(size=n_items), "f1": rng.normal(size=n_items),
                          "f2": rng.integers(0, 5, n_items).astype(float)})
    items.loc[7, "f1"] = np.nan  # a NULL score for the rankers using f1
    log = pd.DataFrame({
        "partition_date": [DAY + dt.timedelta(days=int(d)) for d in rng.integers(0, 6, rows)],
        "policy": rng.choice(["production", "shuffle"], rows, p=[0.85, 0.15]),
        "item_id": [f"i{k}" for k in rng.integers(0, n_items + 20, rows)],  # 20 ids not in the catalogue
        "group_id": rng.choice(np.array(["a", "b", None], dtype=object), rows, p=[0.5, 0.45, 0.05]),
        "position": rng.integers(1, 6, rows).astype(np.int32),
        "click": rng.integers(0, 2, rows).astype(np.int32),
    })
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging")
    con.register("_items", items)
    con.register("_log", log)
    con.execute("CREATE TABLE staging.stg_items AS SELECT * FROM _items")
    con.execute("CREATE TABLE staging.stg_observational_impressions AS SELECT * FROM _log")
    return con


def _ranker(name: str, features, coef, intercept, first: int, last: int) -> Ranker:
    return Ranker(name, 0.0, tuple(features), np.array(coef, dtype=np.float64), float(intercept),
                  DAY + dt.timedelta(days=first), DAY + dt.timedelta(days=last), None)


def _one_query_per_ranker(con, ranker: Ranker, bin_width: float) -> pd.DataFrame:
    """The replaced path: the ranker's score per impression row, one join of the whole window per ranker."""
    terms = " + ".join(f'i."{f}" * $c{k}' for k, f in enumerate(ranker.features))
    params = {f"c{k}": float(c) for k, c in enumerate(ranker.coef)}
    params.update(intercept=ranker.intercept, width=float(bin_width), first=ranker.window_start,
                  last=ranker.window_end, unknown_group="<unknown>")
    return con.execute(
        f"""
        SELECT coalesce(o.group_id, $unknown_group) AS group_id, o.position,
               (floor(({terms} + $intercept) / $width) + 0.5) * $width AS score_value,
               CAST(count(*) AS BIGINT) AS impressions, CAST(sum(o.click) AS BIGINT) AS clicks
        FROM staging.stg_observational_impressions o JOIN staging.stg_items i ON i.item_id = o.item_id
        WHERE o.partition_date BETWEEN $first AND $last AND o.policy = 'production'
        GROUP BY ALL
        """, params).df()


def _sums(con, rankers: list[Ranker], weights: pd.DataFrame = WEIGHTS) -> list[pd.DataFrame]:
    """The one-pass tables in ranker order (the generator yields them window by window)."""
    found = {index: (table, problem) for index, table, problem in sc.ranker_weighted_sums(con, rankers, WIDTH, weights)}
    assert sorted(found) == list(range(len(rankers)))
    assert all(problem == "" for _, problem in found.values())
    return [found[k][0] for k in range(len(rankers))]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(KEYS, na_position="first").reset_index(drop=True)


def _assert_same_statistic(got: pd.DataFrame, counts: pd.DataFrame, weights: pd.DataFrame = WEIGHTS) -> None:
    """`got` (weighted sums over positions) carries the statistic `weighted_positives` makes of `counts`."""
    expected, found = weighted_positives(counts, weights), aggregate_weighted_sums(got)
    assert found.n_positives == expected.n_positives
    for group in expected.positive_values:
        np.testing.assert_array_equal(found.positive_values[group], expected.positive_values[group])
        np.testing.assert_allclose(found.positive_weights[group], expected.positive_weights[group], rtol=1e-12)
        assert found.positive_weight_squares[group] == pytest.approx(expected.positive_weight_squares[group], rel=1e-12)
    np.testing.assert_array_equal(found.reference_values, expected.reference_values)
    np.testing.assert_array_equal(found.reference_counts, expected.reference_counts)


RANKERS = [
    _ranker("lam=0", ["f0", "f1"], [1.0, -0.5], 0.1, 0, 3),
    _ranker("lam=1", ["f0", "f1"], [0.7, -0.2], -0.3, 0, 3),
    _ranker("lam=2", ["f0", "f1", "f2"], [0.3, 0.1, 0.25], 0.0, 0, 3),
    _ranker("other_window", ["f2", "f0"], [0.5, 2.0], 1.0, 2, 5),
    _ranker("empty_window", ["f0"], [1.0], 0.0, 10, 12),
]


def test_one_pass_equals_one_query_per_ranker():
    con = _warehouse()
    one_pass = _sums(con, RANKERS)
    assert len(one_pass) == len(RANKERS)
    # the NULL feature reaches the f1 rankers as a NULL score bin, as it did per ranker (the fit then refuses it)
    assert one_pass[0]["score_value"].isna().any() and not one_pass[3]["score_value"].isna().any()
    with pytest.raises(EOInputError, match="NULL/NaN or infinite scores"):
        aggregate_weighted_sums(one_pass[0])
    for ranker, got in zip(RANKERS, one_pass):
        assert list(got.columns) == ["group_id", "score_value", "impressions", "clicks", "weighted_clicks",
                                     "weighted_click_squares"]
        counts = _one_query_per_ranker(con, ranker, WIDTH)
        # counts per group and score bin, exactly
        summed = counts.groupby(KEYS, dropna=False)[["impressions", "clicks"]].sum().reset_index()
        pd.testing.assert_frame_equal(_sorted(got)[KEYS + ["impressions", "clicks"]], _sorted(summed),
                                      check_exact=True, check_dtype=False)
        known = counts["score_value"].notna()
        if known.any():
            _assert_same_statistic(got[got["score_value"].notna()], counts[known])
    assert one_pass[-1].empty
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone() == (0,)  # cells dropped


def test_a_clicked_position_without_a_weight_is_the_problem_of_every_ranker_of_the_window():
    con = _warehouse()
    weights = WEIGHTS.assign(weight=[1.0, 0.7, np.nan, 0.3, 0.2])
    found = list(sc.ranker_weighted_sums(con, RANKERS[:2], WIDTH, weights))
    assert [index for index, _, _ in found] == [0, 1]
    for _, table, problem in found:
        assert problem.startswith("EO re-fit failed: position weights must be finite and > 0")
        assert "position: weight {3: nan}" in problem and not table.empty
    with pytest.raises(EOInputError, match=r"position: weight \{3: nan\}"):
        counts = _one_query_per_ranker(con, RANKERS[1], WIDTH)
        weighted_positives(counts[counts["score_value"].notna()], weights)  # the per-ranker path says the same


def test_counts_match_a_count_of_the_raw_rows():
    """Totals per ranker: every production impression of a catalogued item in the window, counted in pandas."""
    con = _warehouse()
    log = con.execute("SELECT * FROM staging.stg_observational_impressions").df()
    catalogue = set(con.execute("SELECT item_id FROM staging.stg_items").df()["item_id"])
    for ranker, got in zip(RANKERS, _sums(con, RANKERS)):
        dates = pd.to_datetime(log["partition_date"]).dt.date
        kept = log[(log["policy"] == "production") & log["item_id"].isin(catalogue)
                   & (dates >= ranker.window_start) & (dates <= ranker.window_end)]
        assert int(got["impressions"].sum()) == len(kept)
        assert int(got["clicks"].sum()) == int(kept["click"].sum())
        by_group = kept.assign(g=kept["group_id"].fillna("<unknown>")).groupby("g")["click"].sum()
        assert got.groupby("group_id")["clicks"].sum().to_dict() == by_group.to_dict()
        weight = kept["position"].map(dict(zip(WEIGHTS["position"], WEIGHTS["weight"])))
        assert got["weighted_clicks"].sum() == pytest.approx((kept["click"] / weight).sum(), rel=1e-12)


def test_one_pass_is_the_same_for_any_ranker_subset():
    """A ranker's table does not depend on which other rankers share its pass."""
    con = _warehouse()
    together = _sums(con, RANKERS[:3])
    for ranker, got in zip(RANKERS[:3], together):
        pd.testing.assert_frame_equal(_sorted(got), _sorted(_sums(con, [ranker])[0]), check_exact=True)


def test_unknown_feature_names_the_ranker_and_the_view():
    con = _warehouse()
    bad = _ranker("bad", ["f0", "nope"], [1.0, 1.0], 0.0, 0, 3)
    with pytest.raises(SelectionInputError, match=r"ranker 'bad': features \['nope'\].*staging.stg_items"):
        _sums(con, [RANKERS[0], bad])


def test_one_pass_runs_on_a_read_only_warehouse(tmp_path):
    """model_selection reads the warehouse read-only: the cell table is a connection-local temp table."""
    path = tmp_path / "warehouse.duckdb"
    source = _warehouse()
    source.execute("ATTACH $path AS w", {"path": str(path)})
    source.execute("CREATE SCHEMA w.staging")
    for table in ("stg_items", "stg_observational_impressions"):
        source.execute(f"CREATE TABLE w.staging.{table} AS SELECT * FROM staging.{table}")
    source.execute("DETACH w")
    with duckdb.connect(str(path), read_only=True) as con:
        got = _sums(con, RANKERS[3:4])
        _assert_same_statistic(got[0], _one_query_per_ranker(con, RANKERS[3], WIDTH))
