"""MLflow tracking for every pipeline stage: one experiment per stage, tagged runs, tables, figures,
models, and registry aliases (`candidate`, `champion`).

Stage owners use the `MLflowTracking` resource (resource key `mlflow`) inside an asset:

    with mlflow.start_run(context, "audit") as run:          # tags: Dagster run id, asset, partition, code version
        run.log_metrics({"pauc_gap": 0.03})
        run.log_table(partial_auc_frame, "partial_auc")        # the report reads tables by name
        run.log_figure(svg, "roc_by_group")                    # an SVG from fair_pipeline.charts
        uri = run.log_sklearn_model(model, "ranker")
        version = mlflow.register_model(uri, FAIR_RANKER, run=run)   # alias `candidate`, never half-registered
    mlflow.set_champion(FAIR_RANKER, version.version)         # model selection moves `champion`

The sqlite store is initialised and every stage experiment created once, under a file lock, before
any run is logged (`ensure_experiments`; the resource calls it in `setup_for_execution`, the CLI before
launching). Calls that are safe to repeat are retried when the store is locked or unreachable; past the
retry budget a `TrackingUnavailableError` names the store and what was being done.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import io
import json
import logging
import os
import re
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlparse

import dagster as dg
import pandas as pd
from pydantic import PrivateAttr

from fair_pipeline import charts
from fair_pipeline.platform import settings
from fair_pipeline.platform.partition_store import as_date

# One experiment per pipeline stage (the Dagster groups that log to MLflow).
STAGES = ("ingestion", "position_bias", "eo_transform", "training", "audit", "selection", "elicitation", "benchmarks", "reporting")
EXPERIMENT_PREFIX = "fair_pipeline/"
FAIR_RANKER = "fair-ranker"
CANDIDATE = "candidate"
CHAMPION = "champion"
UI_URL_ENV = settings.MLFLOW_UI_URL_ENV
# MLflow 3 opens on its GenAI view (traces) unless told otherwise; this query parameter selects the classic
# machine-learning view (runs, metrics, models). The UI reads it on every page.
CLASSIC_VIEW = "workflowType=machine_learning"

# What each experiment holds, shown as its description in the MLflow UI (the `mlflow.note.content` tag).
STAGE_DESCRIPTIONS = {
    "ingestion": "Daily click-log loads into the DuckDB warehouse: accepted and quarantined rows per partition.",
    "position_bias": "Position-bias (examination) curves estimated from randomized and adjacent-swap traffic, with CIs.",
    "eo_transform": "Per-group CDF (equal-opportunity) score transforms; registers the serving model fair-ranker @candidate.",
    "training": "Click-trained rankers, one run per fairness penalty λ, with their held-out group gaps.",
    "audit": "Fairness audits of every model: partial AUC, xAUC and pairwise accuracy by group, cluster-robust CIs.",
    "selection": "Model selection by cost over the candidates; moves fair-ranker @champion.",
    "elicitation": "Fairness metrics elicited from pairwise comparisons (fair-pipeline elicit).",
    "benchmarks": "Penalized fits on the Adult and COMPAS benchmarks (models fair-benchmark-<dataset>).",
    "reporting": "The fairness report of each run (HTML, Markdown summary, findings.json).",
}
_NOTE_TAG = "mlflow.note.content"

# Tag names written on every run (the MLflow UI can filter on them).
TAG_STAGE = "fair_pipeline.stage"
TAG_DAGSTER_RUN = "dagster.run_id"
TAG_ASSET = "dagster.asset_key"
TAG_PARTITION = "dagster.partition"
TAG_WINDOW = "fair_pipeline.window"
TAG_HELD_OUT = "fair_pipeline.held_out_partitions"  # left out of a training window for the audit
TAG_EVALUATION_WINDOW = "fair_pipeline.evaluation_window"
TAG_TRAINING_WINDOWS = "fair_pipeline.training_windows"  # per audited output
TAG_CODE_VERSION = "dagster.code_version"
TAG_MODEL_PARTITION = "fair_pipeline.partition"  # on a registered model version: the asset partition it won
TAG_TABLE_PREFIX = "fair_pipeline.table."
TAG_SKIPPED = "fair_pipeline.skipped"  # why a step that ran logged none of its tables
TAG_SKIPPED_TABLES = "fair_pipeline.skipped_tables"  # ",name,name," (the tables it would have logged)
_TOKEN_TAG = "fair_pipeline.idempotency_token"

# Explicit requirements make log_model fast (no environment inference) and reproducible.
PIP_REQUIREMENTS = ["scikit-learn", "numpy", "pandas", "scipy"]

_TRANSIENT_MARKERS = (
    "database is locked",
    "database table is locked",
    "unable to open database",
    "disk i/o error",
    "connection refused",
    "max retries exceeded",
    "failed to establish a new connection",
    "connectionerror",
    "temporarily unavailable",
    "timed out",
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

T = TypeVar("T")

# Progress bars from artifact downloads would clutter Dagster logs and the CLI.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

# mlflow.register_model prints these on stderr for every version; the registry and the Dagster metadata say it.
_REGISTRY_CHATTER = re.compile(
    r"^(Registered model '[^']*' already exists\. Creating a new version of this model\.\.\."
    r"|Successfully registered model '[^']*'\.|Created version '\d+' of model '[^']*'\.?)$"
)


class _PickledModelWarning(logging.Filter):
    """Drops MLflow's warning that a python_model object is serialized with CloudPickle: our pyfunc models are
    our own code, logged by the pipeline and loaded by it (every other MLflow warning passes)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "serialized using CloudPickle" not in record.getMessage()


if not any(isinstance(f, _PickledModelWarning) for f in logging.getLogger("mlflow.pyfunc").filters):
    logging.getLogger("mlflow.pyfunc").addFilter(_PickledModelWarning())


@contextlib.contextmanager
def _without_registry_chatter() -> Iterator[None]:
    """Capture stderr around a registry call and pass on every line except MLflow's per-version chatter."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            yield
    finally:
        kept = [line for line in captured.getvalue().splitlines(keepends=True) if not _REGISTRY_CHATTER.match(line.strip())]
        if kept:
            sys.stderr.write("".join(kept))


def registered_model_description(name: str) -> str:
    """What a registered model of the pipeline is (shown in the MLflow UI's model list)."""
    if name == FAIR_RANKER:
        return ("The serving ranker: a base ranker followed by the per-group equal-opportunity transform (pyfunc; input "
                "item features and group_id). @candidate is the newest fit, @champion the one model selection chose.")
    if name.startswith("fair-benchmark-"):
        dataset = name[len("fair-benchmark-"):]
        return (f"Penalized fits on the {dataset} benchmark, one version per fairness penalty λ. @champion is the "
                "smallest λ whose group gap is not significant at any cutoff.")
    return "A model registered by fair_pipeline."


class TrackingUnavailableError(RuntimeError):
    """The MLflow store could not be reached or stayed locked past the retry budget."""


class TrackingUsageError(ValueError):
    """A call named an unknown stage, a bad model name, a missing table, ..."""


def experiment_name(stage: str) -> str:
    if stage not in STAGES:
        raise TrackingUsageError(f"unknown pipeline stage {stage!r}; expected one of {list(STAGES)}")
    return EXPERIMENT_PREFIX + stage


def benchmark_model_name(dataset: str) -> str:
    """Registered-model name of a benchmark dataset's model (e.g. `fair-benchmark-adult`)."""
    return f"fair-benchmark-{_checked_name(dataset, 'dataset')}"


def _checked_name(name: str, what: str) -> str:
    if not _NAME.match(name):
        raise TrackingUsageError(f"{what} {name!r} must match {_NAME.pattern} (letters, digits, _ . -)")
    return name


def _iso_date(value: dt.date | str) -> str:
    """A partition re-printed as YYYY-MM-DD from a parsed date (it goes into an MLflow filter string)."""
    return as_date(value).isoformat()


def is_transient(error: BaseException) -> bool:
    """A locked sqlite file or an unreachable server: the same call may succeed later."""
    seen: BaseException | None = error
    while seen is not None:
        text = f"{type(seen).__name__}: {seen}".lower()
        if any(marker in text for marker in _TRANSIENT_MARKERS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def created_once(create: Callable[[], T], find: Callable[[], T | None]) -> Callable[[], T]:
    """`create` made safe to retry: an attempt after the first looks for what an earlier one may have written
    before it failed (`find`, e.g. by a unique token tag) instead of creating a second copy. The first attempt
    skips the lookup: nothing can exist yet."""
    attempted = False

    def attempt() -> T:
        nonlocal attempted
        if attempted and (found := find()) is not None:
            return found
        attempted = True
        return create()

    return attempt


def _local_sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):].split("?", 1)[0]) if uri.startswith("sqlite:///") else None


def _is_remote(uri: str) -> bool:
    return urlparse(uri).scheme in ("http", "https", "databricks")


def check_reachable(uri: str, timeout_s: float = 3.0) -> None:
    """Fail fast with a clear message: MLflow's own HTTP client retries for minutes before giving up."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            with socket.create_connection((parsed.hostname or "127.0.0.1", port), timeout=timeout_s):
                return
        except OSError as error:
            raise TrackingUnavailableError(
                f"MLflow tracking server {uri} is unreachable ({error}); start it (fair-pipeline ui) "
                "or unset MLFLOW_TRACKING_URI to use the local sqlite store"
            ) from error
    path = _local_sqlite_path(uri)
    if path is not None:
        if not path.is_absolute():
            raise TrackingUsageError(f"MLflow sqlite URI {uri} must be absolute (sqlite:////abs/path/mlflow.db)")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(path.parent, os.W_OK):
            raise TrackingUnavailableError(f"MLflow store directory {path.parent} is not writable")


def with_retry(call: Callable[[], T], *, what: str, uri: str, attempts: int = 4, delay_s: float = 1.0) -> T:
    """Run an idempotent call, retrying transient store errors with exponential backoff."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as error:  # noqa: BLE001 - classified below, re-raised otherwise
            if not is_transient(error):
                raise
            if attempt == attempts:
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise TrackingUnavailableError(
                    f"MLflow store {uri} unavailable while trying to {what}: {first_line} "
                    f"(tried {'once' if attempts == 1 else f'{attempts} times'}; the database may be locked by another "
                    "process or the server down)"
                ) from error
            time.sleep(delay_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def point_fluent_api_at(uri: str) -> None:
    """MLflow's fluent API (`mlflow.start_run`, `log_model`) logs to process-wide URIs: point them at `uri`.
    MLflow's fluent setters also export environment variables to every later subprocess: they are put back, or
    a later command in the same process (another --home) and the processes it starts would follow them."""
    import mlflow

    with settings.restored_variables("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):
        mlflow.set_tracking_uri(uri)
        mlflow.set_registry_uri(uri)


def select_fluent_experiment(experiment_id: str) -> None:
    """`mlflow.set_experiment` without exporting MLFLOW_EXPERIMENT_ID to later subprocesses."""
    import mlflow

    with settings.restored_variables("MLFLOW_EXPERIMENT_ID"):
        mlflow.set_experiment(experiment_id=experiment_id)


def store_client(uri: str):
    """A client whose tracking and registry are both `uri`: `MlflowClient(uri)` alone would use a registry set
    process-wide by `mlflow.set_registry_uri` (e.g. by another home's run earlier in the same process)."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def ensure_experiments(
    uri: str | None = None, artifact_root: Path | None = None, stages: tuple[str, ...] = STAGES, attempts: int = 4
) -> dict[str, str]:
    """Create the store and one experiment per stage (idempotent); returns {stage: experiment_id}.

    Holds a file lock while doing so, so concurrent processes never race the sqlite schema creation."""
    uri = uri or settings.mlflow_tracking_uri()
    artifact_root = Path(artifact_root or settings.mlflow_artifact_root())
    check_reachable(uri)
    sqlite_path = _local_sqlite_path(uri)
    lock = (sqlite_path.parent / (sqlite_path.name + ".lock")) if sqlite_path else settings.home() / ".mlflow.lock"
    ids: dict[str, str] = {}
    with _file_lock(lock):
        client = with_retry(lambda: store_client(uri), what="open the tracking store", uri=uri, attempts=attempts)
        for stage in stages:
            name = experiment_name(stage)

            def get_or_create(name: str = name, stage: str = stage) -> str:
                found = client.get_experiment_by_name(name)
                if found is not None:
                    if not found.tags.get(_NOTE_TAG):  # stores created before experiments had descriptions
                        client.set_experiment_tag(found.experiment_id, _NOTE_TAG, STAGE_DESCRIPTIONS[stage])
                    return found.experiment_id
                location = None if _is_remote(uri) else (artifact_root / stage).resolve().as_uri()
                # The experiment kind makes the MLflow UI open on the runs table, not the GenAI trace view.
                tags = {TAG_STAGE: stage, "mlflow.experimentKind": "custom_model_development",
                        _NOTE_TAG: STAGE_DESCRIPTIONS[stage]}
                return client.create_experiment(name, artifact_location=location, tags=tags)

            ids[stage] = with_retry(get_or_create, what=f"create experiment {name}", uri=uri, attempts=attempts)
    return ids


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
        """Log a DataFrame as `tables/<name>.json` (viewable in the MLflow UI) and tag the run so the
        report finds the newest run that logged this table (`latest_table`)."""
        _checked_name(name, "table name")
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
        self.set_tags({TAG_TABLE_PREFIX + name: "1"})

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

    def log_pyfunc_model(
        self, python_model: Any, name: str, artifacts: dict[str, str] | None = None, pip_requirements: list[str] | None = None
    ) -> str:
        """Log an `mlflow.pyfunc.PythonModel` (e.g. the EO transform); returns its model URI."""
        import mlflow.pyfunc

        info = self._retry(
            lambda: mlflow.pyfunc.log_model(
                name=name, python_model=python_model, artifacts=artifacts, pip_requirements=pip_requirements or PIP_REQUIREMENTS
            ),
            f"log pyfunc model {name}",
        )
        return info.model_uri


def _numeric_where_possible(frame: pd.DataFrame) -> pd.DataFrame:
    """JSON null is None: a numeric column with nulls (or only nulls) becomes float with NaN, as tables were logged."""
    for column in frame.columns[frame.dtypes == object]:
        values = frame[column].dropna()
        if values.map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)).all():
            frame[column] = pd.to_numeric(frame[column]).astype(float)
    return frame


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

    def experiment_url(self, stage: str) -> str:
        return f"{self.base_ui_url}/#/experiments/{self.experiment_id(stage)}?{CLASSIC_VIEW}"

    def retry(self, call: Callable[[], T], what: str) -> T:
        return with_retry(call, what=what, uri=self.uri, attempts=self.attempts, delay_s=self.retry_delay_s)

    def client(self):
        return store_client(self.uri)

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
            found = client.search_runs([experiment_id], filter_string=f"tags.`{_TOKEN_TAG}` = '{token}'", max_results=1)
            return found[0].info.run_id if found else None

        def create() -> str:
            return client.create_run(experiment_id, run_name=run_name, tags={**tags, _TOKEN_TAG: token}).info.run_id

        return self.retry(created_once(create, find), f"create a run in experiment {experiment_id}")

    # ---- reading back
    def _newest_finished_run(self, condition: str, stages: tuple[str, ...], what: str, partition: dt.date | None = None):
        ids = [self.experiment_id(stage) for stage in stages]
        # MLflow filter strings take no parameters: the partition goes in only as a validated ISO date.
        where = "" if partition is None else f" and tags.`{TAG_PARTITION}` = '{_iso_date(partition)}'"
        runs = self.retry(
            lambda: self.client().search_runs(
                ids, filter_string=f"{condition} and attributes.status = 'FINISHED'{where}",
                order_by=["attributes.start_time DESC"], max_results=1,
            ),
            f"find the newest run {what}",
        )
        return runs[0] if runs else None

    def latest_run_with_table(self, name: str, stages: tuple[str, ...] = STAGES, partition: dt.date | None = None):
        """The newest FINISHED run (over the given stages' experiments) that logged table `name`, or None; with
        `partition`, only runs of that asset partition."""
        _checked_name(name, "table name")
        return self._newest_finished_run(f"tags.`{TAG_TABLE_PREFIX}{name}` = '1'", stages, f"with table {name}", partition)

    def record_skip(self, context: Any, stage: str, reason: str, tables: tuple[str, ...]) -> str:
        """A finished run saying that a step ran and had nothing to log (e.g. nothing was estimable), so readers of
        `tables` can tell "ran, not estimable: <reason>" from "never ran". Returns the run id."""
        for name in tables:
            _checked_name(name, "table name")
        with self.start_run(context, stage, tags={TAG_SKIPPED: reason[:5000],
                                                  TAG_SKIPPED_TABLES: "," + ",".join(tables) + ","}) as run:
            return run.run_id

    def latest_skip(self, name: str, stages: tuple[str, ...] = STAGES, partition: dt.date | None = None):
        """The newest finished run that recorded skipping table `name` (`record_skip`), or None; with `partition`,
        only runs of that asset partition."""
        _checked_name(name, "table name")
        return self._newest_finished_run(f"tags.`{TAG_SKIPPED_TABLES}` LIKE '%,{name},%'", stages,
                                         f"that skipped table {name}", partition)

    def load_table(self, run_id: str, name: str) -> pd.DataFrame:
        with tempfile.TemporaryDirectory() as tmp:
            path = self.retry(
                lambda: self.client().download_artifacts(run_id, f"tables/{name}.json", tmp), f"download table {name}"
            )
            # Python's json parser, not pandas': pandas' (ujson) refuses subnormal doubles such as a p-value of 1e-308.
            split = json.loads(Path(path).read_text())
        return _numeric_where_possible(pd.DataFrame(split["data"], columns=split["columns"]))

    def latest_table(self, name: str, stages: tuple[str, ...] = STAGES,
                     partition: dt.date | None = None) -> tuple[pd.DataFrame, Any] | None:
        """(table, run) from the newest finished run (of `partition`, when given) that logged it, or None."""
        run = self.latest_run_with_table(name, stages, partition)
        return None if run is None else (self.load_table(run.info.run_id, name), run)

    # ---- registry
    def register_model(
        self,
        model_uri: str,
        name: str,
        *,
        run: TrackedRun | None = None,
        alias: str | None = CANDIDATE,
        tags: Mapping[str, Any] | None = None,
    ):
        """Register `model_uri` as a new version of `name` and point `alias` at it (None: no alias moves, e.g.
        for a backfilled partition).

        All or nothing: if the alias cannot be set, the new version is deleted again, so a model
        version without its alias never stays behind. Returns the ModelVersion."""
        import mlflow

        _checked_name(name, "registered model name")
        if alias is not None:
            _checked_name(alias, "alias")
        point_fluent_api_at(self.uri)  # a runs:/ URI is resolved against the tracking store
        client = self.client()
        token = uuid.uuid4().hex
        version_tags = {**{k: str(v) for k, v in (tags or {}).items()}, _TOKEN_TAG: token}
        if run is not None:
            version_tags.update({"fair_pipeline.run_id": run.run_id, TAG_STAGE: run.stage})

        def ensure_model() -> None:
            if name in self._described_models:
                return
            found = client.search_registered_models(filter_string=f"name = '{name}'")
            if not found:
                try:
                    client.create_registered_model(name, description=registered_model_description(name))
                except Exception as error:  # noqa: BLE001
                    if "already exists" not in str(error).lower():
                        raise
            elif not found[0].description:  # registered before models had descriptions
                client.update_registered_model(name, description=registered_model_description(name))
            self._described_models.add(name)

        def find_version():
            existing = client.search_model_versions(f"name = '{name}' and tags.`{_TOKEN_TAG}` = '{token}'")
            return existing[0] if existing else None

        def create_version():
            with _without_registry_chatter():
                return mlflow.register_model(model_uri, name, tags=version_tags)

        self.retry(ensure_model, f"create registered model {name}")
        version = self.retry(created_once(create_version, find_version), f"register {model_uri} as {name}")
        if alias is None:
            return client.get_model_version(name, version.version)
        try:
            self.retry(lambda: client.set_registered_model_alias(name, alias, version.version), f"set alias {name}@{alias}")
        except BaseException:
            with contextlib.suppress(Exception):
                self.retry(lambda: client.delete_model_version(name, version.version), f"roll back {name} v{version.version}")
            raise
        return client.get_model_version(name, version.version)

    def set_champion(self, name: str, version: str | int) -> str | None:
        """Move the `champion` alias of `name` to `version`; returns the previous champion version (or None)."""
        client = self.client()
        previous = self.champion(name)
        self.retry(lambda: client.get_model_version(name, str(version)), f"find {name} v{version}")
        self.retry(lambda: client.set_registered_model_alias(name, CHAMPION, str(version)), f"set {name}@{CHAMPION}")
        return None if previous is None else str(previous.version)

    def champion(self, name: str):
        """The ModelVersion holding `champion`, or None."""
        return self.version_by_alias(name, CHAMPION)

    def version_by_alias(self, name: str, alias: str):
        client = self.client()

        def get():
            try:
                return client.get_model_version_by_alias(name, alias)
            except Exception as error:  # noqa: BLE001
                if is_transient(error):
                    raise
                return None

        return self.retry(get, f"look up {name}@{alias}")
