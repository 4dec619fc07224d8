"""fair_pipeline: end-to-end fair ranking on Dagster + DuckDB + MLflow.

One package per pipeline stage (see each package's tour): charts (figures), platform, ingestion, datasets, position_bias, eo,
training, audit, selection, reporting, reproductions; `commands` is the `fair-pipeline` command line.
"""
import os

__version__ = "0.1.0"

# The pipeline sends no usage data anywhere: Dagster's telemetry is off in the dagster.yaml it writes, MLflow's
# here (MLflow reads the variable when it is imported; an explicit setting of the user's wins).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
