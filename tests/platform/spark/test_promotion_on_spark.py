"""`promote` on a home run with `--engine spark`: the newest day with data is read from the Spark warehouse, whose
raw partitions hold the days (the DuckDB file's raw tables stay empty on that engine), so promoting an older
partition is refused as a rollback, as on DuckDB."""
from __future__ import annotations

import datetime as dt
import types

import pytest

from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.engines.spark_engine import SparkEngine
from fair_pipeline.selection import promotion

RAW = ("raw", "observational_impressions")
_ONE_DAY = "SELECT CAST($partition_date AS DATE) AS partition_date, 'r-1' AS request_id WHERE $rows"


@pytest.fixture
def spark_home(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(tmp_path))
    with warehouse.session(settings.warehouse_path()):
        pass  # the DuckDB file of a Spark run: result stores only, no raw day
    engine = SparkEngine(spark, settings.spark_warehouse_dir())
    for day, rows in (("2026-01-01", True), ("2026-01-03", True), ("2026-01-05", False)):  # 01-05: no rows
        engine.replace_partition(RAW, _ONE_DAY, {"partition_date": day, "rows": rows}, day)
    return tmp_path


def test_the_newest_day_with_data_comes_from_the_spark_warehouse(spark_home):
    assert promotion.newest_partition_with_data() == dt.date(2026, 1, 3)


def test_promoting_an_older_partition_of_a_spark_home_is_refused_as_a_rollback(spark_home, monkeypatch):
    version = types.SimpleNamespace(version="3", tags={"candidate": "c", "selection_run": "r"})
    monkeypatch.setattr(promotion, "selected_versions", lambda tracking, day: [version])
    tracking = types.SimpleNamespace(set_champion=lambda *args: pytest.fail("the champion moved"))
    with pytest.raises(promotion.PromotionError, match=r"older than the newest partition with data \(2026-01-03\)"):
        promotion.promote(dt.date(2026, 1, 1), tracking=tracking)


def test_the_newest_day_of_a_warehouse_only_hadoop_reads_comes_through_the_spark_session(spark, spark_home,
                                                                                           monkeypatch):
    """A warehouse given by a scheme this machine's files do not serve (Hadoop's viewfs://, mounted here on the home's
    warehouse) is listed through the configured Spark session's Hadoop client."""
    hadoop = spark._jsc.hadoopConfiguration()
    hadoop.set("fs.viewfs.mounttable.promotion.link./tables", f"file://{settings.spark_warehouse_dir()}")
    monkeypatch.setenv(settings.SPARK_WAREHOUSE_ENV, "viewfs://promotion/tables")
    try:
        assert promotion.newest_partition_with_data() == dt.date(2026, 1, 3)
    finally:
        hadoop.unset("fs.viewfs.mounttable.promotion.link./tables")
