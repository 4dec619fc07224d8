"""Ingestion assets: idempotent partitions, exact quarantine, atomic failure, clear errors, blocking check."""
from __future__ import annotations

import math

import dagster as dg
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import loads
from fair_pipeline.ingestion.assets import items, observational_impressions, randomized_impressions
from fair_pipeline.platform import settings
from fair_pipeline.platform.resources import default_resources

DAY = "2026-01-01"


def _materialize(assets, partition_key=DAY, **kwargs):
    return dg.materialize(
        assets, partition_key=partition_key, resources=default_resources(), instance=dg.DagsterInstance.ephemeral(), **kwargs
    )


def _query(sql, params=None):
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def _landing_file(landing, source="observational", day=DAY):
    return landing / source / f"date={day}" / "part-0.parquet"


def test_partition_loads_every_row_and_rerun_is_idempotent(small_landing):
    expected = pq.read_metadata(_landing_file(small_landing)).num_rows
    assert _materialize([observational_impressions]).success
    first = _query("SELECT count(*), sum(click), count(DISTINCT request_id) FROM raw.observational_impressions")
    assert first[0][0] == expected
    assert _materialize([observational_impressions]).success
    assert _query("SELECT count(*), sum(click), count(DISTINCT request_id) FROM raw.observational_impressions") == first
    assert _materialize([observational_impressions], partition_key="2026-01-02").success
    by_day = dict(_query("SELECT CAST(partition_date AS VARCHAR), count(*) FROM raw.observational_impressions GROUP BY 1"))
    assert by_day == {DAY: expected, "2026-01-02": pq.read_metadata(_landing_file(small_landing, day="2026-01-02")).num_rows}
    # The loaded rows are the landing rows, value for value.
    landed = pq.read_table(_landing_file(small_landing)).to_pandas().sort_values(["request_id", "position"])
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        loaded = con.execute(
            "SELECT * FROM raw.observational_impressions WHERE partition_date = ? ORDER BY request_id, position", [DAY]
        ).df()
    np.testing.assert_array_equal(loaded.score.to_numpy(), landed.score.to_numpy())
    np.testing.assert_array_equal(loaded.item_id.to_numpy(), landed.item_id.to_numpy())


def _corrupt(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """One kind of corruption per chosen row, cycling through every validation rule."""
    frame = table.to_pandas()
    kinds = [
        ("score", math.nan), ("score", math.inf), ("position", 0), ("position", 99), ("click", 2),
        ("request_id", None), ("item_id", None), ("policy", "bogus"), ("policy", "shuffle"), ("ts", "next_day"),
        ("original_position", -1), ("query_id", ""),
    ]
    reasons = []
    for n, row in enumerate(rows):
        column, value = kinds[n % len(kinds)]
        if value == "next_day":
            value = frame.at[row, "ts"] + np.timedelta64(1, "D")
        frame.at[row, column] = value
        reasons.append(column)
    return pa.Table.from_pandas(frame, preserve_index=False), reasons


def test_corrupting_one_percent_quarantines_exactly_those_rows(small_landing):
    path = _landing_file(small_landing)
    table = pq.read_table(path)
    rng = np.random.default_rng(1)
    rows = np.sort(rng.choice(table.num_rows, size=table.num_rows // 100, replace=False))
    corrupted, _ = _corrupt(table, rows)
    # Plus exact copies of two valid rows appended at the end: the later copies are the duplicates.
    copies = corrupted.take([int(i) for i in np.setdiff1d(np.arange(4), rows)[:2]])
    pq.write_table(pa.concat_tables([corrupted, copies.cast(corrupted.schema)]), path)

    result = _materialize([observational_impressions], raise_on_error=False)
    assert not result.success, "the blocking check fails the step: 1.16% > 1% rejected"
    quarantined = _query(
        "SELECT CAST(source_file AS VARCHAR), reason, ts, request_id, position FROM raw.quarantine WHERE source = 'observational'"
    )
    n_total = table.num_rows + 2
    assert len(quarantined) == len(rows) + 2
    assert {q[0] for q in quarantined} == {path.relative_to(small_landing).as_posix()}
    reasons = sorted(q[1] for q in quarantined)
    assert reasons.count("duplicate (request_id, position)") == 2
    assert {"score missing, NaN or infinite", "position outside 1..K", "click not 0/1", "missing request_id",
            "missing item_id", "unknown policy", "policy not allowed in this source", "date outside partition",
            "original_position outside 1..K", "missing query_id"} <= set(reasons)
    accepted = _query("SELECT count(*) FROM raw.observational_impressions")[0][0]
    assert accepted == n_total - len(rows) - 2, "every row is either loaded or quarantined"
    # The original row behind each duplicate is kept; the quarantined rows are exactly the corrupted ones.
    original = table.to_pandas()
    kept_keys = set(_query("SELECT request_id, position FROM raw.observational_impressions"))
    for row in rows:
        key = (original.at[row, "request_id"], int(original.at[row, "position"]))
        assert key not in kept_keys or original.at[row, "request_id"] is None
    events = result.asset_materializations_for_node("raw__observational_impressions")
    assert events[0].metadata["rejected_rows"].value == len(rows) + 2
    check = result.get_asset_check_evaluations()[0]
    # 14 of 1,202 rows is 1.16% > 1%: the blocking check fails.
    assert not check.passed and check.metadata["worst_rejected_share"].value == pytest.approx((len(rows) + 2) / n_total)


def test_blocking_check_stops_downstream(small_landing):
    from fair_pipeline.definitions import defs

    path = _landing_file(small_landing)
    table = pq.read_table(path)
    frame = table.to_pandas()
    frame.loc[: table.num_rows // 20, "click"] = 7  # 5% bad rows
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False).cast(table.schema), path)
    job = defs.resolve_job_def("daily_pipeline")
    result = job.execute_in_process(
        partition_key=DAY, instance=dg.DagsterInstance.ephemeral(), raise_on_error=False,
        run_config={"ops": {"raw__observational_impressions": {"config": {"max_rejected_share": 0.01}}}},
    )
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert "raw/observational_impressions" in materialized
    assert "marts/daily_ctr_by_position" not in materialized, "a failed blocking check must stop downstream assets"


def test_failure_mid_load_leaves_previous_state_intact(small_landing, monkeypatch):
    assert _materialize([observational_impressions]).success
    before = _query("SELECT count(*), sum(score) FROM raw.observational_impressions")
    # Change the landing data, then make the quarantine insert (after the valid-row insert) fail.
    path = _landing_file(small_landing)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows // 2), path)
    monkeypatch.setattr(loads, "QUARANTINE_INSERT", "INSERT INTO raw.quarantine SELECT no_such_column FROM _validated")
    with pytest.raises(Exception):
        _materialize([observational_impressions])
    assert _query("SELECT count(*), sum(score) FROM raw.observational_impressions") == before


def test_missing_file_is_an_error_naming_the_path(fp_home):
    result = _materialize([observational_impressions], raise_on_error=False)
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "landing/observational/date=2026-01-01" in message
    assert not settings.warehouse_path().exists() or _query("SELECT count(*) FROM raw.observational_impressions") == [(0,)]


def test_unreadable_and_incomplete_files_are_named(small_landing):
    path = _landing_file(small_landing)
    pq.write_table(pq.read_table(path).drop_columns(["score"]), path)
    with pytest.raises(Exception, match="lacks contract columns \\['score'\\]"):
        _materialize([observational_impressions])
    path.write_bytes(b"not parquet")
    with pytest.raises(Exception, match="unreadable landing file .*part-0.parquet"):
        _materialize([observational_impressions])


def test_items_and_randomized_sources(small_landing):
    assert _materialize([randomized_impressions, items]).success
    policies = dict(_query("SELECT policy, count(*) FROM raw.randomized_impressions GROUP BY 1"))
    assert set(policies) == {"shuffle", "adjacent_swap"}
    assert _query("SELECT count(*) FROM raw.items") == [(2_000,)]
