"""Run logging: the `MLflowTracking` resource (resource key `mlflow`) opens a tagged run of a stage's experiment,
logs metrics, tables, SVG figures and models in it, and registers models (`registry`).

    with mlflow.start_run(context, "audit") as run:          # tags: Dagster run id, asset, partition, code version
        run.log_metrics({"pauc_gap": 0.03})
        run.log_table(partial_auc_frame, "partial_auc")        # for people browsing the MLflow UI
        run.log_figure(svg, "roc_by_group")                    # an SVG from fair_pipeline.charts
        uri = run.log_sklearn_model(model, "ranker")
        version = mlflow.register_model(uri, FAIR_RANKER, run=run)   # alias `candidate`, never half-registered
    mlflow.set_champion(FAIR_RANKER, version.version)         # model selection moves `champion`

Every logging call is retried while the store is locked (`store.Store.retry`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import dagster as dg
import pandas as pd
from pydantic import PrivateAttr

from fair_pipeline import charts
from fair_pipeline.platform import settings
from fair_pipeline.platform.tracking import registry
from fair_pipeline.platform.tracking.store import (
    CLASSIC_VIEW,
    TAG_ASSET,
    TAG_CODE_VERSION,
    TAG_DAGSTER_RUN,
    TAG_PARTITION,
    TAG_STAGE,
    TAG_WINDOW,
    TOKEN_TAG,
    Store,
    TrackingUnavailableError,
    checked_name,
    created_once,
    ensure_experiments,
    experiment_name,
    point_fluent_api_at,
    select_fluent_experiment,
)

# Explicit requirements make log_model fast (no environment inference) and reproducible.
PIP_REQUIREMENTS = ["scikit-learn", "numpy", "pandas", "scipy"]

T = TypeVar("T")


def dagster_tags(context: Any, window: tuple[str, str] | None = None) -> dict[str, str]:
    """Run id, asset key(s), partition (key or range) and code version of a Dagster execution context."""
    if context is None:
        return {TAG_WINDOW: f"{window[0]}..{window[1]}"} if window is not None else {}
    tags = {TAG_DAGSTER_RUN: context.run_id}
    keys = sorted(context.selected_asset_keys) if hasattr(context, "selected_asset_keys") else []
    if keys:
        tags[TAG_ASSET] = ",".join(key.to_user_string() for key in keys)
        versions = {
            version
            for key, version in context.assets_def.code_versions_by_key.items()
            if key in keys and version is not None
        }
        if versions:
            tags[TAG_CODE_VERSION] = ",".join(sorted(versions))
    text = None
    if getattr(context, "has_partition_key", False):
        text = context.partition_key
    elif context.has_partition_key_range:
        key_range = context.partition_key_range
        text = key_range.start if key_range.start == key_range.end else f"{key_range.start}..{key_range.end}"
    if text is not None:
        # An unpartitioned asset in a partitioned run covers the run's window rather than owning a partition.
        partitioned = getattr(context, "assets_def", None) is not None and context.assets_def.partitions_def is not None
        tags[TAG_PARTITION if partitioned else TAG_WINDOW] = text
    if window is not None:
        tags[TAG_WINDOW] = f"{window[0]}..{window[1]}"
    return tags


def figure_link_markdown(url: str, caption: str) -> str:
    """Markdown showing a figure logged to MLflow by its address (`TrackedRun.log_figure`), with a link to it:
    Dagster metadata stays small (an embedded image made each event ~100 kB) and the image loads from the MLflow
    UI when it is running (`fair-pipeline ui`); otherwise the caption and link remain."""
    return f"[![{caption}]({url})]({url})\n\n[{caption} (SVG in MLflow)]({url})"


@dataclasses.dataclass
class TrackedRun:
    """An open MLflow run of one stage. Every logging call is retried while the store is locked."""

    run_id: str
    experiment_id: str
    stage: str
    tracking: MLflowTracking

    def _retry(self, call: Callable[[], T], what: str) -> T:
        return self.tracking.retry(call, what=f"{what} (run {self.run_id})")

    @property
    def url(self) -> str:
        return self.tracking.run_url(self.experiment_id, self.run_id)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """All in one batch (one store transaction, not one per tag)."""
        from mlflow.entities import RunTag

        batch = [RunTag(key, str(value)) for key, value in tags.items()]
        if batch:
            self._retry(lambda: self.tracking.client().log_batch(self.run_id, tags=batch), f"set tags {', '.join(tags)}")

    def log_params(self, params: Mapping[str, Any]) -> None:
        import mlflow

        self._retry(lambda: mlflow.log_params({k: str(v) for k, v in params.items()}), "log params")

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None, model_id: str | None = None) -> None:
        """Metrics of the run (and of its logged model `model_id`, when given)."""
        import mlflow

        finite = {k: float(v) for k, v in metrics.items() if v is not None}
        self._retry(lambda: mlflow.log_metrics(finite, step=step, model_id=model_id), "log metrics")

    def log_dict(self, data: Mapping[str, Any] | list, name: str) -> None:
        """`name` is an artifact path ending in .json or .yaml."""
        import mlflow

        self._retry(lambda: mlflow.log_dict(data, name), f"log dict {name}")

    def log_text(self, text: str, name: str) -> None:
        import mlflow

        self._retry(lambda: mlflow.log_text(text, name), f"log text {name}")

    def log_table(self, frame: pd.DataFrame, name: str) -> None:
        """Log a DataFrame as `tables/<name>.json`, for people browsing the MLflow UI (stages read results from
        the warehouse, never from here)."""
        checked_name(name, "table name")
        artifact = f"tables/{name}.json"
        serializable = frame.copy()
        for column in serializable.columns:
            if pd.api.types.is_datetime64_any_dtype(serializable[column]) or serializable[column].dtype == object:
                serializable[column] = serializable[column].map(lambda v: v if v is None or isinstance(v, (str, int, float, bool)) else str(v))

        def write() -> None:
            # log_table appends to an existing file; a retry must replace it instead, so write it whole.
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"{name}.json"
                path.write_text(serializable.to_json(orient="split", index=False, date_format="iso", double_precision=15))
                self.tracking.client().log_artifact(self.run_id, str(path), "tables")

        self._retry(write, f"log table {artifact}")

    def log_figure(self, svg: bytes, name: str) -> str:
        """An SVG figure (`fair_pipeline.charts.render`) saved as `figures/<name>.svg`; returns the address the
        MLflow UI serves it at, for Dagster metadata to link to (`figure_link_markdown`) instead of embedding a copy."""
        artifact = f"figures/{name}{charts.SUFFIX}"
        self._retry(lambda: self.tracking.client().log_text(self.run_id, svg.decode(), artifact), f"log figure {name}")
        return self.artifact_url(artifact)

    def artifact_url(self, path: str) -> str:
        """The MLflow server's address of one artifact file of this run (`fair-pipeline ui` serves it)."""
        return self.tracking.artifact_url(self.run_id, path)

    def log_artifact(self, path: str | Path, artifact_dir: str | None = None) -> None:
        import mlflow

        self._retry(lambda: mlflow.log_artifact(str(path), artifact_dir), f"log artifact {path}")

    def log_sklearn_model(self, model: Any, name: str, input_example: Any = None, pip_requirements: list[str] | None = None,
                          metrics: Mapping[str, float] | None = None) -> str:
        """Log a fitted scikit-learn estimator and then its `metrics` (on the run and the logged model); returns
        the model URI (for `register_model`). Metrics logged before the model would make MLflow read back every
        metric's history to attach it to the model: one query per metric name."""
        import mlflow.sklearn

        info = self._retry(
            lambda: mlflow.sklearn.log_model(
                model, name=name, input_example=input_example, pip_requirements=pip_requirements or PIP_REQUIREMENTS
            ),
            f"log sklearn model {name}",
        )
        if metrics:
            self.log_metrics(metrics, model_id=info.model_id)
        return info.model_uri


class MLflowTracking(dg.ConfigurableResource):
    """MLflow tracking and registry for the pipeline. Empty fields mean the FAIR_PIPELINE_HOME defaults
    (`MLFLOW_TRACKING_URI` overrides the tracking URI)."""

    tracking_uri: str = ""
    artifact_root: str = ""
    ui_url: str = ""
    attempts: int = 4
    retry_delay_s: float = 1.0

    _experiment_ids: dict = PrivateAttr(default_factory=dict)
    _described_models: set = PrivateAttr(default_factory=set)  # registered models known to exist with a description

    # ---- configuration
    @property
    def uri(self) -> str:
        return self.tracking_uri or settings.mlflow_tracking_uri()

    @property
    def artifact_path(self) -> Path:
        return Path(self.artifact_root) if self.artifact_root else settings.mlflow_artifact_root()

    @property
    def base_ui_url(self) -> str:
        return (self.ui_url or settings.mlflow_ui_url()).rstrip("/")

    def run_url(self, experiment_id: str, run_id: str) -> str:
        return f"{self.base_ui_url}/#/experiments/{experiment_id}/runs/{run_id}?{CLASSIC_VIEW}"

    def artifact_url(self, run_id: str, path: str) -> str:
        return f"{self.base_ui_url}/get-artifact?{urlencode({'path': path, 'run_uuid': run_id})}"

    @property
    def store(self) -> Store:
        return Store(self.uri, self.attempts, self.retry_delay_s)

    def retry(self, call: Callable[[], T], what: str) -> T:
        return self.store.retry(call, what)

    def client(self):
        return self.store.client()

    # ---- lifecycle
    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self.ensure_experiments()

    def ensure_experiments(self) -> dict[str, str]:
        if not self._experiment_ids:
            self._experiment_ids.update(ensure_experiments(self.uri, self.artifact_path, attempts=self.attempts))
        return dict(self._experiment_ids)

    def experiment_id(self, stage: str) -> str:
        experiment_name(stage)
        return self.ensure_experiments()[stage]

    # ---- runs
    @contextlib.contextmanager
    def start_run(
        self,
        context: Any,
        stage: str,
        *,
        run_name: str | None = None,
        window: tuple[str, str] | None = None,
        tags: Mapping[str, Any] | None = None,
    ) -> Iterator[TrackedRun]:
        """Open a run in the stage's experiment, tagged with the Dagster context (None outside Dagster).
        The run ends FINISHED, or FAILED (and the exception propagates) if the block raises."""
        import mlflow

        experiment_id = self.experiment_id(stage)
        all_tags = {TAG_STAGE: stage, **dagster_tags(context, window), **{k: str(v) for k, v in (tags or {}).items()}}
        if run_name is None:
            asset = all_tags.get(TAG_ASSET, stage).split(",")[0]
            run_name = f"{asset} {all_tags.get(TAG_PARTITION, '')}".strip()
        run_id = self._create_run(experiment_id, run_name, all_tags)
        point_fluent_api_at(self.uri)
        # The fluent API keeps a process-wide active experiment; an earlier set_experiment (other code in
        # the same process) would make start_run(run_id=...) refuse the run of this stage's experiment.
        self.retry(lambda: select_fluent_experiment(experiment_id), f"select experiment {experiment_id}")
        self.retry(lambda: mlflow.start_run(run_id=run_id), f"activate run {run_id}")
        status = "FAILED"
        try:
            yield TrackedRun(run_id=run_id, experiment_id=experiment_id, stage=stage, tracking=self)
            status = "FINISHED"
        finally:
            try:
                self.retry(lambda: mlflow.end_run(status=status), f"end run {run_id} as {status}")
            except TrackingUnavailableError:
                if status == "FINISHED":
                    raise
                # The block's own exception is the one to report; the run stays RUNNING in the store.

    def _create_run(self, experiment_id: str, run_name: str, tags: dict[str, str]) -> str:
        """Create a run at most once even if a retry follows a write that did land."""
        client = self.client()
        token = uuid.uuid4().hex

        def find() -> str | None:
            found = client.search_runs([experiment_id], filter_string=f"tags.`{TOKEN_TAG}` = '{token}'", max_results=1)
            return found[0].info.run_id if found else None

        def create() -> str:
            return client.create_run(experiment_id, run_name=run_name, tags={**tags, TOKEN_TAG: token}).info.run_id

        return self.retry(created_once(create, find), f"create a run in experiment {experiment_id}")

    # ---- registry
    def register_model(
        self,
        model_uri: str,
        name: str,
        *,
        run: TrackedRun | None = None,
        alias: str | None = registry.CANDIDATE,
        tags: Mapping[str, Any] | None = None,
    ):
        """`registry.register_model`, the version tagged with the run that logged it."""
        run_tags = {} if run is None else {"fair_pipeline.run_id": run.run_id, TAG_STAGE: run.stage}
        return registry.register_model(self.store, model_uri, name, alias=alias, tags={**(tags or {}), **run_tags},
                                       described=self._described_models)

    def set_champion(self, name: str, version: str | int) -> str | None:
        """Move the `champion` alias of `name` to `version`; returns the previous champion version (or None)."""
        return registry.set_champion(self.store, name, version)

    def champion(self, name: str):
        """The ModelVersion holding `champion`, or None."""
        return registry.version_by_alias(self.store, name, registry.CHAMPION)

    def version_by_alias(self, name: str, alias: str):
        return registry.version_by_alias(self.store, name, alias)
