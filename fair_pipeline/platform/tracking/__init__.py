"""MLflow tracking for every pipeline stage: one experiment per stage, tagged runs, metrics, figures, models,
and registry aliases (`candidate`, `champion`). MLflow is for people browsing experiments; stages hand
results to each other through the warehouse, never through MLflow.

- `store`: the store, stage experiments, tag names, and calls retried while the store is locked or unreachable.
- `runs`: the `MLflowTracking` resource (resource key `mlflow`): tagged runs and what is logged in them.
- `registry`: registered models, versions registered all or nothing, the `candidate` and `champion` aliases.
"""
from fair_pipeline.platform.tracking.registry import (
    CANDIDATE,
    CHAMPION,
    FAIR_RANKER,
    benchmark_model_name,
    registered_model_description,
)
from fair_pipeline.platform.tracking.runs import (
    PIP_REQUIREMENTS,
    MLflowTracking,
    TrackedRun,
    dagster_tags,
    figure_link_markdown,
)
from fair_pipeline.platform.tracking.store import (
    CLASSIC_VIEW,
    EXPERIMENT_PREFIX,
    STAGE_DESCRIPTIONS,
    STAGES,
    TAG_ASSET,
    TAG_CODE_VERSION,
    TAG_DAGSTER_RUN,
    TAG_EVALUATION_WINDOW,
    TAG_HELD_OUT,
    TAG_MODEL_PARTITION,
    TAG_PARTITION,
    TAG_STAGE,
    TAG_TRAINING_WINDOWS,
    TAG_WINDOW,
    UI_URL_ENV,
    Store,
    TrackingUnavailableError,
    TrackingUsageError,
    check_reachable,
    created_once,
    ensure_experiments,
    experiment_name,
    is_transient,
    local_sqlite_path,
    point_fluent_api_at,
    select_fluent_experiment,
    store_client,
    store_errors,
    with_retry,
)

__all__ = [
    "CANDIDATE", "CHAMPION", "CLASSIC_VIEW", "EXPERIMENT_PREFIX", "FAIR_RANKER", "PIP_REQUIREMENTS", "STAGES",
    "STAGE_DESCRIPTIONS", "TAG_ASSET", "TAG_CODE_VERSION", "TAG_DAGSTER_RUN", "TAG_EVALUATION_WINDOW", "TAG_HELD_OUT",
    "TAG_MODEL_PARTITION", "TAG_PARTITION", "TAG_STAGE",
    "TAG_TRAINING_WINDOWS", "TAG_WINDOW", "UI_URL_ENV", "MLflowTracking", "Store", "TrackedRun", "TrackingUnavailableError",
    "TrackingUsageError", "benchmark_model_name", "check_reachable", "created_once", "dagster_tags", "ensure_experiments",
    "experiment_name", "figure_link_markdown", "is_transient", "local_sqlite_path", "point_fluent_api_at",
    "registered_model_description", "select_fluent_experiment", "store_client", "store_errors", "with_retry",
]
