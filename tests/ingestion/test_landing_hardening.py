"""Red-team landing files: no file column can stand in for a validated value, a refused
file never replaces the stored partition, and temp files are never read."""
from __future__ import annotations

import dagster as dg
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract, loads
from fair_pipeline.ingestion.assets import items, observational_impressions
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.ingestion.landing import landed_dates, partition_files, write_parquet_atomic
from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.resources import default_resources

DAY = "2026-01-01"


def _file(landing, source="observational", day=DAY):
    return landing / source / f"date={day}" / "part-0.parquet"


def _load(landing, **kwargs):
    with warehouse.session(settings.warehouse_path()) as con:
        return loads.load_partition(con, landing, "observational", DAY, **kwargs)


def _stored(sql="SELECT count(*), sum(score), sum(click) FROM raw.observational_impressions"):
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute(sql).fetchall()


def _with_columns(table: pa.Table, **columns) -> pa.Table:
    for name, values in columns.items():
        table = table.append_column(name, pa.array(values)) if name not in table.column_names else table.set_column(
            table.column_names.index(name), name, pa.array(values)
        )
    return table


def _materialize(assets, partition_key=DAY, **kwargs):
    return dg.materialize(
        assets, partition_key=partition_key, resources=default_resources(), instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False, **kwargs,
    )


def test_extra_internal_looking_columns_change_nothing(small_landing):
    """`t_score`, `t_ts`, `t_click`, `t_request_id`, `filename`: ignored; the contract columns decide."""
    path = _file(small_landing)
    table = pq.read_table(path)
    n = table.num_rows
    frame = table.to_pandas()
    bad_click = np.arange(0, n, 100)  # 1% of rows get click = 5, which t_click = 1 must not hide
    next_day = np.arange(50, n, 100)  # and 1% a ts on the next day, which t_ts must not hide
    clicks = frame.click.to_numpy().copy()
    clicks[bad_click] = 5
    ts = frame.ts.copy()
    ts.iloc[next_day] = ts.iloc[next_day] + np.timedelta64(1, "D")
    hostile = _with_columns(
        table,
        click=pa.array(clicks, pa.int32()),
        ts=pa.array(ts, table.schema.field("ts").type),
        t_score=np.zeros(n),
        t_ts=pa.array(frame.ts, table.schema.field("ts").type),
        t_click=np.ones(n, np.int32),
        t_request_id=["same"] * n,
        filename=["not-a-file"] * n,
        t_position=np.ones(n, np.int32),
    )
    pq.write_table(hostile, path)
    load = _load(small_landing)
    assert load.rejected_by_reason == {"click not 0/1": len(bad_click), "date outside partition": len(next_day)}
    assert load.accepted == n - len(bad_click) - len(next_day)
    stored = _stored("SELECT request_id, position, score, source_file FROM raw.observational_impressions")
    assert len({(r[0], r[1]) for r in stored}) == load.accepted, "t_request_id must not collapse requests"
    good = frame.drop(index=np.concatenate([bad_click, next_day]))
    assert sorted(r[2] for r in stored) == sorted(good.score), "stored scores are the file's score column"
    assert {r[3] for r in stored} == {path.relative_to(small_landing).as_posix()}, \
        "a `filename` column does not replace the source file"


def test_reserved_and_duplicate_columns_are_refused_naming_file_and_column(small_landing):
    path = _file(small_landing)
    table = pq.read_table(path)
    pq.write_table(_with_columns(table, file_row_number=np.arange(table.num_rows)), path)
    with pytest.raises(loads.LandingFileError, match=r"part-0\.parquet has reserved columns \['file_row_number'\]"):
        _load(small_landing)
    duplicated = pa.Table.from_arrays([*table.columns, table.column("score")], names=[*table.column_names, "score"])
    pq.write_table(duplicated, path)
    with pytest.raises(loads.LandingFileError, match=r"part-0\.parquet has duplicate columns \['score'\]"):
        _load(small_landing)


def test_date_typed_ts_and_list_typed_score_are_refused(small_landing):
    path = _file(small_landing)
    table = pq.read_table(path)
    as_date = table.set_column(0, "ts", pa.compute.cast(table.column("ts"), pa.date32()))
    pq.write_table(as_date, path)
    with pytest.raises(loads.LandingFileError, match=r"column 'ts' is date32\[day\]; expected timestamp"):
        _load(small_landing)
    score_index = table.column_names.index("score")
    listed = table.set_column(score_index, "score", pa.array([[s] for s in table.column("score").to_pylist()]))
    pq.write_table(listed, path)
    with pytest.raises(loads.LandingFileError, match=r"column 'score' is list<element: double>; expected double"):
        _load(small_landing)


def test_invalid_utf8_is_refused_naming_the_file(small_landing):
    assert _materialize([observational_impressions]).success
    before = _stored()
    table = pq.read_table(_file(small_landing))
    group_ids = [value.encode() for value in table.column("group_id").to_pylist()]
    group_ids[7] = b"\xff\xfe"
    broken = table.set_column(
        table.column_names.index("group_id"), "group_id", pa.array(group_ids, pa.binary()).view(pa.string())
    )
    pq.write_table(broken, _file(small_landing))
    with pytest.raises(loads.LandingFileError, match=r"part-0\.parquet.*not valid UTF8.*left unchanged"):
        _load(small_landing)
    assert _stored() == before


def test_all_rejected_file_fails_before_commit_and_keeps_the_partition(small_landing):
    assert _materialize([observational_impressions]).success
    before = _stored()
    assert before[0][0] == pq.read_metadata(_file(small_landing)).num_rows
    table = pq.read_table(_file(small_landing))
    misspelled = _with_columns(table, policy=["prodution"] * table.num_rows)
    pq.write_table(misspelled, _file(small_landing))
    result = _materialize([observational_impressions])
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert f"all {table.num_rows} rows rejected (most common reason: unknown policy)" in message
    assert "part-0.parquet" in message
    assert _stored() == before, "the stored partition is exactly the old one"
    assert _stored("SELECT count(*) FROM raw.quarantine") == [(0,)]


def test_one_all_rejected_file_among_good_ones_fails_the_partition(small_landing):
    assert _materialize([observational_impressions]).success
    before = _stored()
    table = pq.read_table(_file(small_landing))
    broken = _with_columns(table.slice(0, 10), click=pa.array([7] * 10, pa.int32()))
    pq.write_table(broken, _file(small_landing).with_name("part-1.parquet"))
    with pytest.raises(loads.LandingFileError, match=r"part-1\.parquet: all 10 rows rejected .*click not 0/1"):
        _load(small_landing)
    assert _stored() == before


def test_integer_ts_and_types_that_differ_between_files_are_refused(small_landing):
    table = pq.read_table(_file(small_landing))
    part_1 = _file(small_landing).with_name("part-1.parquet")
    pq.write_table(_with_columns(table.slice(0, 10), ts=pa.array(np.arange(10), pa.int64())), part_1)
    with pytest.raises(loads.LandingFileError, match=r"part-1\.parquet: column 'ts' is int64; expected timestamp"):
        _load(small_landing)
    pq.write_table(_with_columns(table.slice(0, 10), score=pa.array(["0.5"] * 10)), part_1)
    with pytest.raises(loads.LandingFileError, match=r"part-1\.parquet: column 'score' is string but double in .*part-0"):
        _load(small_landing)


def test_zero_row_file_fails_unless_allow_empty(small_landing):
    assert _materialize([observational_impressions]).success
    before = _stored()
    table = pq.read_table(_file(small_landing))
    pq.write_table(table.slice(0, 0), _file(small_landing))
    result = _materialize([observational_impressions])
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "part-0.parquet has no rows" in message and "allow_empty" in message
    assert _stored() == before
    config = {"ops": {"raw__observational_impressions": {"config": {"allow_empty": True}}}}
    assert _materialize([observational_impressions], run_config=config).success
    assert _stored("SELECT count(*) FROM raw.observational_impressions") == [(0,)]


def test_huge_scores_and_blank_ids_are_quarantined(small_landing):
    table = pq.read_table(_file(small_landing))
    frame = table.to_pandas()
    frame.loc[3, "score"] = 1e17
    frame.loc[4, "score"] = -2e12
    frame.loc[5, "score"] = 1e12  # exactly the bound: kept
    frame.loc[6, "request_id"] = " \t "
    frame.loc[7, "item_id"] = "  "
    frame.loc[8, "query_id"] = "\n"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), _file(small_landing))
    load = _load(small_landing)
    assert load.rejected_by_reason == {
        f"|score| above {contract.MAX_ABS_SCORE:g}": 2, "missing request_id": 1, "missing item_id": 1, "missing query_id": 1,
    }
    assert load.accepted == table.num_rows - 5
    assert _stored("SELECT count(*) FROM raw.observational_impressions WHERE score = 1e12") == [(1,)]


def test_temp_and_hidden_files_are_never_read(small_landing):
    folder = _file(small_landing).parent
    rows = pq.read_metadata(_file(small_landing)).num_rows
    (folder / ".tmp-abc123.parquet").write_bytes(b"PAR1 half a file")  # a writer killed mid-write
    pq.write_table(pq.read_table(_file(small_landing)), folder / ".hidden.parquet")  # a complete copy
    pq.write_table(pq.read_table(_file(small_landing)), folder / "_staging.parquet")
    assert partition_files(small_landing, "observational", DAY) == [_file(small_landing)]
    assert _load(small_landing).accepted == rows, "no row counted twice"
    # A folder holding only a temp file is not a landed day.
    lone = small_landing / "observational" / "date=2026-01-05"
    lone.mkdir()
    (lone / ".tmp-x.parquet").write_bytes(b"")
    assert landed_dates(small_landing, "observational") == ["2026-01-01", "2026-01-02"]


def test_atomic_write_leaves_no_file_when_the_writer_fails(tmp_path, monkeypatch):
    target = tmp_path / "date=2026-01-01" / "part-0.parquet"

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(OSError, match="disk full"):
        write_parquet_atomic(pa.table({"a": [1]}), target)
    assert list(target.parent.iterdir()) == []


def test_items_copies_column_does_not_defeat_duplicate_detection_and_text_features_are_reported(small_landing):
    path = small_landing / contract.ITEMS_DIR / f"date={DAY}" / "items.parquet"
    table = pq.read_table(path)
    n = table.num_rows
    repeated = pa.concat_tables([table, table.slice(0, 3)])
    # the repeated ids come back with another colour: conflicting rows, not an exact re-delivery
    hostile = _with_columns(
        repeated, _copies=np.ones(n + 3, np.int64), filename=["x"] * (n + 3), colour=["red"] * n + ["blue"] * 3
    )
    pq.write_table(hostile, path)
    result = _materialize([items], partition_key=None)
    assert result.success
    metadata = result.asset_materializations_for_node("raw__items")[0].metadata
    assert metadata["rejected_rows"].value == 6, "both copies of each of the 3 repeated ids are quarantined"
    assert metadata["dagster/row_count"].value == n - 3
    assert metadata["non_numeric_columns"].value == ["filename", "colour"]
    assert _stored("SELECT count(DISTINCT source_file) FROM raw.quarantine WHERE source = 'items'") == [(1,)]
    assert _stored("SELECT min(source_file) FROM raw.quarantine WHERE source = 'items'") == [(f"items/date={DAY}/items.parquet",)]


def test_source_file_is_stored_relative_to_the_landing_root_and_errors_name_the_full_path(small_landing, tmp_path):
    """`source_file` (raw impressions, their quarantine, the items' quarantine) holds the path under the landing
    root, so it leaks no host layout and stays right when the home moves; refusals still name the full path."""
    import shutil

    path = _file(small_landing)
    table = pq.read_table(path)
    clicks = np.asarray(table.column("click")).copy()
    clicks[0] = 5
    pq.write_table(_with_columns(table, click=pa.array(clicks, pa.int32())), path)
    load = _load(small_landing)
    assert load.rejected == 1
    relative = "observational/date=2026-01-01/part-0.parquet"
    for sql in ("SELECT DISTINCT source_file FROM raw.observational_impressions",
                "SELECT DISTINCT source_file FROM raw.quarantine WHERE source = 'observational'"):
        assert _stored(sql) == [(relative,)], sql
    assert (small_landing / relative).resolve() == path.resolve(), "it resolves to the file under the landing root"

    # The same files under another root store the same values.
    moved = tmp_path / "elsewhere" / "landing"
    shutil.copytree(small_landing, moved)
    _load(moved)
    assert _stored("SELECT DISTINCT source_file FROM raw.observational_impressions") == [(relative,)]
    assert str(tmp_path) not in str(_stored("SELECT list(DISTINCT source_file) FROM raw.quarantine"))

    # A file refused whole is named by its full path, where the user can find it.
    pq.write_table(_with_columns(table, policy=["prodution"] * table.num_rows), moved / relative)
    with pytest.raises(loads.LandingFileError, match="all .* rows rejected") as refused:
        _load(moved)
    assert str(moved / relative) in str(refused.value)

    # Items: the quarantined copies name the delivery's file, `items/date=D/items.parquet`.
    items_path = small_landing / contract.ITEMS_DIR / f"date={DAY}" / "items.parquet"
    catalogue = pq.read_table(items_path)
    changed = catalogue.slice(0, 1)
    changed = changed.set_column(changed.schema.get_field_index("group_id"), "group_id",
                                 pa.array(["changed"], changed.schema.field("group_id").type))
    pq.write_table(pa.concat_tables([catalogue, changed]), items_path)
    with warehouse.session(settings.warehouse_path()) as con:
        assert load_items(con, small_landing).rejected == 2
    assert _stored("SELECT DISTINCT source_file FROM raw.quarantine WHERE source = 'items'") == [(f"items/date={DAY}/items.parquet",)]


def test_extras_schema_changes_are_kept_and_reported(small_landing):
    """raw.<source>_extras takes its shape from the first day; a later day's new column is added (earlier days
    read NULL), its missing column is NULL for that day, and the asset's metadata says both."""
    day_2 = "2026-01-02"
    keys = {day: pq.read_table(_file(small_landing, day=day), columns=["request_id", "position"]).slice(0, 20)
            for day in (DAY, day_2)}
    extras = {DAY: {"propensity": np.full(20, 0.5), "campaign": ["a"] * 20},
              day_2: {"propensity": np.full(20, 0.25), "bid": np.arange(20, dtype=np.int64)}}
    for day, columns in extras.items():
        table = keys[day]
        for name, values in columns.items():
            table = table.append_column(name, pa.array(values))
        write_parquet_atomic(table, small_landing / contract.EXTRAS_DIR / "observational" / f"date={day}" / "part-0.parquet")
    first = _materialize([observational_impressions], DAY)
    second = _materialize([observational_impressions], day_2)
    assert first.success and second.success
    metadata = second.asset_materializations_for_node("raw__observational_impressions")[0].metadata
    assert metadata["extras_schema_changes"].data == {day_2: {"added": ["bid"], "missing": ["campaign"], "widened": []}}
    assert first.asset_materializations_for_node("raw__observational_impressions")[0].metadata[
        "extras_schema_changes"].data == {}
    rows = _stored("SELECT CAST(partition_date AS VARCHAR), count(*), sum(propensity), count(campaign), count(bid), "
                   "sum(bid) FROM raw.observational_extras GROUP BY ALL ORDER BY 1")
    assert rows == [(DAY, 20, 10.0, 20, 0, None), (day_2, 20, 5.0, 0, 20, 190)]
