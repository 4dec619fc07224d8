"""The extras contract (`fair_pipeline/ingestion/extras.py`): keys are impressions of the day and unique, bad keys
are quarantined with their reason and values; a type change across days is widened by the documented rule or the
file's rows are quarantined naming file and column, and the day's impressions load either way."""
from __future__ import annotations

import itertools
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract, loads
from fair_pipeline.ingestion.extras import widened_type
from fair_pipeline.platform import settings, warehouse

DAY, DAY_2 = "2026-01-01", "2026-01-02"


def _keys(landing, day: str, n: int) -> pa.Table:
    return pq.read_table(landing / "observational" / f"date={day}" / "part-0.parquet",
                         columns=["request_id", "position"]).slice(0, n)


def _write_extras(landing, day: str, table: pa.Table, name: str = "part-0.parquet"):
    path = landing / contract.EXTRAS_DIR / "observational" / f"date={day}" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _load(landing, day: str = DAY) -> loads.PartitionLoad:
    with warehouse.session(settings.warehouse_path()) as con:
        return loads.load_partition(con, landing, "observational", day)


def _query(sql: str) -> list[tuple]:
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_extras_keys_must_be_impressions_of_the_day_and_unique(small_landing):
    keys = _keys(small_landing, DAY, 10)
    other_day = _keys(small_landing, DAY_2, 1)  # a real key, of another day
    bad = pa.table({
        "request_id": pa.array([other_day["request_id"][0].as_py(), keys["request_id"][0].as_py(), None,
                                keys["request_id"][3].as_py()]),
        "position": pa.array([other_day["position"][0].as_py(), 49, keys["position"][2].as_py(),
                              keys["position"][3].as_py()], keys.schema.field("position").type),
    })
    rows = pa.concat_tables([keys, bad])
    rows = rows.append_column("propensity", pa.array([0.1 * i for i in range(rows.num_rows)]))
    # Position 49 is not a position of request 0's list (the simulation shows 20 slots).
    _write_extras(small_landing, DAY, rows)
    impressions = _load(small_landing).accepted

    for _ in range(2):  # a reload replaces the day: nothing doubles
        load = _load(small_landing)
        assert load.accepted == impressions and load.extras.rows == 10
        assert load.extras.quarantined_by_reason == {
            "(request_id, position) not among the day's impressions": 2,
            "duplicate (request_id, position)": 1,
            "missing key (request_id, position)": 1,
        }
        stored = _query("SELECT request_id, position, propensity FROM raw.observational_extras ORDER BY propensity")
        assert stored == [(r, p, pytest.approx(0.1 * i)) for i, (r, p) in
                          enumerate(zip(keys["request_id"].to_pylist(), keys["position"].to_pylist()))]
    quarantined = _query("SELECT source, CAST(partition_date AS VARCHAR), source_file, reason, row_values "
                         "FROM raw.extras_quarantine ORDER BY reason, row_values")
    assert {q[:3] for q in quarantined} == {("observational", DAY, f"_extras/observational/date={DAY}/part-0.parquet")}
    # Every value of a quarantined row is kept (the duplicate is the later copy, propensity 1.3).
    assert sorted(round(json.loads(q[4])["propensity"], 9) for q in quarantined) == [1.0, 1.1, 1.2, 1.3]


def test_a_type_change_across_days_is_widened_or_its_file_quarantined_naming_the_column(small_landing):
    keys_1, keys_2 = _keys(small_landing, DAY, 20), _keys(small_landing, DAY_2, 20)
    _write_extras(small_landing, DAY, keys_1.append_column("bid", pa.array(range(20), pa.int32()))
                  .append_column("propensity", pa.array([0.5] * 20)))
    assert _load(small_landing).extras.rows == 20
    # Day 2: `bid` arrives as int64 (widened to BIGINT, day 1's values kept), and a second file's `propensity` as
    # text, for which there is no rule: that file's rows are quarantined; the impressions and the first file load.
    _write_extras(small_landing, DAY_2, keys_2.slice(0, 10).append_column("bid", pa.array([2**40] * 10, pa.int64()))
                  .append_column("propensity", pa.array([0.25] * 10)))
    text_file = _write_extras(small_landing, DAY_2, keys_2.slice(10).append_column("propensity", pa.array(["0.75"] * 10)),
                              "part-1.parquet")
    load = _load(small_landing, DAY_2)
    assert load.accepted > 0 and load.extras.rows == 10
    assert load.extras.widened_columns == ("bid: INTEGER -> BIGINT",)
    reason = "column 'propensity' is VARCHAR here but DOUBLE in the raw table (no widening rule)"
    assert load.extras.quarantined_by_reason == {reason: 10}
    assert _query("SELECT DISTINCT source_file FROM raw.extras_quarantine") == [
        (text_file.relative_to(small_landing).as_posix(),)]
    assert _query("SELECT data_type FROM information_schema.columns WHERE table_name = 'observational_extras' "
                  "AND column_name = 'bid'") == [("BIGINT",)]
    assert _query("SELECT CAST(partition_date AS VARCHAR), count(*), sum(bid), sum(propensity) "
                  "FROM raw.observational_extras GROUP BY 1 ORDER BY 1") == [(DAY, 20, 190, 10.0), (DAY_2, 10, 10 * 2**40, 2.5)]
    assert _query("SELECT count(*) FROM raw.observational_impressions WHERE partition_date = DATE '2026-01-02'") == [
        (load.accepted,)]


def test_extras_keys_of_the_wrong_type_quarantine_the_file(small_landing):
    keys = _keys(small_landing, DAY, 5)
    as_text = keys.set_column(1, "position", pa.array([str(p) for p in keys["position"].to_pylist()]))
    _write_extras(small_landing, DAY, as_text.append_column("propensity", pa.array([0.5] * 5)))
    load = _load(small_landing)
    assert load.accepted > 0 and load.extras.rows == 0
    assert load.extras.quarantined_by_reason == {"key column 'position' is VARCHAR; expected an integer": 5}


# Extreme values of each type: a widening is lossless when every one of them survives the cast exactly.
EXTREMES = {
    "TINYINT": ["-128", "127"], "SMALLINT": ["-32768", "32767"], "INTEGER": ["-2147483648", "2147483647"],
    "BIGINT": ["-9223372036854775808", "9223372036854775807"], "HUGEINT": ["-170141183460469231731687303715884105728"],
    "UTINYINT": ["255"], "USMALLINT": ["65535"], "UINTEGER": ["4294967295"], "UBIGINT": ["18446744073709551615"],
    "FLOAT": ["3.4028235e38", "1.1754944e-38", "0.1"], "DOUBLE": ["1.7976931348623157e308", "0.1"],
    "VARCHAR": ["x"], "TIMESTAMP_S": ["2026-01-01 12:34:56"], "TIMESTAMP_MS": ["2026-01-01 12:34:56.789"],
    "TIMESTAMP": ["2026-01-01 12:34:56.789123"], "TIMESTAMP_NS": ["2026-01-01 12:34:56.789123456"],
    "TIMESTAMP WITH TIME ZONE": ["2026-01-01 12:34:56+00"], "DATE": ["2026-01-01"], "BOOLEAN": ["true"],
}


def test_widening_rule_is_lossless_and_refuses_what_would_round():
    con = duckdb.connect()
    for stored, incoming in itertools.product(EXTREMES, repeat=2):
        wider = widened_type(stored, incoming)
        if wider is None:
            continue
        for source_type in (stored, incoming):
            for text in EXTREMES[source_type]:
                value = f"CAST('{text}' AS {source_type})"
                same = con.execute(f"SELECT CAST(CAST({value} AS {wider}) AS {source_type}) = {value}").fetchone()[0]
                assert same, (stored, incoming, wider, text)
    assert widened_type("INTEGER", "BIGINT") == widened_type("BIGINT", "INTEGER") == "BIGINT"
    assert widened_type("UINTEGER", "INTEGER") == "BIGINT" and widened_type("UBIGINT", "TINYINT") == "HUGEINT"
    assert widened_type("INTEGER", "DOUBLE") == "DOUBLE" and widened_type("BIGINT", "DOUBLE") is None
    assert widened_type("TIMESTAMP_MS", "TIMESTAMP") == "TIMESTAMP" and widened_type("TIMESTAMP", "TIMESTAMP_NS") is None
    assert widened_type('"NULL"', "VARCHAR") == widened_type("VARCHAR", '"NULL"') == "VARCHAR"
    assert widened_type("VARCHAR", "DOUBLE") is None and widened_type("DATE", "TIMESTAMP") is None
