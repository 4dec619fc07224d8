"""Property-based fuzzing of landing files: every generated file (broken schema, hostile
column names, wrong types, bad values, duplicates, zero rows) is either refused with an error naming the file,
leaving the stored partition exactly as it was, or loaded with exactly the bad rows quarantined, each with the
reason its defect calls for, and every good row stored value for value.

The oracle is the construction: each generated row carries at most one defect whose outcome is known.
FUZZ_EXAMPLES (default 500, what CI runs) sets the number of generated files."""
from __future__ import annotations

import collections
import datetime as dt
import math
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fair_pipeline.ingestion import contract, loads
from fair_pipeline.ingestion.landing import partition_dir
from fair_pipeline.platform import warehouse

DAY = dt.date(2026, 1, 1)
MIDNIGHT = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
N_REQUESTS, SLOTS = 8, 5
SCORE_REASON = f"|score| above {contract.MAX_ABS_SCORE:g}"

# (column, bad value, reason it must be quarantined for; None = the value is valid and the row must be stored)
ROW_DEFECTS = [
    ("request_id", None, "missing request_id"), ("request_id", "", "missing request_id"),
    ("request_id", " \t", "missing request_id"), ("query_id", "\n", "missing query_id"),
    ("item_id", None, "missing item_id"), ("item_id", "  ", "missing item_id"),
    ("ts", None, "missing or unparsable ts"), ("ts", MIDNIGHT + dt.timedelta(days=1), "date outside partition"),
    ("ts", MIDNIGHT - dt.timedelta(microseconds=1), "date outside partition"),
    ("ts", MIDNIGHT, None), ("policy", "bogus", "unknown policy"), ("policy", None, "unknown policy"),
    ("policy", "shuffle", "policy not allowed in this source"), ("position", 0, "position outside 1..K"),
    ("position", 51, "position outside 1..K"), ("position", None, "position outside 1..K"),
    ("original_position", 0, "original_position outside 1..K"), ("original_position", None, None),
    ("click", 2, "click not 0/1"), ("click", -1, "click not 0/1"), ("click", None, "click not 0/1"),
    ("score", math.nan, "score missing, NaN or infinite"), ("score", math.inf, "score missing, NaN or infinite"),
    ("score", None, "score missing, NaN or infinite"), ("score", 1e17, SCORE_REASON), ("score", -2e12, SCORE_REASON),
    ("score", -1e12, None), ("group_id", None, None), ("item_id", "é ✓ 'x\"; DROP TABLE raw.items; --", None),
]
# Extra columns: ignored (any name a file may use), except the reserved one, which refuses the file.
EXTRA_NAMES = ["t_score", "t_ts", "t_click", "t_request_id", "filename", "_landing_file", "partition_date",
               "source_file", "_copies", "file_row_number", "Score", "x y", 'q"uote']


def _base_rows() -> list[dict]:
    rows = []
    for r in range(N_REQUESTS):
        for p in range(1, SLOTS + 1):
            rows.append({
                "ts": MIDNIGHT + dt.timedelta(hours=r, seconds=p), "request_id": f"req-{r}", "query_id": f"q-{r}",
                "policy": "production", "position": p, "original_position": SLOTS + 1 - p,
                "item_id": f"item-{(r * 7 + p) % 13}", "group_id": f"g{p % 2}", "score": (r * SLOTS + p) / 7.0,
                "click": (r + p) % 2,
            })
    return rows


@st.composite
def landing_files(draw):
    rows = _base_rows()
    expected = [None] * len(rows)
    some_rows = st.lists(st.integers(0, len(rows) - 1), unique=True, max_size=len(rows))
    for index in draw(st.one_of(some_rows, st.just(range(len(rows))))):  # sometimes every row is bad
        column, value, reason = draw(st.sampled_from(ROW_DEFECTS))
        rows[index] = {**rows[index], column: value}
        expected[index] = reason
    # Exact copies of good rows, appended: the later copy is the duplicate.
    for index in draw(st.lists(st.integers(0, len(rows) - 1), unique=True, max_size=3)):
        if expected[index] is None:
            rows.append(dict(rows[index]))
            expected.append("duplicate (request_id, position)")
    if draw(st.booleans()):
        keep = draw(st.integers(0, len(rows)))
        rows, expected = rows[:keep], expected[:keep]
    table = pa.Table.from_pylist(rows, schema=contract.IMPRESSION_SCHEMA) if rows else contract.IMPRESSION_SCHEMA.empty_table()
    refusals = set()
    for name in draw(st.lists(st.sampled_from(EXTRA_NAMES), unique=True, max_size=3)):
        table = table.append_column(name, pa.array([draw(st.sampled_from([0.0, 1.0, None]))] * table.num_rows, pa.float64()))
        if name in contract.RESERVED_COLUMNS:
            refusals.add("reserved columns")
    schema_defect = draw(st.sampled_from(["none"] * 6 + ["drop", "duplicate", "int_as_float", "int_as_text",
                                                        "ts_as_text", "ts_as_date", "ts_as_int", "score_as_list"]))
    column = draw(st.sampled_from(contract.IMPRESSION_COLUMNS))
    table, refusal = _apply_schema_defect(table, schema_defect, column)
    refusals.add(refusal)
    if table.num_rows == 0:
        refusals.add("has no rows")
    elif all(reason is not None for reason in expected):
        refusals.add("rows rejected")
    # The file-level check that fires first, in the order ingestion checks them.
    refusal = next((r for r in REFUSAL_ORDER if r in refusals), None)
    return table, rows, expected, refusal


REFUSAL_ORDER = ["duplicate columns", "reserved columns", "lacks contract columns", "column 'ts' is date32",
                 "column 'ts' is int64", "column 'score' is list", "has no rows", "rows rejected"]


def _apply_schema_defect(table: pa.Table, defect: str, column: str) -> tuple[pa.Table, str | None]:
    index = table.column_names.index(column)
    if defect == "drop":
        return table.remove_column(index), "lacks contract columns"
    if defect == "duplicate":
        return table.append_column(column, table.column(column)), "duplicate columns"
    if defect == "int_as_float" and column in ("position", "original_position", "click"):
        return table.set_column(index, column, table.column(column).cast(pa.float64())), None
    if defect == "int_as_text" and column in ("position", "original_position", "click"):
        return table.set_column(index, column, table.column(column).cast(pa.string())), None
    if defect == "ts_as_text":
        text = pa.array([None if v is None else v.isoformat() for v in table.column("ts").to_pylist()], pa.string())
        return table.set_column(0, "ts", text), None
    if defect == "ts_as_date":
        return table.set_column(0, "ts", table.column("ts").cast(pa.date32())), "column 'ts' is date32"
    if defect == "ts_as_int":
        return table.set_column(0, "ts", table.column("ts").cast(pa.int64())), "column 'ts' is int64"
    if defect == "score_as_list":
        score = table.column_names.index("score")
        listed = pa.array([[v] for v in table.column("score").to_pylist()], pa.list_(pa.float64()))
        return table.set_column(score, "score", listed), "column 'score' is list"
    return table, None


@pytest.fixture(scope="module")
def fuzz_home():
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _sorted(rows) -> list[tuple]:
    return sorted(rows, key=lambda row: tuple((value is None, str(value)) for value in row))


def _state(con) -> tuple:
    rows = con.execute("SELECT * EXCLUDE (source_file) FROM raw.observational_impressions").fetchall()
    quarantine = con.execute("SELECT * EXCLUDE (quarantined_at) FROM raw.quarantine").fetchall()
    return _sorted(rows), _sorted(quarantine)


def _stored_row(row: dict) -> tuple:
    """A landing row as the raw table stores it (exact float, UTC timestamp, the partition date)."""
    return (row["ts"], row["request_id"], row["query_id"], row["policy"], row["position"], row["original_position"],
            row["item_id"], row["group_id"], row["score"], row["click"], DAY)


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "500")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(landing_files())
def test_fuzzed_landing_files_are_refused_whole_or_quarantined_exactly(fuzz_home, case):
    table, rows, expected, refusal = case
    event(f"outcome: {refusal or 'loaded'}")
    landing = fuzz_home / "landing"
    path = partition_dir(landing, "observational", DAY) / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    with warehouse.session(fuzz_home / "warehouse.duckdb") as con:
        before = _state(con)
        try:
            load = loads.load_partition(con, landing, "observational", DAY.isoformat())
        except loads.LandingFileError as error:
            assert refusal is not None, f"refused a file that should load: {error}"
            assert refusal in str(error) and str(path) in str(error), str(error)
            assert _state(con) == before, "a refused file changed the stored partition"
            return
        assert refusal is None, f"loaded a file that should be refused ({refusal})"
        stored, quarantine = _state(con)
    good = _sorted(_stored_row(row) for row, reason in zip(rows, expected) if reason is None)
    assert stored == good, "the stored rows are exactly the good rows, value for value"
    reasons = collections.Counter(reason for reason in expected if reason is not None)
    assert load.rejected_by_reason == dict(reasons)
    assert collections.Counter(q[3] for q in quarantine) == reasons
    assert {q[2] for q in quarantine} <= {path.relative_to(landing).as_posix()}
