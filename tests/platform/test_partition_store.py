"""fair_pipeline.platform.partition_store: result tables keyed by the asset partition that wrote them."""
from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd
import pytest

from fair_pipeline.platform.partition_store import (
    load_partition,
    record_skip,
    replace_partition,
    resolve_partition,
    skip_reason,
    stored_partitions,
)

D = dt.date


@pytest.fixture
def con():
    with duckdb.connect() as con:
        yield con


def _rows(table_con, table: str) -> list[tuple]:
    return table_con.execute(f"SELECT partition_date::VARCHAR, * EXCLUDE (partition_date) FROM {table} ORDER BY ALL").fetchall()


def test_replacing_a_partition_touches_exactly_its_rows_in_every_table(con):
    assert replace_partition(con, {"marts.x": pd.DataFrame({"k": [1, 2]}), "marts.y": pd.DataFrame({"v": ["a"]})},
                             "2026-01-02") == {"marts.x": 2, "marts.y": 1}
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [3]})}, D(2026, 1, 3))
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [9, 8, 7]})}, "2026-01-02")  # re-materialized
    assert _rows(con, "marts.x") == [("2026-01-02", 7), ("2026-01-02", 8), ("2026-01-02", 9), ("2026-01-03", 3)]
    assert _rows(con, "marts.y") == [("2026-01-02", "a")]
    assert stored_partitions(con, "marts.x") == [D(2026, 1, 2), D(2026, 1, 3)]
    assert load_partition(con, "marts.x")["k"].tolist() == [3]  # default: the newest stored
    assert sorted(load_partition(con, "marts.x", "2026-01-02")["k"]) == [7, 8, 9]


def test_a_failed_write_leaves_every_table_as_it_was(con):
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [1]}), "marts.y": pd.DataFrame({"v": [1]})}, "2026-01-02")
    before = (_rows(con, "marts.x"), _rows(con, "marts.y"))
    with pytest.raises(duckdb.Error):  # the second table cannot take text into its integer column
        replace_partition(con, {"marts.x": pd.DataFrame({"k": [5]}), "marts.y": pd.DataFrame({"v": ["not a number"]})},
                          "2026-01-02")
    assert (_rows(con, "marts.x"), _rows(con, "marts.y")) == before


def test_new_columns_are_added_and_an_unkeyed_table_is_rebuilt(con):
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [1]})}, "2026-01-01")
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [2], "extra": ["e"]})}, "2026-01-02")
    assert _rows(con, "marts.x") == [("2026-01-01", 1, None), ("2026-01-02", 2, "e")]
    con.execute("CREATE TABLE marts.old AS SELECT 1 AS k")  # a table from before partitions: results, not data
    assert stored_partitions(con, "marts.old") == []
    replace_partition(con, {"marts.old": pd.DataFrame({"k": [5]})}, "2026-01-02")
    assert _rows(con, "marts.old") == [("2026-01-02", 5)]


def test_missing_table_or_partition_is_named(con):
    class StageError(LookupError):
        pass

    with pytest.raises(StageError, match="marts.x holds no results yet; materialize it"):
        resolve_partition(con, "marts.x", None, StageError, "materialize it")
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [1]})}, "2026-01-02")
    with pytest.raises(StageError, match="marts.x has no rows for partition 2026-01-05"):
        load_partition(con, "marts.x", "2026-01-05", error=StageError)
    with pytest.raises(ValueError, match="partition 'yesterday' is not a date"):
        replace_partition(con, {"marts.x": pd.DataFrame({"k": [1]})}, "yesterday")


def test_a_partition_that_ran_and_stored_nothing_says_why_until_it_is_written(con):
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [1]}), "marts.y": pd.DataFrame({"k": [2]})}, "2026-01-02")
    record_skip(con, ["marts.x", "marts.y"], "2026-01-02", "skipped: not a simulation")
    record_skip(con, ["marts.x_2"], "2026-01-02", "unrelated")  # a table whose name starts like ours
    assert stored_partitions(con, "marts.x") == [] and stored_partitions(con, "marts.y") == []  # D's rows removed
    with pytest.raises(LookupError) as missing:
        load_partition(con, "marts.x", "2026-01-02")
    assert str(missing.value) == "marts.x: the asset ran for partition 2026-01-02 and stored nothing: skipped: not a simulation"
    with pytest.raises(LookupError, match="ran and stored nothing: skipped: not a simulation .partition 2026-01-02."):
        load_partition(con, "marts.y")  # the newest partition
    assert skip_reason(con, "marts.x", "2026-01-03") is None
    # A later write of the partition supersedes the skip, for the tables written only.
    replace_partition(con, {"marts.x": pd.DataFrame({"k": [3]})}, "2026-01-02")
    assert load_partition(con, "marts.x", "2026-01-02")["k"].tolist() == [3]
    assert skip_reason(con, "marts.x", "2026-01-02") is None
    assert skip_reason(con, "marts.y", "2026-01-02") == "skipped: not a simulation"
    assert skip_reason(con, "marts.x_2", "2026-01-02") == "unrelated"
