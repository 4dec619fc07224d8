"""Jobs and schedules."""
from __future__ import annotations

import dagster as dg

from fair_pipeline.platform.partitions import daily_partitions

# Everything: the partitioned ingestion/SQL assets for the run's partition (or range) and every asset
# downstream of them, so a daily run also refreshes the windowed stages.
daily_pipeline_job = dg.define_asset_job(
    "daily_pipeline",
    selection=dg.AssetSelection.all(),
    partitions_def=daily_partitions,
    description="Ingest one day's landing files (or a range, as one run) and rebuild everything downstream.",
)

# Only the landing -> raw loads, for backfilling logs without rebuilding the downstream stages.
ingest_logs_job = dg.define_asset_job(
    "ingest_logs",
    selection=dg.AssetSelection.groups("ingestion"),
    partitions_def=daily_partitions,
    description="Load one day's (or a range of days') landing files into the raw tables, with quarantine.",
)

# Runs at 02:00 UTC for the day that just ended (the newest complete partition).
daily_schedule = dg.build_schedule_from_partitioned_job(
    daily_pipeline_job,
    hour_of_day=2,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    name="daily_pipeline_schedule",
)
