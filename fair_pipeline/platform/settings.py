"""Paths and knobs. FAIR_PIPELINE_HOME (default ./data) roots every generated file.

Functions, not module constants: tests and the CLI change the environment at run time.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

HOME_ENV = "FAIR_PIPELINE_HOME"
MLFLOW_UI_URL_ENV = "FAIR_PIPELINE_MLFLOW_UI_URL"  # where people open MLflow (links in Dagster's metadata)
DEFAULT_MLFLOW_UI_PORT = 5000
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # fair_pipeline/
REPO_ROOT = PACKAGE_ROOT.parent
SQL_ROOT = REPO_ROOT / "dbt_like_sql"
EXTERNAL_DATA = REPO_ROOT / "data" / "external"


def home() -> Path:
    return Path(os.environ.get(HOME_ENV, "data")).resolve()


def landing_dir() -> Path:
    return home() / "landing"


def warehouse_path() -> Path:
    return home() / "warehouse.duckdb"


def mlflow_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{home() / 'mlflow.db'}"


def mlflow_ui_url() -> str:
    """The MLflow UI that links point to: $FAIR_PIPELINE_MLFLOW_UI_URL, else the tracking server itself when
    it is one (http/https), else the local UI that `fair-pipeline ui` starts."""
    configured = os.environ.get(MLFLOW_UI_URL_ENV)
    if configured:
        return configured.rstrip("/")
    uri = mlflow_tracking_uri()
    if urlparse(uri).scheme in ("http", "https"):
        return uri.rstrip("/")
    return f"http://127.0.0.1:{DEFAULT_MLFLOW_UI_PORT}"


def mlflow_ui_port() -> int:
    """The port `fair-pipeline ui` serves MLflow on by default: the configured UI URL's, so links and server agree."""
    return urlparse(mlflow_ui_url()).port or DEFAULT_MLFLOW_UI_PORT


def mlflow_artifact_root() -> Path:
    return home() / "mlartifacts"


def reports_dir() -> Path:
    return home() / "reports"


def dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or home() / "dagster_home").resolve()


def default_elicitation_db() -> Path:
    """Where `fair-pipeline elicit` keeps sessions and answers, and the `recorded` oracle reads them."""
    return home() / "elicitation.duckdb"
