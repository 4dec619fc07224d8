"""Dagster resources: the warehouse (the DuckDB file and the engine the SQL models run on), the landing zone and
MLflow tracking. Paths default to FAIR_PIPELINE_HOME."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb

from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.engines import Warehouse
from fair_pipeline.platform.engines.select import open_engine
from fair_pipeline.platform.tracking import MLflowTracking


class DuckDBWarehouse(dg.ConfigurableResource):
    """The warehouse file; empty `path` means $FAIR_PIPELINE_HOME/warehouse.duckdb. DuckDB's memory cap and
    spill directory: empty means $FAIR_PIPELINE_DUCKDB_MEMORY_LIMIT (default 384MB) and
    $FAIR_PIPELINE_DUCKDB_TEMP_DIR (default $FAIR_PIPELINE_HOME/duckdb_tmp).

    `engine` (empty: $FAIR_PIPELINE_ENGINE, default duckdb) is where the SQL models run and where the stages
    after them read marts, staging and raw tables (`engine_for`); `spark` runs them on the SparkSession of
    `spark_master` (empty: $FAIR_PIPELINE_SPARK_MASTER, default local[*]). Ingestion and the small result stores
    stay in the DuckDB file on either engine."""

    path: str = ""
    memory_limit: str = ""
    temp_directory: str = ""
    engine: str = ""
    spark_master: str = ""

    @property
    def resolved_engine(self) -> str:
        return settings.engine(self.engine)

    def engine_for(self, con: duckdb.DuckDBPyConnection) -> Warehouse:
        """The configured engine's `Warehouse`: DuckDB over `con` (the connection the caller holds), or Spark."""
        return open_engine(self.resolved_engine, con, self.spark_master)

    @property
    def resolved_path(self) -> Path:
        return Path(self.path) if self.path else settings.warehouse_path()

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with warehouse.session(self.resolved_path, read_only=read_only, memory_limit=self.memory_limit or None,
                               temp_directory=self.temp_directory or None) as con:
            yield con


class LandingZone(dg.ConfigurableResource):
    """Where landing files arrive: a folder, or a URI (`file://`, `hdfs://`, ...) that the spark engine reads through
    its session's Hadoop client; empty `path` means $FAIR_PIPELINE_LANDING, else $FAIR_PIPELINE_HOME/landing."""

    path: str = ""

    @property
    def location(self) -> str:
        return settings.landing_location(self.path)

    @property
    def resolved_path(self) -> Path:
        """The landing as a folder of this machine; a URI of another scheme raises RemoteLandingError naming it."""
        return settings.landing_dir(self.path)


def default_resources() -> dict[str, object]:
    return {"warehouse": DuckDBWarehouse(), "landing": LandingZone(), "mlflow": MLflowTracking()}
