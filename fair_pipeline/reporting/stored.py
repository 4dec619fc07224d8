"""The stage results a report reads: per report table, the stage and the reader of its warehouse store tables for
the report's partition (the newest stored when the report has none). MLflow is not read: the warehouse is the one
bus between stages, and Dagster's lineage says which partitions a report depends on.

A reader raises the stage's own error (LookupError, `PositionBiasInputError`, `EOInputError`) naming the table and
partition, or why the stage stored nothing for it; `ReportInputs.stored_table` turns that into `StageMissing`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pandas as pd

from fair_pipeline.audit.report import report_tables
from fair_pipeline.audit.store import TABLES as AUDIT_TABLES
from fair_pipeline.audit.store import load_audit
from fair_pipeline.eo import store as eo_store
from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.report import cdf_table, exposure_merit_table
from fair_pipeline.platform.partition_store import load_partition, resolve_partition
from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.position_bias.report import curve_table
from fair_pipeline.position_bias.store import CURVES_TABLE, load_curves
from fair_pipeline.selection.report import stored_metric_table
from fair_pipeline.selection.store import ELICITED_METRICS, MODEL_RANKING, load_metric_row, load_ranking
from fair_pipeline.training.rankers import HELDOUT_CLICKS
from fair_pipeline.training.report import lambda_frontier
from fair_pipeline.training.store import RANKER_AUDITS, RANKER_CANDIDATES

# What a reader raises when its stage's output for the partition is missing (never ran, or ran and stored nothing).
MISSING = (LookupError, PositionBiasInputError, EOInputError)

Reader = Callable[..., dict[str, pd.DataFrame]]  # (connection, partition or None) -> {report table: rows}


@dataclasses.dataclass(frozen=True)
class Source:
    stage: str
    tables: tuple[str, ...]  # the warehouse tables read (shown under a section's title)
    read: Reader


def _position_bias(con, partition) -> dict[str, pd.DataFrame]:
    return {"position_bias_curve": curve_table(load_curves(con, partition))}


def _eo_transform(con, partition) -> dict[str, pd.DataFrame]:
    weighted = eo_store.load_latest_transforms(con, partition)["weighted"]
    if not weighted.estimable:
        raise EOInputError(f"{eo_store.TRANSFORMS_TABLE}: the EO transform ran but is not estimable: {weighted.reason}")
    return {"eo_transform_cdf": cdf_table(weighted.transform)}


def _eo_evaluation(con, partition) -> dict[str, pd.DataFrame]:
    per_group, summary = eo_store.load_evaluation(con, partition)
    return {"exposure_merit": exposure_merit_table(per_group), "eo_evaluation_summary": summary}


def _audit(con, partition) -> dict[str, pd.DataFrame]:
    return report_tables(load_audit(con, partition))


def _training(con, partition) -> dict[str, pd.DataFrame]:
    hint = "materialize the ranker_candidates asset for that partition"
    day = resolve_partition(con, RANKER_CANDIDATES, partition, hint=hint)
    candidates = load_partition(con, RANKER_CANDIDATES, day)
    audits = load_partition(con, RANKER_AUDITS, day, hint=hint)
    frontier = lambda_frontier(candidates, audits, HELDOUT_CLICKS)
    if "mi_proxy_train" in candidates.columns:  # what the penalty targets, per λ
        frontier["penalty_target"] = frontier["lambda"].map(candidates.drop_duplicates("lam").set_index("lam")["mi_proxy_train"])
    return {"lambda_frontier": frontier}


def _selection(con, partition) -> dict[str, pd.DataFrame]:
    ranking = load_ranking(con, partition)
    elicited_at = ranking["metric_elicited_at"].iloc[0] if "metric_elicited_at" in ranking.columns and len(ranking) else None
    return {"model_ranking": ranking, "elicited_metric": stored_metric_table(load_metric_row(con, elicited_at)),
            "deployed_model": deployed_model(con, ranking["partition_date"].iloc[0] if len(ranking) else partition)}


def deployed_model(con, day) -> pd.DataFrame:
    """The registered row (candidate, family, rank, version) of the newest selection on or before `day` that
    registered a model: model selection moves `@champion` to each newest partition's registered winner, so this is
    what the alias pointed at after day `day`'s selection (`fair-pipeline promote` can move it later; the MLflow
    registry is the authority on the present). Empty when none registered one."""
    if day is None:
        return pd.DataFrame()
    return con.execute(
        f"SELECT partition_date, model, family, rank, champion_version, registered_model, "
        f"(SELECT count(*) FROM {MODEL_RANKING} r WHERE r.partition_date = m.partition_date) AS candidates "
        f"FROM {MODEL_RANKING} m WHERE champion_version IS NOT NULL AND partition_date <= $day "
        "ORDER BY partition_date DESC LIMIT 1", {"day": pd.Timestamp(day).date()}).df()


SOURCES = {
    "position_bias": Source("position_bias", (CURVES_TABLE,), _position_bias),
    "eo_transform": Source("eo_transform", (eo_store.TRANSFORMS_TABLE,), _eo_transform),
    "eo_evaluation": Source("eo_transform", tuple(eo_store.EVALUATION_TABLES), _eo_evaluation),
    "audit": Source("audit", tuple(AUDIT_TABLES), _audit),
    "training": Source("training", (RANKER_CANDIDATES, RANKER_AUDITS), _training),
    "selection": Source("selection", (MODEL_RANKING, ELICITED_METRICS), _selection),
}
# Report table -> the source that makes it (the table contracts are in fair_pipeline.reporting.sections).
TABLES = {
    "position_bias_curve": "position_bias",
    "eo_transform_cdf": "eo_transform",
    "exposure_merit": "eo_evaluation",
    "eo_evaluation_summary": "eo_evaluation",
    "partial_auc": "audit", "roc_curves": "audit", "xauc": "audit", "xroc_curves": "audit",
    "pairwise_accuracy": "audit", "pairwise_gaps": "audit",
    "lambda_frontier": "training",
    "model_ranking": "selection", "elicited_metric": "selection", "deployed_model": "selection",
}
