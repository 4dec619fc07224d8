"""fair_pipeline: end-to-end fair ranking on Dagster + DuckDB + MLflow."""

__version__ = "0.1.0"
