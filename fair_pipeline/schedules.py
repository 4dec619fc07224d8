"""Jobs, schedules, and the sensor that warns about missing landing files.

Two kinds of assets: the log tables (ingestion and the SQL models over it), which process a range of days
in one run; and the daily-partitioned trained and audited stages (position bias, EO transforms, rankers, audit,
selection, report), whose partition D trains on the days before D and evaluates day D, one partition per run.
The static benchmark models have their own job and never run with either.
"""
from __future__ import annotations

import datetime as dt

import dagster as dg

from fair_pipeline.platform import settings
from fair_pipeline.platform.partitions import daily_partitions

BENCHMARKS = dg.AssetSelection.groups("benchmarks")
LOG_TABLES = dg.AssetSelection.groups("ingestion", "staging", "marts") | dg.AssetSelection.assets(
    dg.AssetKey(["marts", "position_score_bins"]), dg.AssetKey(["marts", "position_swap_cells"]))
DAILY_STAGES = dg.AssetSelection.all() - LOG_TABLES - BENCHMARKS


@dg.configured(dg.multiprocess_executor, config_schema={"max_concurrent": dg.Field(int, is_required=False)})
def forked_step_executor(config: dict) -> dict:
    """Dagster's multiprocess executor whose step processes fork from a server that imported the definitions once
    (forkserver with preloaded modules), instead of spawning interpreters that each import Dagster, MLflow,
    and scikit-learn again (about 4 s of CPU per step here). Runs launched by the UI, the daemon and
    `dg launch` use it; the CLI's runs are in-process (runner)."""
    # Named explicitly: a job loaded with `-m fair_pipeline.definitions` has no module target, and Dagster's default
    # preload is then `dagster` alone.
    return {"start_method": {"forkserver": {"preload_modules": ["fair_pipeline.definitions"]}}, **config}


# With the spark engine ($FAIR_PIPELINE_ENGINE when the definitions load, e.g. under `dagster dev`), every step of a
# run shares one process and its one SparkSession: a process per step would start a JVM per step (20-45 s each).
PIPELINE_EXECUTOR = dg.in_process_executor if settings.engine() == "spark" else forked_step_executor

# The schedule's job: one day's logs, then that day's partition of every stage.
daily_pipeline_job = dg.define_asset_job(
    "daily_pipeline",
    executor_def=PIPELINE_EXECUTOR,
    selection=dg.AssetSelection.all() - BENCHMARKS,
    partitions_def=daily_partitions,
    description="Ingest one day's landing files, then materialize that day's partition of every trained and audited "
    "stage (trained on the days before it, evaluated on it). Registry aliases move only for the newest day.",
)

# Logs only, for a range of days in one run (the log assets have single-run backfill policies).
ingest_logs_job = dg.define_asset_job(
    "ingest_logs",
    executor_def=PIPELINE_EXECUTOR,
    selection=LOG_TABLES,
    partitions_def=daily_partitions,
    description="Load a day's (or a range of days') landing files into the raw tables, with quarantine, and build "
    "the staging views and marts over them.",
)

# The trained and audited stages of one partition, after its logs (and the days before it) are ingested.
train_and_audit_job = dg.define_asset_job(
    "train_and_audit",
    executor_def=PIPELINE_EXECUTOR,
    selection=DAILY_STAGES,
    partitions_def=daily_partitions,
    description="One partition D of position bias, EO transforms, ranker candidates, fairness audit, model selection "
    "and report: trained on the days before D, evaluated on D.",
)

benchmark_models_job = dg.define_asset_job(
    "benchmark_models",
    executor_def=PIPELINE_EXECUTOR,
    selection=BENCHMARKS,
    description="The static Adult / COMPAS benchmark models (re-registered only when their code or config changes).",
)

# Runs at 02:00 UTC for the day that just ended (the newest complete partition).
daily_schedule = dg.build_schedule_from_partitioned_job(
    daily_pipeline_job,
    hour_of_day=2,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    name="daily_pipeline_schedule",
)


@dg.sensor(
    name="landing_files_present",
    minimum_interval_seconds=3600,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Warns (in the sensor's log and as a skip reason) when yesterday's landing files are missing for "
    "a source, before the 02:00 schedule runs on an empty day.",
)
def landing_files_sensor(context: dg.SensorEvaluationContext):
    from fair_pipeline.ingestion.landing import missing_sources
    from fair_pipeline.ingestion.landing_uris import is_uri
    from fair_pipeline.platform import settings

    day = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)
    landing = settings.landing_location()
    if is_uri(landing):  # listed through a Spark session, which a sensor does not start (20-45 s)
        return dg.SkipReason(f"landing {landing} is a URI: the daily run lists it through Spark and fails its "
                             "ingestion naming a missing source")
    missing = missing_sources(settings.landing_dir(), day)
    if missing:
        message = (f"no landing files for partition {day} from {', '.join(missing)} under {settings.landing_dir()}: "
                   "the daily run will fail its ingestion for that source")
        context.log.warning(message)
        return dg.SkipReason(message)
    return dg.SkipReason(f"landing files for {day} present for every source")
