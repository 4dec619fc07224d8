"""Values that used to pass: ids of Unicode blanks, bytes that are not UTF-8, date-only text timestamps,
digit-separator numbers and NaN group labels are each rejected with a reason (or the file refused, by name)."""
from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import loads
from fair_pipeline.ingestion.landing import LandingFileError
from fair_pipeline.platform import settings, warehouse

DAY = "2026-01-01"


def _path(landing):
    return landing / "observational" / f"date={DAY}" / "part-0.parquet"


def _load(landing):
    with warehouse.session(settings.warehouse_path()) as con:
        return loads.load_partition(con, landing, "observational", DAY)


def _replace(table: pa.Table, name: str, values, arrow_type=None) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values, arrow_type))


def _quarantined():
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute("SELECT reason, request_id, item_id, ts, position, group_id FROM raw.quarantine "
                           "ORDER BY reason, request_id").fetchall()


@pytest.mark.parametrize("blank", ["\u00a0", "\u3000", "\u200b", "\u00a0\u200b \t", "\ufeff", "\u2060\u2003"])
def test_ids_of_unicode_blanks_are_missing(small_landing, blank):
    table = pq.read_table(_path(small_landing))
    ids = table["item_id"].to_pylist()
    ids[3] = blank
    ids[7] = blank + "x"  # a real id with a blank in it stays an id
    pq.write_table(_replace(table, "item_id", ids), _path(small_landing))
    load = _load(small_landing)
    assert load.rejected_by_reason == {"missing item_id": 1}
    assert [r[2] for r in _quarantined()] == [blank]


def test_bytes_are_text_only_as_utf8(small_landing):
    table = pq.read_table(_path(small_landing))
    good = [s.encode() for s in table["query_id"].to_pylist()]
    good[0] = "Zoë's café".encode()
    pq.write_table(_replace(table, "query_id", good, pa.binary()), _path(small_landing))
    load = _load(small_landing)
    assert load.rejected == 0
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        assert "Zoë's café" in {r[0] for r in con.execute("SELECT query_id FROM raw.observational_impressions").fetchall()}
    bad = list(good)
    bad[5] = b"\xff\xfe broken"
    pq.write_table(_replace(table, "query_id", bad, pa.binary()), _path(small_landing))
    with pytest.raises(LandingFileError, match=r"part-0\.parquet: column 'query_id' holds bytes that are not UTF-8 text in 1 rows"):
        _load(small_landing)


def test_text_timestamps_need_a_time_of_day_and_text_numbers_are_plain(small_landing):
    table = pq.read_table(_path(small_landing))
    ts = [t.isoformat() for t in table["ts"].to_pylist()]
    ts[1] = DAY  # no time of day: not midnight
    positions = [str(p) for p in table["position"].to_pylist()]
    positions[2] = "1_0"  # DuckDB's cast reads 10
    positions[4] = " 3 "
    scores = [repr(s) for s in table["score"].to_pylist()]
    scores[6] = "1_000.5"
    table = _replace(_replace(_replace(table, "ts", ts), "position", positions), "score", scores)
    pq.write_table(table, _path(small_landing))
    load = _load(small_landing)
    assert load.rejected_by_reason == {"missing or unparsable ts": 1,
                                       "position outside 1..K": 1, "score missing, NaN or infinite": 1}
    by_reason = {r[0]: r for r in _quarantined()}
    assert by_reason["missing or unparsable ts"][3] == DAY  # kept as it came
    assert by_reason["position outside 1..K"][4] == "1_0"


def test_a_nan_group_label_is_quarantined_not_stored_as_the_group_nan(small_landing):
    table = pq.read_table(_path(small_landing))
    groups = [float(g) for g in table["group_id"].to_pylist()]
    groups[0], groups[9] = float("nan"), None
    pq.write_table(_replace(table, "group_id", groups, pa.float64()), _path(small_landing))
    load = _load(small_landing)
    assert load.rejected_by_reason == {"group_id is NaN": 1}
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        stored = {r[0] for r in con.execute("SELECT DISTINCT group_id FROM raw.observational_impressions").fetchall()}
    assert "nan" not in stored and None in stored  # a NULL group is allowed
