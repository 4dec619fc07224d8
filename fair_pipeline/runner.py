"""Runs the pipeline through Dagster from Python (the CLI's `run` and `backfill`), recorded in the
Dagster instance under $FAIR_PIPELINE_HOME so the UI shows every run afterwards.

Every run executes in this process (`execute_in_process`), so a Spark run starts the JVM once and every step
shares the process's one SparkSession. The engine ($FAIR_PIPELINE_ENGINE, $FAIR_PIPELINE_SPARK_MASTER; the CLI's
--engine and --spark-master set them) goes to the `warehouse` resource as run config."""
from __future__ import annotations

import datetime as dt
import functools
import os
from pathlib import Path

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from fair_pipeline.ingestion import contract, landing_source
from fair_pipeline.ingestion.landing import complete_days
from fair_pipeline.platform import run_recovery, settings
from fair_pipeline.platform.partitions import WINDOW_DAYS, min_window_days
from fair_pipeline.platform.progress import root_cause, with_progress
from fair_pipeline.platform.read_history import CODE, READ_SINCE, since_of

ITEMS_KEY = dg.AssetKey(["raw", "items"])

DAGSTER_YAML = """\
# Written by fair-pipeline. DuckDB allows one writer per file: every asset that touches the warehouse
# is in the `duckdb` pool, and pools default to one step at a time across all runs.
concurrency:
  pools:
    default_limit: 1
  runs:
    max_concurrent_runs: 4
nux:
  enabled: false
telemetry:
  enabled: false
"""


def ensure_dagster_home() -> Path:
    """Create $DAGSTER_HOME (default $FAIR_PIPELINE_HOME/dagster_home) with our dagster.yaml."""
    home = settings.dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def landed_partitions(landing: Path | None = None) -> list[str]:
    """Dates with landing files for every source (a day missing a source cannot be ingested), in `landing` or in the
    configured landing (`ingestion.landing_source`: a URI on the spark engine is listed through Spark)."""
    return complete_days(landing) if landing else landing_source.configured().complete_days()


def engine_run_config() -> dict:
    """The `warehouse` resource's engine settings for a run, from the environment (checked: a missing pyspark or
    Java is one line before the run starts)."""
    from fair_pipeline.platform.engines.select import require_engine

    engine = settings.engine()
    require_engine(engine)
    config = {"engine": engine, "spark_master": settings.spark_master() if engine == "spark" else ""}
    return {"resources": {"warehouse": {"config": config}}}


_INSTANCES: dict[str, dg.DagsterInstance] = {}


def current_instance() -> dg.DagsterInstance:
    """The Dagster instance of $DAGSTER_HOME, created once per process and home: a command's runs share it
    (loading an instance reads dagster.yaml and checks every storage's schema, ~0.1 s each time)."""
    home = os.environ.get("DAGSTER_HOME") or str(ensure_dagster_home())
    if home not in _INSTANCES:
        _INSTANCES[home] = dg.DagsterInstance.get()
    return _INSTANCES[home]


def _execute(job_name: str, instance: dg.DagsterInstance | None, *, partition: str | None = None,
             start: str | None = None, end: str | None = None, progress: dg.LoggerDefinition | None = None,
             verbose: bool = True, assets: list[dg.AssetKey] | None = None) -> dg.ExecuteInProcessResult:
    """`progress`: an extra logger (platform.progress, the CLI's one line per step); unless `verbose`, the
    console logger shows only warnings and errors. `assets`: only these of the job's assets (the others are read
    as stored)."""
    from fair_pipeline.definitions import defs

    instance = instance or current_instance()
    tags = {ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end} if start else {}
    job, run_config = with_progress(defs.resolve_job_def(job_name),
                                    {"loggers": {"console": {"config": {"log_level": "INFO"}}}, **engine_run_config()},
                                    progress, verbose)
    return job.execute_in_process(
        instance=instance,
        partition_key=partition,
        tags={**tags, **run_recovery.prepare_run(instance)},
        run_config=run_config,
        asset_selection=assets,
        raise_on_error=False,
    )


def ingest_range(start: str, end: str, instance: dg.DagsterInstance | None = None, **display) -> dg.ExecuteInProcessResult:
    """Load landing files of partitions start..end and build the SQL models over them, as one run (the log
    assets have single-run backfill policies)."""
    return _execute("ingest_logs", instance, start=start, end=end, **display)


def train_and_audit(day: str, instance: dg.DagsterInstance | None = None, **display) -> dg.ExecuteInProcessResult:
    """Partition `day` of every trained and audited stage: trained on the days before it, evaluated on it."""
    return _execute("train_and_audit", instance, partition=day, **display)


def benchmarks_outdated(instance: dg.DagsterInstance | None = None) -> bool:
    """True when the static benchmark models were never materialized in this instance, or with other code
    (what their automation condition does in the daemon, for runs without one)."""
    from fair_pipeline.training.assets import BENCHMARK_CODE_VERSION, BENCHMARK_MODELS_KEY

    instance = instance or current_instance()
    event = instance.get_latest_materialization_event(BENCHMARK_MODELS_KEY)
    if event is None:
        return True
    return event.asset_materialization.tags.get("dagster/code_version") != BENCHMARK_CODE_VERSION


def run_benchmarks(instance: dg.DagsterInstance | None = None, **display) -> dg.ExecuteInProcessResult:
    """`display`: progress= and verbose= of `_execute` (likewise for ingest_range and train_and_audit)."""
    return _execute("benchmark_models", instance, **display)


def window_days() -> int:
    """The training window's length the partition mappings were built with ($FAIR_PIPELINE_WINDOW_DAYS)."""
    return WINDOW_DAYS


def trainable(days: list[str], ingested: list[str]) -> tuple[list[str], list[str]]:
    """(days whose calendar training window D-k..D-1 holds at least the minimum of ingested days, the others):
    partition D trains on the days of its window only, so a day with none of them is only ingested."""
    landed = {dt.date.fromisoformat(d) for d in ingested}

    def enough(day: str) -> bool:
        first = dt.date.fromisoformat(day) - dt.timedelta(days=WINDOW_DAYS)
        return sum(first + dt.timedelta(days=i) in landed for i in range(WINDOW_DAYS)) >= min_window_days()

    ok = [d for d in days if enough(d)]
    return ok, [d for d in days if d not in ok]


def failure_summary(result: dg.ExecuteInProcessResult) -> str:
    lines = []
    for event in result.all_events:
        # A failed blocking check fails its step with a generic error; its own description says what was wrong.
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR:
                lines.append(f"check {evaluation.asset_check_key.to_user_string()} failed: {evaluation.description}")
        if event.is_step_failure:
            error = event.step_failure_data.error
            lines.append(f"{event.step_key}: {root_cause(error) if error else 'failed'}")
    return "\n".join(lines) or "the run failed (see the Dagster UI for the event log)"


def _latest_record(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None):
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=(
        [partition] if partition else None)), limit=1).records
    return records[0] if records else None


@functools.cache
def _job_assets(job_name: str, partitioned: bool) -> tuple[dg.AssetKey, ...]:
    """The materializable assets of a job, partitioned or not (the definitions do not change within a process)."""
    from fair_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = defs.resolve_job_def(job_name).asset_layer.selected_asset_keys
    return tuple(sorted((k for k in keys if graph.has(k) and graph.get(k).is_materializable
                         and (graph.get(k).partitions_def is not None) == partitioned), key=lambda k: k.to_user_string()))


@functools.cache
def _code_versions(job_name: str) -> dict[dg.AssetKey, str | None]:
    from fair_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = _job_assets(job_name, partitioned=True) + _job_assets(job_name, partitioned=False)
    return {key: graph.get(key).code_version for key in keys}


def _changed_at(instance: dg.DagsterInstance, key: dg.AssetKey, window: list[str]) -> int | None:
    """The storage id of the materialization of unpartitioned `key` since which what `window`'s days read of it is
    what they read now. Every ingestion materializes the catalogues, and a backfill delivers catalogues for its own
    days: the newest materialization would make every partition look out of date after any backfill. Its newest record
    says since when each part (a delivery, the code) is unchanged (`platform.read_history`): one read, however many
    ingestions came before. A record from before those were kept: since itself."""
    from fair_pipeline.ingestion.catalogue_history import parts_read_by

    record = _latest_record(instance, key)
    if record is None:
        return None
    recorded = record.asset_materialization.metadata.get(READ_SINCE)
    if recorded is None:
        return record.storage_id
    parts = parts_read_by(recorded.value, window) if key == ITEMS_KEY else [CODE]
    return max(since_of(recorded.value, name, record.storage_id) for name in parts)


def _built_by_this_code(record, key: dg.AssetKey, job_name: str) -> bool:
    return record.asset_materialization.tags.get("dagster/code_version") == _code_versions(job_name)[key]


def landing_changes(days: list[str], landing: Path | None = None,
                    instance: dg.DagsterInstance | None = None) -> tuple[list[str], bool]:
    """(the `days` to ingest, whether the item catalogues changed): a day is ingested again when a source's landing
    fingerprint (`ingestion.fingerprints`) differs from the one its last ingestion recorded, when that ingestion ran
    another code version, or when an asset of the ingestion job has no materialization of that day since then (a
    run that failed half-way)."""
    from fair_pipeline.ingestion.assets import FINGERPRINTS
    from fair_pipeline.ingestion.hash_cache import HashCache

    files = landing_source.LandingSource(str(landing)) if landing else landing_source.configured()
    instance = instance or current_instance()
    cache = HashCache.beside(instance)  # only files new or touched since their last hashing are read
    loads = {dg.AssetKey(["raw", f"{source}_impressions"]) for source in contract.SOURCES}
    built_from_loads = [key for key in _job_assets("ingest_logs", partitioned=True) if key not in loads]
    changed = []
    for day in days:
        newest = 0
        for source in contract.SOURCES:
            key = dg.AssetKey(["raw", f"{source}_impressions"])
            record = _latest_record(instance, key, day)
            recorded = record.asset_materialization.metadata.get(FINGERPRINTS) if record else None
            if (recorded is None or recorded.value.get(day) != files.day_fingerprint(source, day, cache)
                    or not _built_by_this_code(record, key, "ingest_logs")):
                newest = None
                break
            newest = max(newest, record.storage_id)
        built = newest is not None and all(
            (record := _latest_record(instance, key, day)) is not None and record.storage_id >= newest
            for key in built_from_loads)
        if not built:
            changed.append(day)
    key = dg.AssetKey(["raw", "items"])
    items = _latest_record(instance, key)
    recorded = items.asset_materialization.metadata.get(FINGERPRINTS) if items else None
    catalogue = (recorded is None or recorded.value.get("items") != files.catalogue_fingerprint(cache)
                 or not _built_by_this_code(items, key, "ingest_logs"))
    cache.save()
    return changed, catalogue


def up_to_date(day: str, instance: dg.DagsterInstance | None = None) -> bool:
    """True when every asset of `train_and_audit` has a materialization of partition `day`, made by its current
    code version (Dagster's `code_version`), newer than the newest ingestion of the days its window reads (D-k..D)
    and of the item catalogues: re-running it would read the same inputs with the same code."""
    instance = instance or current_instance()
    first = dt.date.fromisoformat(day) - dt.timedelta(days=WINDOW_DAYS)
    window = [str(first + dt.timedelta(days=i)) for i in range(WINDOW_DAYS + 1)]
    inputs = [record.storage_id for key in _job_assets("ingest_logs", partitioned=True) for d in window
              if (record := _latest_record(instance, key, d)) is not None]
    inputs += [storage_id for key in _job_assets("ingest_logs", partitioned=False)
               if (storage_id := _changed_at(instance, key, window)) is not None]
    newest_input = max(inputs, default=0)
    return all((record := _latest_record(instance, key, day)) is not None and record.storage_id > newest_input
               and _built_by_this_code(record, key, "train_and_audit")
               for key in _job_assets("train_and_audit", partitioned=True))
