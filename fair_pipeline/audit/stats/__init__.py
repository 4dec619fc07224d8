"""The audit's statistics: pure numpy/scipy/pandas, no Dagster, DuckDB or MLflow (import-linter enforces it).

Public names are re-exported by `fair_pipeline.audit`; the file/SQL front ends live in `audit.files` and `audit.sql`.
"""
from fair_pipeline.audit.stats.aggregate import AuditReport, StreamingAudit, audit_aggregates, audit_grid
from fair_pipeline.audit.stats.blocks import ScoreGrid, build_grid, grid_from_counts
from fair_pipeline.audit.stats.compare import GroupComparison, compare_groups
from fair_pipeline.audit.stats.exposure import ExposureParity, exposure_parity
from fair_pipeline.audit.stats.exposure_intersections import exposure_parity_by_attributes
from fair_pipeline.audit.stats.equivalence import DEFAULT_MARGINS, VERDICTS, classify_gaps
from fair_pipeline.audit.stats.inference import holm
from fair_pipeline.audit.stats.pairwise import PairwiseResult, pairwise_accuracies
from fair_pipeline.audit.stats.small_sample import ClusterInterval, cluster_robust_interval
from fair_pipeline.audit.stats.truncated_auc import DEFAULT_CUTOFFS, truncated_auc
from fair_pipeline.audit.stats.validation import AuditInputError
from fair_pipeline.audit.stats.xauc import XAUCResult, xauc

__all__ = [
    "AuditInputError", "AuditReport", "ClusterInterval", "ExposureParity", "exposure_parity",
    "exposure_parity_by_attributes", "DEFAULT_CUTOFFS", "DEFAULT_MARGINS", "GroupComparison", "PairwiseResult", "VERDICTS",
    "ScoreGrid", "StreamingAudit", "XAUCResult", "audit_aggregates", "audit_grid", "build_grid",
    "classify_gaps", "cluster_robust_interval", "compare_groups", "grid_from_counts", "holm", "pairwise_accuracies", "truncated_auc", "xauc",
]
