"""One SparkSession for every Spark test (the JVM starts once): local[2], 1 GB driver, no UI, two shuffle
partitions, four score ranges per audit. Every test here is marked `spark`. They run in CI: .ci/run installs Java 17 when it is absent and
pyspark comes with the dev extra, so in CI a missing Java fails; on a developer machine without Java they are
skipped with the reason in pytest's summary."""
from __future__ import annotations


import os

import pytest

from tests.platform.spark.cluster import SHORT_LIVED_JVM_OPTIONS, require_java, standalone_cluster


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/platform/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    require_java("the Spark tests")
    from fair_pipeline.audit.spark_audit import PARTITIONS_CONF
    from fair_pipeline.platform.engines.spark_engine import spark_session

    # Four score ranges per audit (default 16): every range is a task of each of an audit's stages, and the
    # pipeline's audits here have a few thousand rows; tests that check the merge of many ranges name theirs.
    with pytest.MonkeyPatch.context() as env:
        # Its JVM runs the queries of every test here for many minutes: C2's compiled code pays off there, unlike in
        # the short-lived JVMs tests/conftest.py gives C1 alone (a user's own JAVA_TOOL_OPTIONS is kept).
        if os.environ.get("JAVA_TOOL_OPTIONS") == SHORT_LIVED_JVM_OPTIONS:
            env.delenv("JAVA_TOOL_OPTIONS")
        session = spark_session(master="local[2]", driver_memory="1g", shuffle_partitions=2,
                                config={PARTITIONS_CONF: "4"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """One standalone master and worker (two JVM starts) for the modules whose jobs run on a cluster in processes of
    their own, never in this process (tests/conftest.py's SHARED_CLUSTER: one worker runs them together). Each such
    process ends its application, so the next one gets the worker's cores."""
    require_java("the cluster tests")
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), cores=2, memory="2g") as started:
        yield started
