"""The one Definitions object that `dagster dev`, the CLI and the tests load."""
from __future__ import annotations

import dagster as dg

from fair_pipeline.audit.assets import build_audit_assets
from fair_pipeline.eo.assets import eo_assets
from fair_pipeline.ingestion.assets import ingestion_assets
from fair_pipeline.platform.resources import default_resources
from fair_pipeline.platform.sql_assets import build_sql_assets
from fair_pipeline.position_bias.assets import position_bias_assets
from fair_pipeline.reporting.assets import build_fairness_report_asset
from fair_pipeline.schedules import (
    PIPELINE_EXECUTOR,
    benchmark_models_job,
    daily_pipeline_job,
    daily_schedule,
    ingest_logs_job,
    landing_files_sensor,
    train_and_audit_job,
)
from fair_pipeline.selection.assets import selection_assets
from fair_pipeline.training.assets import training_assets

upstream_assets = [*ingestion_assets, *build_sql_assets(), *position_bias_assets, *eo_assets, *training_assets]
pipeline_assets = [*upstream_assets, *build_audit_assets(upstream_assets), *selection_assets]
# The report of partition D reads every stage's output for D, so it runs after all of them.
fairness_report = build_fairness_report_asset(pipeline_assets)
all_assets = [*pipeline_assets, fairness_report]

defs = dg.Definitions(
    assets=all_assets,
    jobs=[daily_pipeline_job, ingest_logs_job, train_and_audit_job, benchmark_models_job],
    schedules=[daily_schedule],
    sensors=[landing_files_sensor, dg.AutomationConditionSensorDefinition(
        "benchmark_automation", target=dg.AssetSelection.groups("benchmarks"),
        default_status=dg.DefaultSensorStatus.RUNNING)],
    resources=default_resources(),
    executor=PIPELINE_EXECUTOR,  # also for materializations outside the jobs (the UI, `dg launch`)
)


# Module-level accessors so `dg.reconstructable` can rebuild a job in executor subprocesses.
def daily_pipeline_job_def() -> dg.JobDefinition:
    return defs.resolve_job_def("daily_pipeline")


def ingest_logs_job_def() -> dg.JobDefinition:
    return defs.resolve_job_def("ingest_logs")


def train_and_audit_job_def() -> dg.JobDefinition:
    return defs.resolve_job_def("train_and_audit")
