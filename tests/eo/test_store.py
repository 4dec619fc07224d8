"""Glue behind the EO assets: the transforms table, the training window, the checks' pure functions."""
from __future__ import annotations

import datetime as dt
import json

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.eo import WeightedCDFTransformer
from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.assets import too_few_clicks, validate_stored
from fair_pipeline.eo.store import load_latest_transforms, write_transforms
from fair_pipeline.eo.window import eo_partition_window, eo_training_window, eo_window_before

D = dt.date


def _fitted(seed: int = 0) -> WeightedCDFTransformer:
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(0, 1, 400), rng.normal(1, 1, 600)])
    groups = np.array(["a"] * 400 + ["b"] * 600)
    return WeightedCDFTransformer(n_knots=101).fit(scores, groups, rng.uniform(1, 3, 1000))


@pytest.fixture
def con():
    with duckdb.connect() as connection:
        connection.execute("CREATE SCHEMA marts")
        yield connection


def test_round_trip_keyed_by_partition_and_newest_partition_wins(con):
    first, second = _fitted(0), _fitted(1)
    write_transforms(con, D(2026, 1, 1), D(2026, 1, 7), 7, {"weighted": first, "unweighted": "not estimable: x"}, "m",
                     partition=D(2026, 1, 8))
    write_transforms(con, D(2026, 1, 2), D(2026, 1, 8), 7, {"weighted": second, "unweighted": second}, "m",
                     partition=D(2026, 1, 9))
    latest = load_latest_transforms(con)  # no partition: the newest stored one
    assert latest["weighted"].window_end == D(2026, 1, 8) and latest["weighted"].transform.to_json() == second.to_json()
    assert latest["unweighted"].position_bias_method is None
    assert load_latest_transforms(con, "2026-01-09")["weighted"].transform.to_json() == second.to_json()
    older = load_latest_transforms(con, D(2026, 1, 8))
    assert older["weighted"].window_end == D(2026, 1, 7) and older["weighted"].transform.to_json() == first.to_json()
    assert older["unweighted"].estimable is False and older["unweighted"].reason == "not estimable: x"
    # Re-fitting the older partition replaces exactly its rows (no duplicates) and leaves the newest one alone.
    write_transforms(con, D(2026, 1, 1), D(2026, 1, 7), 7, {"weighted": first, "unweighted": "not estimable: y"}, "m",
                     partition=D(2026, 1, 8))
    assert con.execute("SELECT partition_date, count(*) FROM marts.eo_transforms GROUP BY 1 ORDER BY 1").fetchall() == [
        (D(2026, 1, 8), 2), (D(2026, 1, 9), 2)]
    older = load_latest_transforms(con, D(2026, 1, 8))
    assert older["unweighted"].estimable is False and older["unweighted"].reason == "not estimable: y"
    assert older["unweighted"].transform is None
    latest = load_latest_transforms(con)
    assert latest["unweighted"].estimable is True and latest["weighted"].window_end == D(2026, 1, 8)
    # Without a partition the rows belong to the day after the window (the day they are evaluated on).
    write_transforms(con, D(2026, 1, 3), D(2026, 1, 9), 7, {"weighted": second}, "m")
    assert load_latest_transforms(con)["weighted"].window_end == D(2026, 1, 9)
    assert con.execute("SELECT max(partition_date) FROM marts.eo_transforms").fetchone()[0] == D(2026, 1, 10)


def test_bad_variant_and_missing_table_or_partition_are_named(con):
    with pytest.raises(EOInputError, match="marts.eo_transforms holds no results yet; materialize the eo_transform"):
        load_latest_transforms(con)
    with pytest.raises(EOInputError, match=r"unknown transform variants \['alpha'\]"):
        write_transforms(con, D(2026, 1, 1), D(2026, 1, 1), 1, {"alpha": _fitted()}, None)
    write_transforms(con, D(2026, 1, 1), D(2026, 1, 1), 1, {"weighted": _fitted()}, None, partition=D(2026, 1, 2))
    with pytest.raises(EOInputError, match="marts.eo_transforms has no rows for partition 2026-01-05; materialize"):
        load_latest_transforms(con, "2026-01-05")


def test_window_counts_days_with_data_and_respects_the_end(con):
    days = [D(2026, 1, 1), D(2026, 1, 2), D(2026, 1, 5), D(2026, 1, 6), D(2026, 1, 9)]
    frame = pd.DataFrame({"partition_date": days, "clicks": 1})
    con.execute("CREATE TABLE marts.eo_score_click_counts AS SELECT * FROM frame")
    window = eo_training_window(con, 3, "2026-01-08", holdout_days=0)
    assert window.dates == (D(2026, 1, 2), D(2026, 1, 5), D(2026, 1, 6)) and window.first == D(2026, 1, 2)
    assert eo_training_window(con, 7, holdout_days=0).dates == tuple(days)
    # by default the newest partition up to the end is left to the fairness audit
    held = eo_training_window(con, 3, "2026-01-08")
    assert held.dates == (D(2026, 1, 1), D(2026, 1, 2), D(2026, 1, 5)) and held.held_out == (D(2026, 1, 6),)
    with pytest.raises(EOInputError, match="training cannot be held out: marts.eo_score_click_counts has only 1"):
        eo_training_window(con, 7, "2026-01-01")
    with pytest.raises(EOInputError, match="no partitions on or before 2025-12-31"):
        eo_training_window(con, 7, "2025-12-31")
    with pytest.raises(EOInputError, match="window_days=0"):
        eo_training_window(con, 0)


def test_partition_window_is_the_calendar_days_before_the_partition(con):
    days = [D(2026, 1, 1), D(2026, 1, 2), D(2026, 1, 5), D(2026, 1, 6), D(2026, 1, 9)]
    frame = pd.DataFrame({"partition_date": days, "clicks": 1})
    con.execute("CREATE TABLE marts.eo_score_click_counts AS SELECT * FROM frame")
    # partition 2026-01-06 trains on 01-03..01-05 (k=3); 01-06 itself is held out, the gap days are named
    window = eo_window_before(con, 3, "2026-01-06")
    assert window.dates == (D(2026, 1, 5),) and window.held_out == (D(2026, 1, 6),)
    assert window.missing == (D(2026, 1, 3), D(2026, 1, 4))
    assert eo_partition_window(con, D(2026, 1, 3), D(2026, 1, 5), D(2026, 1, 6)) == window
    # a partition without data of its own (01-08) still trains on the days before it
    assert eo_window_before(con, 2, D(2026, 1, 8)).dates == (D(2026, 1, 6),)
    assert eo_window_before(con, 7, "2026-01-10").dates == (D(2026, 1, 5), D(2026, 1, 6), D(2026, 1, 9))
    with pytest.raises(EOInputError, match=r"partition 2026-01-01 has nothing to train on: not enough data in the "
                                           r"window 2025-12-25..2025-12-31: marts.eo_score_click_counts has no day "
                                           r"with data.*; ingest \(or backfill\)"):
        eo_window_before(con, 7, "2026-01-01")
    with pytest.raises(EOInputError, match=r"partition 2026-01-05 has nothing to train on: not enough data .* 2 day\(s\)"):
        eo_partition_window(con, D(2025, 12, 29), D(2026, 1, 4), D(2026, 1, 5), min_days=3)
    with pytest.raises(EOInputError, match="window_days=0"):
        eo_window_before(con, 0, "2026-01-09")


def test_too_few_clicks_names_groups_and_counts():
    counts = pd.DataFrame({"group_id": ["a", "a", "b", None], "clicks": [10, 25, 40, 99]})
    assert too_few_clicks(counts, 30) is None
    assert too_few_clicks(counts, 36) == "not estimable: fewer than min_positives=36 positive responses in group 'a': 35 clicks"


def test_validation_catches_a_tampered_transform():
    fitted = _fitted()
    assert validate_stored(fitted, WeightedCDFTransformer.from_json(fitted.to_json())) == []
    payload = json.loads(fitted.to_json())
    payload["reference_quantiles"][50] = payload["reference_quantiles"][10]  # the map now decreases
    problems = validate_stored(fitted, WeightedCDFTransformer.from_dict(payload))
    assert any("group 'a'" in p and "not monotone" in p for p in problems)
    assert any("change after the JSON round trip" in p for p in problems)
