"""The SQL aggregation (dbt_like_sql/marts/eo_score_click_counts.sql) and the in-memory path give the same
click counts and the same knots on the same data (in-memory DuckDB)."""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from fair_pipeline.eo import EOInputError, click_counts, combine_click_counts, fit_from_click_counts, read_click_counts
from fair_pipeline.eo.aggregate import WEIGHTED_SUM_COLUMNS, unit_weights
from fair_pipeline.eo.sql import read_weighted_sums
from fair_pipeline.eo.transform import fit_from_weighted_sums
from fair_pipeline.ingestion.simulated_landing import simulate_day_tables
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_items
from fair_pipeline.platform.settings import SQL_ROOT
from fair_pipeline.platform.sql_models import parse_model, render_sql

MODEL = SQL_ROOT / "marts" / "eo_score_click_counts.sql"
BIN_WIDTH = 1e-3
DAYS = [dt.date(2024, 3, 1), dt.date(2024, 3, 2)]


def _render(text: str) -> str:
    # Only the models this one refers to: discover_models() also checks every other model's parameters.
    stg = parse_model(SQL_ROOT / "staging" / "stg_observational_impressions.sql", SQL_ROOT)
    sql, deps = render_sql(text, {stg.name: stg})
    assert deps == [("staging", "stg_observational_impressions")]
    return sql


@pytest.fixture(scope="module")
def warehouse():
    config = SimulationConfig(n_items=5000, requests_per_day=1500, seed=3)
    items = simulate_items(config)
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging; CREATE SCHEMA marts")
    frames = []
    for day in DAYS:
        table = simulate_day_tables(config, items, day)["observational"]
        frame = table.to_pandas()
        frame["group_id"] = frame["group_id"].astype(object)
        frame.loc[frame.index[:17], "group_id"] = None  # the contract allows NULL groups
        frame["partition_date"] = day
        frames.append(frame)
    impressions = pd.concat(frames, ignore_index=True)
    arrow = pa.Table.from_pandas(impressions, preserve_index=False)
    con.register("impressions_arrow", arrow)
    con.execute("CREATE TABLE staging.stg_observational_impressions AS SELECT * FROM impressions_arrow")
    model = parse_model(MODEL, SQL_ROOT)
    assert model.config == {"partitioned": "daily"}
    assert model.parameters == ("eo_score_bin_width", "partition_date")
    sql = _render(model.text)
    con.execute(f"CREATE TABLE marts.eo_score_click_counts AS SELECT * FROM ({sql}) WHERE FALSE", {"partition_date": DAYS[0], "eo_score_bin_width": BIN_WIDTH})
    for day in DAYS:
        con.execute(f"INSERT INTO marts.eo_score_click_counts {sql}", {"partition_date": day, "eo_score_bin_width": BIN_WIDTH})
    yield con, impressions, config
    con.close()


def _numpy_counts(frame: pd.DataFrame) -> pd.DataFrame:
    return click_counts(
        frame["score"].to_numpy(), frame["group_id"].to_numpy(), frame["position"].to_numpy(),
        frame["click"].to_numpy(), bin_width=BIN_WIDTH,
    )


def test_sql_day_partition_equals_in_memory_counts(warehouse):
    con, impressions, _ = warehouse
    for day in DAYS:
        sql = con.execute(
            "SELECT group_id, position, score_value, impressions, clicks FROM marts.eo_score_click_counts "
            "WHERE partition_date = $d ORDER BY group_id NULLS LAST, position, score_value",
            {"d": day},
        ).df()
        mem = _numpy_counts(impressions[impressions["partition_date"] == day])
        assert len(sql) == len(mem) > 1000
        np.testing.assert_array_equal(sql["score_value"].to_numpy(), mem["score_value"].to_numpy())  # bitwise
        np.testing.assert_array_equal(sql["position"].to_numpy(), mem["position"].to_numpy())
        np.testing.assert_array_equal(sql[["impressions", "clicks"]].to_numpy(), mem[["impressions", "clicks"]].to_numpy())
        assert list(sql["group_id"].isna()) == list(mem["group_id"].isna())
        assert (sql["group_id"].dropna().to_numpy() == mem["group_id"].dropna().to_numpy()).all()
        assert int(sql["impressions"].sum()) == int((impressions["partition_date"] == day).sum())


def test_sql_window_and_in_memory_give_identical_knots(warehouse):
    con, impressions, config = warehouse
    sql = read_click_counts(con, DAYS[0], DAYS[-1])
    per_day = [_numpy_counts(impressions[impressions["partition_date"] == d]) for d in DAYS]
    mem = combine_click_counts(per_day)
    w = bias_curve(config)
    params = dict(score_bin_width=BIN_WIDTH, missing_group="exclude")
    from_sql = fit_from_click_counts(sql, w, **params)
    from_mem = fit_from_click_counts(mem, w, **params)
    whole = fit_from_click_counts(_numpy_counts(impressions), w, **params)
    assert from_sql.n_positives_ == from_mem.n_positives_ == whole.n_positives_
    for g in from_sql.groups_:
        np.testing.assert_array_equal(from_sql.group_quantiles_[g], from_mem.group_quantiles_[g])
        np.testing.assert_array_equal(from_sql.group_quantiles_[g], whole.group_quantiles_[g])
    np.testing.assert_array_equal(from_sql.reference_quantiles_, from_mem.reference_quantiles_)
    assert from_sql.to_json() == from_mem.to_json()
    # NULL-group impressions stay in the pooled F but not in any group's CDF.
    assert from_sql.n_reference_ == len(impressions)
    assert sum(from_sql.n_positives_.values()) == int(impressions.loc[impressions["group_id"].notna(), "click"].sum())


def test_null_groups_are_an_error_unless_excluded(warehouse):
    con, _, config = warehouse
    sql = read_click_counts(con, DAYS[0], DAYS[-1])
    with pytest.raises(ValueError, match=r"group_id: 34 impressions \(\d+ clicks\) have no group"):
        fit_from_click_counts(sql, bias_curve(config), score_bin_width=BIN_WIDTH)


def test_empty_window_is_reported(warehouse):
    con, _, _ = warehouse
    with pytest.raises(ValueError, match="no rows for partitions 2030-01-01"):
        read_click_counts(con, dt.date(2030, 1, 1), dt.date(2030, 1, 2))


def _assert_same_fit(a, b, atol: float) -> None:
    assert a.groups_ == b.groups_ and a.n_positives_ == b.n_positives_ and a.n_reference_ == b.n_reference_
    np.testing.assert_array_equal(a.reference_quantiles_, b.reference_quantiles_)
    for g in a.groups_:
        np.testing.assert_allclose(a.group_quantiles_[g], b.group_quantiles_[g], rtol=0, atol=atol)
        assert a.positive_weight_[g] == pytest.approx(b.positive_weight_[g], rel=1e-14)
        assert a.n_effective_[g] == pytest.approx(b.n_effective_[g], rel=1e-14)


def test_weighted_sums_per_score_equal_the_per_position_fit(warehouse):
    """The engine applies 1 / w_position and sums over positions: one row per (group, score value), and the fit
    equals the fit of the per-position counts weighted in numpy (sums exact to the double's last bits)."""
    con, impressions, config = warehouse
    w = bias_curve(config)
    params = dict(score_bin_width=BIN_WIDTH, missing_group="exclude")
    per_position = read_click_counts(con, DAYS[0], DAYS[-1])
    sums = read_weighted_sums(con, DAYS[0], DAYS[-1], w)
    assert list(sums.columns) == list(WEIGHTED_SUM_COLUMNS)
    distinct = per_position[["group_id", "score_value"]].astype(str).drop_duplicates()
    assert len(sums) == len(distinct) < len(per_position)
    assert int(sums["impressions"].sum()) == len(impressions)
    assert int(sums["clicks"].sum()) == int(impressions["click"].sum())
    # brute force: per group, the sum of 1 / w over the clicked rows, and of 1 / w^2
    clicked = impressions[impressions["click"] == 1]
    by_group = (1.0 / w[clicked["position"].to_numpy() - 1]).astype(float)
    expected = pd.Series(by_group, index=clicked.index).groupby(clicked["group_id"].fillna("<none>")).sum()
    got = sums.assign(g=sums["group_id"].fillna("<none>")).groupby("g")["weighted_clicks"].sum()
    np.testing.assert_allclose(got.sort_index().to_numpy(), expected.sort_index().to_numpy(), rtol=1e-12)
    _assert_same_fit(fit_from_weighted_sums(sums, **params), fit_from_click_counts(per_position, w, **params), 1e-12)
    ones = {int(p): 1.0 for p in per_position["position"].unique()}
    unweighted = fit_from_weighted_sums(unit_weights(sums), **params)
    assert unweighted.to_json() == fit_from_click_counts(per_position, ones, **params).to_json()  # integers: exact


def test_weighted_sums_refuse_a_clicked_position_without_a_weight(warehouse):
    con, impressions, config = warehouse
    w = bias_curve(config).copy()
    w[4] = 0.0
    with pytest.raises(EOInputError, match=r"position weights must be finite and > 0 .*position: weight \{5: 0.0\}"):
        read_weighted_sums(con, DAYS[0], DAYS[-1], w)
    with pytest.raises(EOInputError, match=r"1 positions have a missing or non-positive weight"):
        read_weighted_sums(con, DAYS[0], DAYS[-1], {p: 1.0 for p in range(1, config.slots)})
    with pytest.raises(ValueError, match="no rows for partitions 2030-01-01"):
        read_weighted_sums(con, dt.date(2030, 1, 1), dt.date(2030, 1, 2), w)
