"""fair_pipeline.platform.windows: the one definition of "the newest N partitions" every windowed stage uses."""
from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from fair_pipeline.platform.windows import (
    holdout_window,
    is_newest_partition,
    newest_partitions,
    partition_dates,
    window_before,
    window_through,
)

D = dt.date


class StageError(ValueError):
    pass


@pytest.fixture
def con():
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA marts")
        con.execute("CREATE TABLE marts.a (partition_date DATE)")
        con.execute("CREATE TABLE marts.b (partition_date DATE)")
        con.execute("INSERT INTO marts.a VALUES ('2026-01-01'), ('2026-01-05'), ('2026-01-05'), ('2026-01-09')")
        con.execute("INSERT INTO marts.b VALUES ('2026-01-07')")
        yield con


def test_newest_partitions_count_days_with_data_across_tables_up_to_the_end(con):
    assert partition_dates(con, ["marts.a", "marts.b", "marts.missing"]) == [D(2026, 1, d) for d in (1, 5, 7, 9)]
    window = newest_partitions(con, ["marts.a", "marts.b"], 3, "2026-01-08")
    assert window.dates == (D(2026, 1, 1), D(2026, 1, 5), D(2026, 1, 7)) and window.span == "2026-01-01..2026-01-07"
    assert window.held_out == () and window.label == "2026-01-01..2026-01-07 (3 partitions with data)"
    assert newest_partitions(con, "marts.a", 2).dates == (D(2026, 1, 5), D(2026, 1, 9))  # no end: the newest


def test_errors_name_the_table_the_end_and_what_to_do(con):
    with pytest.raises(StageError, match=r"no partitions on or before 2025-12-31 in marts.a / marts.b; ingest"):
        newest_partitions(con, ["marts.a", "marts.b"], 7, "2025-12-31", error=StageError, hint="ingest")
    with pytest.raises(StageError, match="marts.nope does not exist; ingest"):
        newest_partitions(con, "marts.nope", 7, error=StageError, hint="ingest")
    with pytest.raises(StageError, match="window_days=0 must be a positive integer"):
        newest_partitions(con, "marts.a", 0, error=StageError)
    with pytest.raises(StageError, match="window end 'yesterday' is not a date"):
        newest_partitions(con, "marts.a", 1, "yesterday", error=StageError)
    with pytest.raises(StageError, match="holdout_days=-1 must be an integer >= 0"):
        holdout_window(con, "marts.a", 1, holdout_days=-1, error=StageError)


def test_holdout_window_ends_before_the_newest_partitions(con):
    window = holdout_window(con, "marts.a", 7, "2026-01-09")
    assert window.dates == (D(2026, 1, 1), D(2026, 1, 5)) and window.held_out == (D(2026, 1, 9),)
    assert "2026-01-09" == window.held_out_text
    two = holdout_window(con, ["marts.a", "marts.b"], 1, "2026-01-09", holdout_days=2)
    assert two.dates == (D(2026, 1, 5),) and two.held_out == (D(2026, 1, 7), D(2026, 1, 9))
    # the held-out partitions are counted in days with data, like the window: a gap does not shift them
    assert holdout_window(con, "marts.a", 1, "2026-01-08").dates == (D(2026, 1, 1),)
    in_sample = holdout_window(con, "marts.a", 7, "2026-01-09", holdout_days=0)
    assert in_sample.dates[-1] == D(2026, 1, 9) and "in-sample" in in_sample.held_out_text


def test_a_single_partition_cannot_be_held_out(con):
    with pytest.raises(StageError) as error:
        holdout_window(con, "marts.a", 7, "2026-01-04", error=StageError)
    message = str(error.value)
    assert message.startswith("training cannot be held out: marts.a has only 1 partition(s) on or before 2026-01-04 "
                              "(2026-01-01)")
    assert "ingest more days, or set holdout_days=0" in message and "in-sample" in message
    with pytest.raises(StageError, match="no partitions on or before 2025-12-31 in marts.a"):
        holdout_window(con, "marts.a", 7, "2025-12-31", error=StageError)


def test_window_before_is_the_calendar_days_before_the_partition_and_names_the_gaps(con):
    # marts.a holds 01-01, 01-05, 01-09 and marts.b 01-07: the window of 01-09 with k=2 is 01-07..01-08 exactly.
    window = window_before(con, ["marts.a", "marts.b"], 2, "2026-01-09")
    assert window.span == "2026-01-07..2026-01-08" and window.calendar == (D(2026, 1, 7), D(2026, 1, 8))
    assert window.dates == (D(2026, 1, 7),) and window.missing == (D(2026, 1, 8),)
    assert (window.first, window.last) == (D(2026, 1, 7), D(2026, 1, 7))  # the days with data
    assert window.held_out == (D(2026, 1, 9),)
    assert window.label == "2026-01-07..2026-01-08 (1 partitions with data; no data on 2026-01-08)"
    # a gap is never filled from further back: 01-08's window of 7 days is 01-01..01-07, however old the data
    seven = window_before(con, "marts.a", 7, D(2026, 1, 8))
    assert (seven.span, seven.dates) == ("2026-01-01..2026-01-07", (D(2026, 1, 1), D(2026, 1, 5)))
    assert seven.missing == tuple(D(2026, 1, d) for d in (2, 3, 4, 6, 7))
    # eleven months later, the partition of 2026-12-01 has nothing in its window: it fails, it does not reach back
    with pytest.raises(StageError, match=r"^partition 2026-12-01 has nothing to train on: not enough data in the window "
                                         r"2026-11-24..2026-11-30: marts.a / marts.b has no day with data, fewer than "
                                         r"the minimum of 1 \(FAIR_PIPELINE_MIN_WINDOW_DAYS\); the window never reaches "
                                         r"further back \(partition D trains on the days before D and is evaluated on "
                                         r"D\); ingest$"):
        window_before(con, ["marts.a", "marts.b"], 7, "2026-12-01", error=StageError, hint="ingest")
    with pytest.raises(StageError, match=r"^partition 2026-01-01 has nothing to train on"):
        window_before(con, ["marts.a", "marts.b"], 7, "2026-01-01", error=StageError)
    with pytest.raises(StageError, match="window_days=0 must be a positive integer"):
        window_before(con, "marts.a", 0, "2026-01-09", error=StageError)


def test_a_window_below_the_minimum_of_days_with_data_is_not_enough_data(con):
    # 01-02..01-08 holds two days with data (01-05, 01-07): enough for a minimum of 2, not for 3
    assert window_before(con, ["marts.a", "marts.b"], 7, "2026-01-09", min_days=2).dates == (D(2026, 1, 5), D(2026, 1, 7))
    with pytest.raises(StageError, match=r"not enough data in the window 2026-01-02..2026-01-08: marts.a / marts.b has "
                                         r"2 day\(s\) with data \(2026-01-05, 2026-01-07\), fewer than the minimum of 3"):
        window_before(con, ["marts.a", "marts.b"], 7, "2026-01-09", min_days=3, error=StageError)
    with pytest.raises(StageError, match="min_days=0 must be a positive integer"):
        window_before(con, "marts.a", 7, "2026-01-09", min_days=0, error=StageError)


def test_window_through_includes_the_partition_itself(con):
    window = window_through(con, "marts.a", 5, "2026-01-09")
    assert (window.span, window.dates) == ("2026-01-05..2026-01-09", (D(2026, 1, 5), D(2026, 1, 9)))
    assert window.missing == (D(2026, 1, 6), D(2026, 1, 7), D(2026, 1, 8)) and window.held_out == ()
    with pytest.raises(StageError, match=r"^not enough data in the window 2026-01-02..2026-01-04: marts.a has no day"):
        window_through(con, "marts.a", 3, "2026-01-04", error=StageError)


def test_is_newest_partition_looks_for_any_later_day_with_data(con):
    assert is_newest_partition(con, "2026-01-09", ["marts.a"])
    assert is_newest_partition(con, D(2026, 1, 10), ["marts.a"])  # later than any data: nothing newer
    assert not is_newest_partition(con, "2026-01-07", ["marts.a", "marts.b"])
    assert is_newest_partition(con, "2026-01-07", ["marts.b"])


def test_run_and_backfill_train_only_days_whose_calendar_window_holds_enough_days(monkeypatch):
    from fair_pipeline import runner

    landed = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-11-20", "2026-11-21"]
    # 2026-11-20's window (11-13..11-19) is empty: it is only ingested, however much January data there is
    assert runner.trainable(landed, landed) == (["2026-01-02", "2026-01-03", "2026-11-21"],
                                                ["2026-01-01", "2026-11-20"])
    monkeypatch.setenv("FAIR_PIPELINE_MIN_WINDOW_DAYS", "2")
    assert runner.trainable(landed, landed) == (["2026-01-03"], ["2026-01-01", "2026-01-02", "2026-11-20", "2026-11-21"])
    monkeypatch.setenv("FAIR_PIPELINE_MIN_WINDOW_DAYS", "two")
    with pytest.raises(ValueError, match="FAIR_PIPELINE_MIN_WINDOW_DAYS='two' must be a positive integer"):
        runner.trainable(landed, landed)
