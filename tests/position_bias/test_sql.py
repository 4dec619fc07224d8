"""The SQL marts and the in-memory aggregation give identical aggregates and identical estimates."""
from __future__ import annotations

import datetime as dt
import warnings

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform import sql_assets, sql_models
from fair_pipeline.position_bias import METHODS, PositionBiasWarning, estimate_position_bias
from fair_pipeline.position_bias.aggregates import FINE_BIN_WIDTH, aggregate_score_bins, aggregate_swap_cells
from fair_pipeline.position_bias.simulated_aggregates import day_frames
from fair_pipeline.position_bias.sql import estimate_position_bias_sql, window_aggregates

DAYS = [dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)]


def run_model(con, name: str, day: dt.date) -> None:
    """Build one daily partition exactly as the pipeline's SQL assets do."""
    model = sql_models.discover_models()[name]
    sql, deps = sql_models.render_sql(model.text)
    assert ("staging", "stg_observational_impressions") in deps or ("staging", "stg_randomized_impressions") in deps
    sql_assets.build_partition(con, model, sql, day.isoformat())


@pytest.fixture(scope="module")
def warehouse():
    config = SimulationConfig(n_items=5_000, slots=12, requests_per_day=600, shuffle_share=0.5, adjacent_swap_share=0.5, seed=7)
    items = simulate_items(config)
    frames = []
    for day in DAYS:
        for frame in day_frames(config, items, day):
            frames.append(frame.assign(partition_date=day))
    impressions = pd.concat(frames, ignore_index=True)
    impressions.loc[impressions.sample(frac=0.01, random_state=1).index, "score"] = np.nan  # NULL scores
    # A score exactly on a bin edge and negative scores: floor() must agree in both engines.
    impressions.loc[0, "score"] = 3 * FINE_BIN_WIDTH
    impressions.loc[1, "score"] = -0.005
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging; CREATE SCHEMA marts")
    observational = impressions[impressions["policy"] == "production"]
    randomized = impressions[impressions["policy"] != "production"]
    con.register("obs", observational)
    con.register("rnd", randomized)
    con.execute("CREATE TABLE staging.stg_observational_impressions AS SELECT * FROM obs")
    con.execute("CREATE TABLE staging.stg_randomized_impressions AS SELECT * FROM rnd")
    for day in DAYS:
        run_model(con, "position_score_bins", day)
        run_model(con, "position_swap_cells", day)
    yield con, impressions
    con.close()


def test_daily_score_bins_match_in_memory_per_partition(warehouse):
    con, impressions = warehouse
    for day in DAYS:
        sql = con.execute(
            "SELECT policy, position, score_bin, impressions, clicks FROM marts.position_score_bins "
            "WHERE partition_date = ? ORDER BY ALL", [day]
        ).df()
        memory = aggregate_score_bins(impressions[impressions["partition_date"] == day])
        pd.testing.assert_frame_equal(
            sql.sort_values(["policy", "position", "score_bin"]).reset_index(drop=True), memory, check_dtype=False
        )
        assert memory["score_bin"].isna().any()  # the NULL-score rows kept their own bin


def test_window_sum_equals_aggregate_of_window(warehouse):
    con, impressions = warehouse
    run_model(con, "position_score_bins", DAYS[1])  # re-running a partition replaces it: sums stay exact
    run_model(con, "position_swap_cells", DAYS[2])
    window = impressions[impressions["partition_date"] >= DAYS[1]]
    for policy in ("production", "shuffle"):
        sql = window_aggregates(con, "marts.position_score_bins", DAYS[1], DAYS[2], policy)
        memory = aggregate_score_bins(window)
        memory = memory[memory["policy"] == policy].reset_index(drop=True)
        sql = sql.sort_values(["position", "score_bin"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(sql, memory, check_dtype=False)
    swaps = window_aggregates(con, "marts.position_swap_cells", DAYS[1], DAYS[2], "adjacent_swap")
    pd.testing.assert_frame_equal(
        swaps.sort_values(["position", "original_position"]).reset_index(drop=True),
        aggregate_swap_cells(window),
        check_dtype=False,
    )


@pytest.mark.parametrize("method", METHODS)
def test_sql_and_in_memory_estimates_are_identical(warehouse, method):
    con, impressions = warehouse
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PositionBiasWarning)  # small data: NaN positions are expected here
        memory = estimate_position_bias(impressions, method=method, truncate=8)
        sql = estimate_position_bias_sql(con, method, DAYS[0], DAYS[-1], truncate=8)
    pd.testing.assert_frame_equal(sql, memory, check_exact=False, rtol=1e-12, atol=0)
    assert memory["weight"].iloc[1:].notna().sum() >= 5



def test_the_mart_bins_scores_with_the_estimators_fine_width():
    # The platform binds the width as a literal (it imports no stage); it must equal the in-memory aggregation's.
    assert sql_models.SQL_PARAMETERS["position_bias_bin_width"] == FINE_BIN_WIDTH
