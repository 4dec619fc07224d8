"""Ingestion on Spark equals ingestion on DuckDB: the landing fuzz corpus (tests/ingestion/test_landing_fuzz.py:
broken schemas, hostile column names, wrong types, bad values, duplicates, zero rows) loaded by both loaders gives
the same refusals, the same stored rows value for value and the same quarantine (reason, file and the row's ids).
Both run the contract's one SQL source (ingestion/rules.py); Spark through its rendering.
FUZZ_SPARK_EXAMPLES (default 15) sets the number of generated files; every example is a few Spark jobs."""
from __future__ import annotations

import collections
import datetime as dt
import os

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings

from fair_pipeline.ingestion import loads, spark_loads
from fair_pipeline.ingestion.landing import partition_dir
from fair_pipeline.platform import warehouse
from fair_pipeline.platform.engines import fetch_rows
from tests.ingestion.test_landing_fuzz import DAY, _sorted, landing_files

pytestmark = pytest.mark.spark
QUARANTINE_IDS = "SELECT reason, source_file, request_id, item_id, position FROM raw.quarantine WHERE partition_date = $d"


@pytest.fixture(scope="module")
def spark_engine(spark, tmp_path_factory):
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    return SparkEngine(spark, tmp_path_factory.mktemp("spark_warehouse"))


@pytest.fixture(scope="module")
def parity_home(tmp_path_factory):
    return tmp_path_factory.mktemp("parity")


def _load(load, *args):
    try:
        return load(*args), None
    except loads.LandingFileError as error:
        return None, str(error)


def _stored(engine_rows) -> list[tuple]:
    # The instant as UTC (DuckDB hands back an aware datetime, Spark a naive one in the session's UTC).
    return _sorted(tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in row)
                   for row in engine_rows)


# No shrinking: each example is several Spark jobs; a failure is reported as generated.
@settings(max_examples=int(os.environ.get("FUZZ_SPARK_EXAMPLES", "15")), deadline=None, derandomize=False,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=landing_files())
def test_the_fuzz_corpus_loads_alike_on_spark_and_duckdb(spark_engine, parity_home, case):
    table, _, _, refusal = case
    event(f"outcome: {refusal or 'loaded'}")
    landing = parity_home / "landing"
    path = partition_dir(landing, "observational", DAY) / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    day = DAY.isoformat()
    with warehouse.session(parity_home / "warehouse.duckdb") as con:
        duck_load, duck_error = _load(loads.load_partition, con, landing, "observational", day)
        duck_rows = con.execute("SELECT * EXCLUDE (source_file), source_file FROM raw.observational_impressions "
                                "WHERE partition_date = $d", {"d": day}).fetchall()
        duck_quarantine = con.execute(QUARANTINE_IDS, {"d": day}).fetchall()
    spark_load, spark_error = _load(spark_loads.load_partition, spark_engine, landing, "observational", day)
    if duck_error or spark_error:
        assert duck_error == spark_error, (duck_error, spark_error)
        return
    assert spark_load.accepted == duck_load.accepted and spark_load.rejected_by_reason == duck_load.rejected_by_reason
    spark_rows = fetch_rows(spark_engine, "SELECT * FROM raw.observational_impressions WHERE partition_date = $d",
                            {"d": day})
    assert _stored(spark_rows) == _stored(duck_rows), "the stored rows, value for value"
    spark_quarantine = fetch_rows(spark_engine, QUARANTINE_IDS, {"d": day})
    assert collections.Counter(spark_quarantine) == collections.Counter(duck_quarantine)
