"""MLflow runs of the EO stage, tagged with the Dagster run id and asset key (direct mlflow calls on the
FAIR_PIPELINE_HOME store until the shared `MLflowTracking` resource lands on main)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

import mlflow

from fair_pipeline import settings

EXPERIMENT = "fair_pipeline/eo_transform"
FAIR_RANKER = "fair-ranker"
CANDIDATE = "candidate"

# Progress bars from artifact downloads would clutter Dagster logs and the CLI.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def _experiment_id(client: mlflow.MlflowClient) -> str:
    found = client.get_experiment_by_name(EXPERIMENT)
    if found is not None:
        return found.experiment_id
    location = (settings.mlflow_artifact_root() / "eo_transform").resolve().as_uri()
    return client.create_experiment(EXPERIMENT, artifact_location=location)


@contextlib.contextmanager
def eo_run(context, run_name: str, tags: Mapping[str, str] | None = None) -> Iterator[mlflow.ActiveRun]:
    """An active MLflow run in the EO experiment; FAILED (and re-raised) if the block raises."""
    uri = settings.mlflow_tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    experiment_id = _experiment_id(mlflow.MlflowClient(uri, uri))
    all_tags = {"fair_pipeline.stage": "eo_transform", **(tags or {})}
    if context is not None:
        all_tags["dagster.run_id"] = context.run_id
        all_tags["dagster.asset_key"] = ",".join(k.to_user_string() for k in sorted(context.selected_asset_keys))
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=all_tags) as run:
        yield run
