"""Parity: the dbt_like_sql models built on Spark equal DuckDB's, table by table, row for row.

Both engines start from the same landing files: ingestion validates them in DuckDB (raw.* and raw.quarantine,
including rejected rows), the raw layer is copied to the Spark engine, and every model is built on each engine
by the same `build_model` from the same DuckDB-dialect SQL."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.ingestion import contract
from fair_pipeline.platform import sql_models, warehouse
from fair_pipeline.platform.engines import DuckDBEngine
from fair_pipeline.platform.engines.spark_engine import SparkEngine
from fair_pipeline.platform.engines.transfer import copy_partitions, copy_table
from tests.platform import small_warehouse

RAW_PARTITIONED = [("raw", f"{source}_impressions") for source in contract.SOURCES] + [("raw", "quarantine")]


@pytest.fixture(scope="module")
def engines(spark, tmp_path_factory):
    home = tmp_path_factory.mktemp("parity")
    landing = small_warehouse.simulate_landing(home / "landing")
    small_warehouse.load_raw(home / "warehouse.duckdb", landing)
    with warehouse.session(home / "warehouse.duckdb") as con:
        duck = DuckDBEngine(con)
        spark_engine = SparkEngine(spark, home / "spark_warehouse")
        for table in RAW_PARTITIONED:
            copy_partitions(duck, spark_engine, table, small_warehouse.PARTITIONS)
        copy_table(duck, spark_engine, ("raw", "items"))
        built = {"duckdb": small_warehouse.build_models(duck), "spark": small_warehouse.build_models(spark_engine)}
        yield duck, spark_engine, built


def _normalized(frame: pd.DataFrame) -> pd.DataFrame:
    """Comparable values: dates and timestamps as ISO text, numbers as float, NULL/NaN as None; rows sorted."""
    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_datetime64_any_dtype(values) or values.map(lambda v: hasattr(v, "isoformat")).any():
            out[column] = values.map(lambda v: None if v is None or pd.isna(v) else pd.Timestamp(v).isoformat())
        elif pd.api.types.is_bool_dtype(values) or values.map(lambda v: isinstance(v, (bool, np.bool_))).any():
            out[column] = values.map(lambda v: None if v is None or pd.isna(v) else bool(v))
        elif pd.api.types.is_numeric_dtype(values):
            out[column] = values.astype(float)
        else:
            out[column] = values.map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    return out.sort_values(list(out.columns), na_position="first", key=lambda s: s.map(repr)).reset_index(drop=True)


def _assert_same_rows(name: str, duck: pd.DataFrame, spark: pd.DataFrame) -> None:
    assert list(duck.columns) == list(spark.columns), f"{name}: columns differ"
    assert len(duck) == len(spark), f"{name}: {len(duck)} rows on DuckDB, {len(spark)} on Spark"
    left, right = _normalized(duck), _normalized(spark)
    for column in left.columns:
        a, b = left[column], right[column]
        if a.dtype == float:
            np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=0, atol=1e-9, equal_nan=True,
                                       err_msg=f"{name}.{column}")
        else:
            mismatch = [(x, y) for x, y in zip(a, b) if x != y]
            assert not mismatch, f"{name}.{column}: {len(mismatch)} values differ, e.g. {mismatch[:3]}"


def test_every_model_has_the_same_row_counts(engines):
    _, _, built = engines
    assert built["spark"] == built["duckdb"]
    assert built["duckdb"]["stg_quarantine"] > 0 and min(built["duckdb"].values()) > 0


@pytest.mark.parametrize("model", sorted(sql_models.discover_models()))
def test_every_model_equals_duckdb_row_for_row(engines, model):
    duck, spark_engine, _ = engines
    table = sql_models.discover_models()[model].key
    sql = f"SELECT * FROM {table[0]}.{table[1]}"
    _assert_same_rows(model, duck.query_df(sql), spark_engine.query_df(sql))


@pytest.mark.parametrize("table", RAW_PARTITIONED + [("raw", "items")])
def test_the_copied_raw_layer_equals_duckdb(engines, table):
    duck, spark_engine, _ = engines
    where = " WHERE partition_date IS NOT NULL" if table == ("raw", "quarantine") else ""
    sql = f"SELECT * FROM {table[0]}.{table[1]}{where}"
    _assert_same_rows(".".join(table), duck.query_df(sql), spark_engine.query_df(sql))
