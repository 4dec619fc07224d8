"""The MLflow model registry: registered models with descriptions, versions registered all or nothing, and
the aliases `candidate` (the newest fit) and `champion` (the one model selection chose)."""
from __future__ import annotations

import contextlib
import io
import re
import sys
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from fair_pipeline.platform.tracking.store import (
    TOKEN_TAG,
    Store,
    checked_name,
    created_once,
    is_transient,
    point_fluent_api_at,
)

FAIR_RANKER = "fair-ranker"
CANDIDATE = "candidate"
CHAMPION = "champion"

# mlflow.register_model prints these on stderr for every version; the registry and the Dagster metadata say it.
_REGISTRY_CHATTER = re.compile(
    r"^(Registered model '[^']*' already exists\. Creating a new version of this model\.\.\."
    r"|Successfully registered model '[^']*'\.|Created version '\d+' of model '[^']*'\.?)$"
)


@contextlib.contextmanager
def without_registry_chatter() -> Iterator[None]:
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


def benchmark_model_name(dataset: str) -> str:
    """Registered-model name of a benchmark dataset's model (e.g. `fair-benchmark-adult`)."""
    return f"fair-benchmark-{checked_name(dataset, 'dataset')}"


def _ensure_described_model(store: Store, name: str, described: set[str]) -> None:
    """Create registered model `name` with its description (or add the description to an older one)."""
    if name in described:
        return
    client = store.client()
    found = client.search_registered_models(filter_string=f"name = '{name}'")
    if not found:
        try:
            client.create_registered_model(name, description=registered_model_description(name))
        except Exception as error:  # noqa: BLE001
            if "already exists" not in str(error).lower():
                raise
    elif not found[0].description:  # registered before models had descriptions
        client.update_registered_model(name, description=registered_model_description(name))
    described.add(name)


def register_model(
    store: Store,
    model_uri: str,
    name: str,
    *,
    alias: str | None = CANDIDATE,
    tags: Mapping[str, Any] | None = None,
    described: set[str] | None = None,
):
    """Register `model_uri` as a new version of `name` and point `alias` at it (None: no alias moves, e.g.
    for a backfilled partition). `described`: registered models already known to exist with a description.

    All or nothing: if the alias cannot be set, the new version is deleted again, so a model
    version without its alias never stays behind. Returns the ModelVersion."""
    import mlflow

    checked_name(name, "registered model name")
    if alias is not None:
        checked_name(alias, "alias")
    point_fluent_api_at(store.uri)  # a runs:/ URI is resolved against the tracking store
    client = store.client()
    token = uuid.uuid4().hex
    version_tags = {**{k: str(v) for k, v in (tags or {}).items()}, TOKEN_TAG: token}

    def find_version():
        existing = client.search_model_versions(f"name = '{name}' and tags.`{TOKEN_TAG}` = '{token}'")
        return existing[0] if existing else None

    def create_version():
        with without_registry_chatter():
            return mlflow.register_model(model_uri, name, tags=version_tags)

    known = described if described is not None else set()
    store.retry(lambda: _ensure_described_model(store, name, known), f"create registered model {name}")
    version = store.retry(created_once(create_version, find_version), f"register {model_uri} as {name}")
    if alias is None:
        return client.get_model_version(name, version.version)
    try:
        store.retry(lambda: client.set_registered_model_alias(name, alias, version.version), f"set alias {name}@{alias}")
    except BaseException:
        with contextlib.suppress(Exception):
            store.retry(lambda: client.delete_model_version(name, version.version), f"roll back {name} v{version.version}")
        raise
    return client.get_model_version(name, version.version)


# What MLflow answers when the model is not registered or the alias not set (the sqlite store and the REST API alike).
_NOT_SET = ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")


def version_by_alias(store: Store, name: str, alias: str):
    """The ModelVersion holding `alias`, or None when the model is not registered or the alias not set; any other
    error raises (a locked or unreachable store after the retries, as TrackingUnavailableError)."""
    from mlflow.exceptions import MlflowException

    client = store.client()

    def get():
        try:
            return client.get_model_version_by_alias(name, alias)
        except MlflowException as error:
            if error.error_code in _NOT_SET and not is_transient(error):
                return None
            raise

    return store.retry(get, f"look up {name}@{alias}")


def set_champion(store: Store, name: str, version: str | int) -> str | None:
    """Move the `champion` alias of `name` to `version`; returns the previous champion version (or None)."""
    client = store.client()
    previous = version_by_alias(store, name, CHAMPION)
    store.retry(lambda: client.get_model_version(name, str(version)), f"find {name} v{version}")
    store.retry(lambda: client.set_registered_model_alias(name, CHAMPION, str(version)), f"set {name}@{CHAMPION}")
    return None if previous is None else str(previous.version)
