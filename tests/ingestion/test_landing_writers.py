"""Files of one day from different writers (pandas, pyarrow, Spark) load as one: compatible types are read by the
documented rule (`file_checks.type_family`), values checked one by one; only a real conflict refuses a file, by name."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import loads
from fair_pipeline.ingestion.landing import LandingFileError
from fair_pipeline.platform import settings, warehouse

DAY = "2026-01-01"
CHECKED = "ts, request_id, query_id, policy, position, original_position, item_id, group_id, score, click"


def _folder(landing):
    return landing / "observational" / f"date={DAY}"


def _load(landing):
    with warehouse.session(settings.warehouse_path()) as con:
        return loads.load_partition(con, landing, "observational", DAY)


def _stored():
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return sorted(con.execute(f"SELECT {CHECKED} FROM raw.observational_impressions").fetchall(),
                      key=lambda r: (r[1], r[4]))


def _cast(table: pa.Table, **types) -> pa.Table:
    for name, arrow_type in types.items():
        i = table.column_names.index(name)
        table = table.set_column(i, name, pc.cast(table[name], arrow_type))
    return table


def _three_writers(landing):
    """The day's file split in three: pandas-3-like, pyarrow-like (with an all-NULL group column) and Spark-like
    (naive timestamps, small unsigned and signed integers, dictionary-encoded text)."""
    folder = _folder(landing)
    table = pq.read_table(folder / "part-0.parquet")
    (folder / "part-0.parquet").unlink()
    n = table.num_rows // 3
    pandas_like = _cast(table.slice(0, n), request_id=pa.large_string(), query_id=pa.large_string(),
                        item_id=pa.large_string(), group_id=pa.large_string(), policy=pa.large_string(),
                        position=pa.int64(), original_position=pa.int64(), click=pa.int64(),
                        ts=pa.timestamp("ns", "UTC"))
    arrow_like = table.slice(n, n)
    arrow_like = arrow_like.set_column(arrow_like.column_names.index("group_id"), "group_id", pa.nulls(n, pa.null()))
    spark_like = _cast(table.slice(2 * n), ts=pa.timestamp("us"), position=pa.uint8(), original_position=pa.int16(),
                       click=pa.int8())
    spark_like = spark_like.set_column(spark_like.column_names.index("item_id"), "item_id",
                                       spark_like["item_id"].dictionary_encode())
    pq.write_table(pandas_like, folder / "pandas.parquet")
    pq.write_table(arrow_like, folder / "pyarrow.parquet")
    pq.write_table(spark_like, folder / "spark.parquet")
    expected = table.set_column(table.column_names.index("group_id"), "group_id",
                                pa.concat_arrays([table["group_id"].combine_chunks().slice(0, n), pa.nulls(n, pa.string()),
                                                  table["group_id"].combine_chunks().slice(2 * n)]))
    return expected


def test_a_day_of_three_writers_loads_value_for_value(small_landing):
    expected = _three_writers(small_landing)
    load = _load(small_landing)
    assert (load.accepted, load.rejected) == (expected.num_rows, 0)
    want = sorted((tuple(r.values()) for r in expected.select(CHECKED.split(", ")).to_pylist()), key=lambda r: (r[1], r[4]))
    got = _stored()
    assert [r[1:] for r in got] == [r[1:] for r in want]
    assert [r[0].timestamp() for r in got] == [r[0].timestamp() for r in want]  # a naive timestamp is UTC: the same instants


def test_wide_integers_out_of_range_are_rejected_rows_not_a_refused_day(small_landing):
    folder = _folder(small_landing)
    table = pq.read_table(folder / "part-0.parquet")
    positions = table["position"].to_pylist()
    positions[0] = 2**40 + 1  # read as BIGINT; wraps to 1 if narrowed blindly
    wide = table.set_column(table.column_names.index("position"), "position", pa.array(positions, pa.int64()))
    pq.write_table(wide.slice(0, 100), folder / "part-0.parquet")
    pq.write_table(table.slice(100), folder / "part-1.parquet")  # int32 positions
    load = _load(small_landing)
    assert load.rejected_by_reason == {"position outside 1..K": 1}
    assert load.accepted == table.num_rows - 1


def test_a_real_conflict_is_refused_naming_file_and_column_and_keeps_the_partition(small_landing):
    _load(small_landing)
    before = _stored()
    folder = _folder(small_landing)
    table = pq.read_table(folder / "part-0.parquet")
    pq.write_table(_cast(table.slice(0, 50), score=pa.string()), folder / "part-1.parquet")
    with pytest.raises(LandingFileError, match=r"part-1\.parquet: column 'score' is string but double in .*part-0\.parquet"):
        _load(small_landing)
    assert _stored() == before


def test_the_reserved_row_number_column_is_refused_in_any_case(small_landing):
    path = _folder(small_landing) / "part-0.parquet"
    table = pq.read_table(path)
    pq.write_table(table.append_column("FILE_ROW_NUMBER", pa.array(range(table.num_rows))), path)
    with pytest.raises(LandingFileError, match=r"part-0\.parquet has reserved columns \['FILE_ROW_NUMBER'\]"):
        _load(small_landing)


def test_a_file_with_damaged_pages_is_named(small_landing):
    """Flipped bits inside the data pages (the footer intact): DuckDB fails with `Out of buffer` or a codec error
    naming no file; the error names the file and the partition stays as it was."""
    import random

    _load(small_landing)
    before = _stored()
    path = _folder(small_landing) / "part-0.parquet"
    good = path.read_bytes()
    named = 0
    for seed in range(12):
        rng, data = random.Random(seed), bytearray(good)
        for _ in range(8):
            data[rng.randrange(4, len(data) - 2000)] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        try:
            _load(small_landing)
        except LandingFileError as error:
            assert str(path) in str(error) and "unreadable landing file" in str(error)
            named += 1
            assert _stored() == before
        else:  # a flip that changed no structure loads (values in it may differ: Parquet stores no checksum here)
            path.write_bytes(good)
            _load(small_landing)
            before = _stored()
    assert named >= 6


def test_extras_with_a_partition_date_column_or_without_keys_are_refused_by_name(small_landing):
    from fair_pipeline.ingestion import contract

    _load(small_landing)
    before = _stored()
    keys = pq.read_table(_folder(small_landing) / "part-0.parquet", columns=["request_id", "position"]).slice(0, 20)
    extras = small_landing / contract.EXTRAS_DIR / "observational" / f"date={DAY}" / "part-0.parquet"
    extras.parent.mkdir(parents=True)
    pq.write_table(keys.append_column("Partition_Date", pa.array(["2020-01-01"] * 20)), extras)
    with pytest.raises(LandingFileError, match=r"extras/observational/date=2026-01-01/part-0\.parquet: has reserved "
                                               r"columns \['Partition_Date'\]"):
        _load(small_landing)
    pq.write_table(keys.drop_columns(["position"]).append_column("propensity", pa.array([0.5] * 20)), extras)
    with pytest.raises(LandingFileError, match=r"lacks key columns \['position'\]"):
        _load(small_landing)
    assert _stored() == before
