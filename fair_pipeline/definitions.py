"""The one Definitions object that `dagster dev`, the CLI and the tests load."""
from __future__ import annotations

import dagster as dg

from fair_pipeline.assets.audit import build_audit_assets
from fair_pipeline.assets.eo_transform import eo_assets
from fair_pipeline.assets.ingestion import ingestion_assets
from fair_pipeline.assets.position_bias import position_bias_assets
from fair_pipeline.assets.reporting import build_fairness_report_asset
from fair_pipeline.assets.selection import selection_assets
from fair_pipeline.assets.sql_assets import build_sql_assets
from fair_pipeline.assets.training import training_assets
from fair_pipeline.resources import default_resources
from fair_pipeline.schedules import daily_pipeline_job, daily_schedule, ingest_logs_job

upstream_assets = [*ingestion_assets, *build_sql_assets(), *position_bias_assets, *eo_assets, *training_assets]
pipeline_assets = [*upstream_assets, *build_audit_assets(upstream_assets), *selection_assets]
# The report reads every stage's latest output, so it runs after all of them.
fairness_report = build_fairness_report_asset(pipeline_assets)
all_assets = [*pipeline_assets, fairness_report]

defs = dg.Definitions(
    assets=all_assets,
    jobs=[daily_pipeline_job, ingest_logs_job],
    schedules=[daily_schedule],
    resources=default_resources(),
)


# Module-level accessors so `dg.reconstructable` can rebuild a job in executor subprocesses.
def daily_pipeline_job_def() -> dg.JobDefinition:
    return defs.resolve_job_def("daily_pipeline")


def ingest_logs_job_def() -> dg.JobDefinition:
    return defs.resolve_job_def("ingest_logs")
