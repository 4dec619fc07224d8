"""`fair-pipeline ui`: the Dagster UI (with the daemon) and the MLflow UI until Ctrl-C."""
from __future__ import annotations

import argparse

from fair_pipeline.commands.console import say
from fair_pipeline.commands.results import DAGSTER_PORT
from fair_pipeline.platform import settings



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dagster-port", type=int, default=DAGSTER_PORT, help="Dagster webserver port")
    parser.add_argument("--mlflow-port", type=int, default=settings.mlflow_ui_port(),
                        help=f"MLflow UI port; the default is the port of ${settings.MLFLOW_UI_URL_ENV} (the MLflow "
                             f"URL that Dagster's metadata links to), else {settings.DEFAULT_MLFLOW_UI_PORT}: "
                             "%(default)s")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (127.0.0.1: this machine only)")


def run(args: argparse.Namespace) -> int:
    from fair_pipeline.ui import serve

    settings.home().mkdir(parents=True, exist_ok=True)
    return serve(args.dagster_port, args.mlflow_port, say, host=args.host)
