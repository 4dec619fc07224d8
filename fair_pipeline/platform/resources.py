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
    """The warehouse file; empty `path` means $FAIR_PIPELINE_HOME/warehouse.duckdb."""

    path: str = ""

    @property
    def resolved_path(self) -> Path:
        return Path(self.path) if self.path else settings.warehouse_path()

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with warehouse.session(self.resolved_path, read_only=read_only) as con:
            yield con


class LandingZone(dg.ConfigurableResource):
    """Where landing files arrive; empty `path` means $FAIR_PIPELINE_HOME/landing."""

    path: str = ""

    @property
    def resolved_path(self) -> Path:
        return Path(self.path) if self.path else settings.landing_dir()


def default_resources() -> dict[str, object]:
    return {"warehouse": DuckDBWarehouse(), "landing": LandingZone(), "mlflow": MLflowTracking()}
