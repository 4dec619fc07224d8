"""Dagster resources: the DuckDB warehouse, the landing zone and MLflow tracking. Paths default to FAIR_PIPELINE_HOME."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb

from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.tracking import MLflowTracking


class DuckDBWarehouse(dg.ConfigurableResource):
    """The warehouse file; empty `path` means $FAIR_PIPELINE_HOME/warehouse.duckdb. DuckDB's memory cap and
    spill directory: empty means $FAIR_PIPELINE_DUCKDB_MEMORY_LIMIT (default 384MB) and
    $FAIR_PIPELINE_DUCKDB_TEMP_DIR (default $FAIR_PIPELINE_HOME/duckdb_tmp)."""

    path: str = ""
    memory_limit: str = ""
    temp_directory: str = ""

    @property
    def resolved_path(self) -> Path:
        return Path(self.path) if self.path else settings.warehouse_path()

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with warehouse.session(self.resolved_path, read_only=read_only, memory_limit=self.memory_limit or None,
                               temp_directory=self.temp_directory or None) as con:
            yield con


class LandingZone(dg.ConfigurableResource):
    """Where landing files arrive; empty `path` means $FAIR_PIPELINE_HOME/landing."""

    path: str = ""

    @property
    def resolved_path(self) -> Path:
        return Path(self.path) if self.path else settings.landing_dir()


def default_resources() -> dict[str, object]:
    return {"warehouse": DuckDBWarehouse(), "landing": LandingZone(), "mlflow": MLflowTracking()}
