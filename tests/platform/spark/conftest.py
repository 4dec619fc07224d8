"""One SparkSession for every Spark test (the JVM starts once): local[2], 1 GB driver, no UI, two shuffle
partitions. Every test here is marked `spark`. They run in CI: .ci/run installs Java 17 when it is absent and
pyspark comes with the dev extra, so in CI a missing Java fails; on a developer machine without Java they are
skipped with the reason in pytest's summary."""
from __future__ import annotations


import pytest

from tests.platform.spark.cluster import require_java


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/platform/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    require_java("the Spark tests")
    from fair_pipeline.platform.engines.spark_engine import spark_session

    session = spark_session(master="local[2]", driver_memory="1g", shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
