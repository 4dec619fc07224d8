"""The exposure audit's SQL on Spark equals DuckDB's and the array path: the logged ranking's exposure parity
(cells, per-cluster influence totals and their cross products) and the off-policy request sample (md5 order)."""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import exposure_parity
from fair_pipeline.audit.exposure_offpolicy import sampled_requests
from fair_pipeline.audit.exposure_sql import logged_exposure_parity
from fair_pipeline.audit.sql import UNKNOWN_GROUP
from fair_pipeline.platform.engines import DuckDBEngine
from fair_pipeline.platform.engines.spark_engine import SparkEngine
from fair_pipeline.platform.windows import PartitionWindow
from tests.audit.test_exposure_sql import DAY, W, _impressions

WINDOW = PartitionWindow(DAY, DAY, (DAY,))


@pytest.fixture(scope="module")
def engines(spark, tmp_path_factory):
    frame = pd.concat([_impressions(0, requests=150), _impressions(1, requests=60).assign(
        partition_date=DAY - dt.timedelta(days=1))], ignore_index=True)
    frame = frame.assign(policy="production", score=frame["position"].rsub(10).astype(float))
    items = frame[["item_id"]].drop_duplicates().assign(quality=lambda f: np.arange(len(f), dtype=float))
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging")
    spark_engine = SparkEngine(spark, tmp_path_factory.mktemp("exposure_spark"))
    for name, data in (("stg_observational_impressions", frame), ("stg_items", items)):
        con.register("f", data)
        con.execute(f"CREATE TABLE staging.{name} AS SELECT * FROM f")
        con.unregister("f")
        spark_engine.register_frame(f"exposure_{name}", data)
        spark_engine.create_view(("staging", name), f"SELECT * FROM exposure_{name}")
    yield DuckDBEngine(con), spark_engine, frame[frame["partition_date"] == DAY]
    con.close()


@pytest.mark.parametrize("clusters", [("item_id",), ("item_id", "request_id")])
def test_logged_exposure_parity_on_spark_equals_duckdb_and_the_arrays(engines, clusters):
    duck, spark_engine, frame = engines
    on_duckdb = logged_exposure_parity(duck, WINDOW, W, clusters=clusters, pairs="all")
    on_spark = logged_exposure_parity(spark_engine, WINDOW, W, clusters=clusters, pairs="all")
    arrays = exposure_parity(frame["position"], frame["click"], frame["group_id"].fillna(UNKNOWN_GROUP), W,
                             pairs="all", clusters={c: frame[c] for c in clusters})
    for name in ("per_group", "pairs"):
        d, s, a = (getattr(r, name) for r in (on_duckdb, on_spark, arrays))
        assert d["group"].tolist() == s["group"].tolist() == a["group"].tolist()
        numeric = [c for c in a.columns if a[c].dtype.kind == "f"]
        np.testing.assert_allclose(s[numeric].to_numpy(float), d[numeric].to_numpy(float), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(s[numeric].to_numpy(float), a[numeric].to_numpy(float), rtol=1e-9, atol=1e-12)
    assert len(on_spark.per_group) == 4  # three labelled groups (quotes, '+', CJK) and <unknown>


def test_the_offpolicy_sample_is_the_same_requests_on_both_engines(engines):
    duck, spark_engine, _ = engines
    on_duckdb, total_d = sampled_requests(duck, WINDOW, ["quality"], max_requests=40)
    on_spark, total_s = sampled_requests(spark_engine, WINDOW, ["quality"], max_requests=40)
    assert total_d == total_s == 150 and on_duckdb["request_id"].nunique() == 40
    key = ["request_id", "position"]
    pd.testing.assert_frame_equal(on_spark.sort_values(key).reset_index(drop=True)[on_duckdb.columns],
                                  on_duckdb.sort_values(key).reset_index(drop=True), check_dtype=False)
