"""The training tables in the warehouse (each asset replaces its pair of tables in one transaction).

    marts.benchmark_models          one row per Adult / COMPAS fit: dataset, model (vanilla | penalized),
                                    penalty_score, lam, held-out AUC (SE, counts), training Î, coefficients JSON
    marts.benchmark_model_audits    long audit rows of every fit: per-group partial AUC / alpha with SE, 95% CI,
                                    n_pos, n_neg at cutoffs 0.1, 0.2, 0.5, 1, and group-gap rows with z, p-value
    marts.ranker_candidates         one row per retrained ranker (lambda): coefficients JSON, Î, held-out AUC and
                                    per-group partial AUCs (JSON), MLflow run id; the input of model selection
    marts.ranker_candidate_audits   long audit rows of every candidate, per held-out label source
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.platform.warehouse import quote_identifier, table_exists, transaction

BENCHMARK_MODELS = "marts.benchmark_models"
BENCHMARK_AUDITS = "marts.benchmark_model_audits"
RANKER_CANDIDATES = "marts.ranker_candidates"
RANKER_AUDITS = "marts.ranker_candidate_audits"


def _qualified(name: str) -> str:
    return ".".join(quote_identifier(part) for part in name.split("."))


def replace_tables(con, frames: dict[str, pd.DataFrame]) -> dict[str, int]:
    """Replace every table with its frame, all or nothing; returns row counts."""
    counts = {}
    with transaction(con):
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        for k, (name, frame) in enumerate(frames.items()):
            view = f"_training_frame_{k}"
            con.register(view, frame)
            try:
                con.execute(f"CREATE OR REPLACE TABLE {_qualified(name)} AS SELECT * FROM {view}")
            finally:
                con.unregister(view)
            counts[name] = len(frame)
    return counts


def load_table(con, name: str) -> pd.DataFrame:
    if not table_exists(con, *name.split(".")):
        raise LookupError(f"{name} does not exist; materialize the training assets first")
    return con.execute(f"SELECT * FROM {_qualified(name)}").df()


__all__ = ["BENCHMARK_AUDITS", "BENCHMARK_MODELS", "RANKER_AUDITS", "RANKER_CANDIDATES", "load_table", "replace_tables"]
