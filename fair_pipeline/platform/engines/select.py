"""Which engine a run uses: DuckDB (the warehouse file) or Spark (one SparkSession per process).

`require_engine` checks, before a run starts, that Spark can start here (pyspark importable, Java found), so a
missing piece is one clear line rather than a JVM stack trace from the first step."""
from __future__ import annotations

import importlib.util
import os
import shutil

import duckdb

from fair_pipeline.platform import settings
from fair_pipeline.platform.engines.base import Warehouse
from fair_pipeline.platform.engines.duckdb_engine import DuckDBEngine


class EngineUnavailableError(ValueError):
    """The configured engine cannot start on this machine; the message says what to install."""


def require_engine(name: str) -> None:
    """Raise EngineUnavailableError when engine `name` cannot run here (DuckDB always can)."""
    if settings.engine(name) != "spark":
        return
    if importlib.util.find_spec("pyspark") is None:
        raise EngineUnavailableError("the spark engine needs pyspark>=4: pip install -e '.[spark]'")
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        raise EngineUnavailableError("the spark engine needs Java 17 (java on PATH or $JAVA_HOME): "
                                     "apt-get install openjdk-17-jre-headless")


def open_engine(name: str, con: duckdb.DuckDBPyConnection, spark_master: str = "") -> Warehouse:
    """The `Warehouse` of engine `name`: DuckDB over `con`, or Spark on the process's one SparkSession (started on
    first use with `spark_master`; later calls reuse it) and the Parquet tables under $FAIR_PIPELINE_HOME."""
    if settings.engine(name) == "duckdb":
        return DuckDBEngine(con)
    require_engine("spark")
    from fair_pipeline.platform.engines.spark_engine import SparkEngine, spark_session

    return SparkEngine(spark_session(master=settings.spark_master(spark_master),
                                     driver_memory=settings.spark_driver_memory(), config=settings.spark_conf()))
