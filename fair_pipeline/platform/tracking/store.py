"""The MLflow store: stage experiments, tag names, and calls retried while the store is locked or unreachable.

`ensure_experiments` initialises the sqlite store and creates every stage experiment once, under a file lock,
before any run is logged. `Store.retry` repeats calls that are safe to repeat when the store is locked or
unreachable; past the retry budget a `TrackingUnavailableError` names the store and what was being done.
"""
from __future__ import annotations

import dataclasses
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlparse

from fair_pipeline.platform import settings
from fair_pipeline.platform.file_lock import exclusive_lock

# One experiment per pipeline stage (the Dagster groups that log to MLflow).
STAGES = ("ingestion", "position_bias", "eo_transform", "training", "audit", "selection", "elicitation", "benchmarks", "reporting")
EXPERIMENT_PREFIX = "fair_pipeline/"
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
NOTE_TAG = "mlflow.note.content"

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
TOKEN_TAG = "fair_pipeline.idempotency_token"  # a unique tag that finds what an earlier attempt wrote

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


class TrackingUnavailableError(RuntimeError):
    """The MLflow store could not be reached or stayed locked past the retry budget."""


def store_errors() -> tuple[type[BaseException], ...]:
    """What a read of the store raises when the store, not the code, is at fault: the retry budget spent on a locked or
    unreachable store, an error MLflow reports (a server's refusal or failure, a store it can't read), a connection or
    file error, a database error. A caller that can do without the store catches these only: anything else is a bug
    and must fail."""
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    return TrackingUnavailableError, MlflowException, OSError, SQLAlchemyError


class TrackingUsageError(ValueError):
    """A call named an unknown stage, a bad model name, a missing table, ..."""


def experiment_name(stage: str) -> str:
    if stage not in STAGES:
        raise TrackingUsageError(f"unknown pipeline stage {stage!r}; expected one of {list(STAGES)}")
    return EXPERIMENT_PREFIX + stage


def checked_name(name: str, what: str) -> str:
    """`name` if it is safe in an MLflow name or filter string (letters, digits, _ . -), else TrackingUsageError."""
    if not _NAME.match(name):
        raise TrackingUsageError(f"{what} {name!r} must match {_NAME.pattern} (letters, digits, _ . -)")
    return name


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


def local_sqlite_path(uri: str) -> Path | None:
    """The file of a `sqlite:///` tracking URI, None for any other store."""
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
    path = local_sqlite_path(uri)
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


@dataclasses.dataclass(frozen=True)
class Store:
    """One MLflow store and its retry budget: what run logging and the registry share."""

    uri: str
    attempts: int = 4
    delay_s: float = 1.0

    def client(self):
        return store_client(self.uri)

    def retry(self, call: Callable[[], T], what: str) -> T:
        return with_retry(call, what=what, uri=self.uri, attempts=self.attempts, delay_s=self.delay_s)


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
    sqlite_path = local_sqlite_path(uri)
    lock = (sqlite_path.parent / (sqlite_path.name + ".lock")) if sqlite_path else settings.home() / ".mlflow.lock"
    ids: dict[str, str] = {}
    with exclusive_lock(lock):
        client = with_retry(lambda: store_client(uri), what="open the tracking store", uri=uri, attempts=attempts)
        for stage in stages:
            name = experiment_name(stage)

            def get_or_create(name: str = name, stage: str = stage) -> str:
                found = client.get_experiment_by_name(name)
                if found is not None:
                    if not found.tags.get(NOTE_TAG):  # stores created before experiments had descriptions
                        client.set_experiment_tag(found.experiment_id, NOTE_TAG, STAGE_DESCRIPTIONS[stage])
                    return found.experiment_id
                location = None if _is_remote(uri) else (artifact_root / stage).resolve().as_uri()
                # The experiment kind makes the MLflow UI open on the runs table, not the GenAI trace view.
                tags = {TAG_STAGE: stage, "mlflow.experimentKind": "custom_model_development",
                        NOTE_TAG: STAGE_DESCRIPTIONS[stage]}
                return client.create_experiment(name, artifact_location=location, tags=tags)

            ids[stage] = with_retry(get_or_create, what=f"create experiment {name}", uri=uri, attempts=attempts)
    return ids
