"""The item catalogue on Spark is written by the executors from the landing files (`spark_catalogue.write_items`), not
copied through the driver: it equals DuckDB's raw.items row for row and column for column, for deliveries whose files
differ in integer widths and columns, with missing ids, conflicting ids, exact copies and labels with quotes, `+`,
HTML and non-Latin text; no catalogue row is handed to Spark as local data (createDataFrame fails if called)."""
from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract, spark_catalogue
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.platform import warehouse
from fair_pipeline.platform.engines import fetch_rows

LABELS = ["Women's", "age 65+", "<b>&amp;</b>", "女性", None]


def _delivery(landing, day: str, files: dict[str, pa.Table]) -> None:
    folder = landing / contract.ITEMS_DIR / f"date={day}"
    folder.mkdir(parents=True)
    for name, table in files.items():
        pq.write_table(table, folder / name)


def _table(ids, widths=pa.int32(), extra=False) -> pa.Table:
    n = len(ids)
    columns = {"item_id": pa.array(ids, pa.string()), "group_id": pa.array([LABELS[i % 5] for i in range(n)]),
               "f0": pa.array([i / 7 for i in range(n)]), "f1": pa.array(list(range(n)), widths),
               "label": pa.array([f"t{i}+'é" for i in range(n)])}
    if extra:
        columns["f2"] = pa.array([float(i) if i % 3 else None for i in range(n)])
    return pa.table(columns)


def _same(a, b) -> bool:
    return all((isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-12)) or x == y
               for x, y in zip(a, b))


def test_the_catalogue_is_written_by_the_executors_as_duckdb_keeps_it(spark, tmp_path, monkeypatch):
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    landing = tmp_path / "landing"
    ids = [f"item-{i:03d}" for i in range(60)]
    first = pa.concat_tables([_table(ids[:40] + [None, "  "], pa.int32()),  # a missing id, a blank id
                              _table(ids[:1], pa.int32())])  # an exact copy of item-000's row
    conflicting = _table(ids[40:] + [ids[5]], pa.int64(), extra=True)  # item-005 again, with other values
    _delivery(landing, "2026-01-01", {"a.parquet": first, "b b+é.parquet": conflicting})
    _delivery(landing, "2026-01-05", {"c.parquet": _table(ids[::2], pa.int64(), extra=True)})
    engine = SparkEngine(spark, tmp_path / "spark_warehouse")
    with warehouse.session(tmp_path / "warehouse.duckdb") as con:
        load = load_items(con, landing)
        assert load.rejected_by_reason and load.exact_copies == 1
        with monkeypatch.context() as patched:
            patched.setattr(type(spark), "createDataFrame", lambda *a, **k: pytest.fail("rows through the driver"))
            rows = spark_catalogue.write_items(engine, con, landing)
        expected = con.execute("SELECT * FROM raw.items ORDER BY catalogue_date, item_id").fetchall()
        columns = [d[0] for d in con.execute("SELECT * FROM raw.items LIMIT 0").description]
    assert rows == len(expected) == load.accepted
    assert engine.table_columns(("raw", "items")) == columns
    got = fetch_rows(engine, "SELECT * FROM raw.items ORDER BY catalogue_date, item_id")
    assert len(got) == len(expected) and all(_same(g, e) for g, e in zip(got, expected)), (got[:3], expected[:3])
    assert {row[columns.index("catalogue_date")] for row in got} == {dt.date(2026, 1, 1), dt.date(2026, 1, 5)}
