"""Daily partitions of the click logs (UTC dates of the serve time `ts`)."""
from __future__ import annotations

import os
import warnings

import dagster as dg

# Single-run backfill policies are the documented way to process a date range in one run; Dagster
# still labels the parameter beta, which would print a warning on every import.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

# Early enough for the shipped Open Bandit sample (November 2019); override for your own logs.
START_DATE_ENV = "FAIR_PIPELINE_START_DATE"
DEFAULT_START_DATE = "2019-11-01"

daily_partitions = dg.DailyPartitionsDefinition(start_date=os.environ.get(START_DATE_ENV, DEFAULT_START_DATE))
single_run = dg.BackfillPolicy.single_run()
