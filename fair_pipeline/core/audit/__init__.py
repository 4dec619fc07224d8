"""Fairness audits with analytic variances: truncated AUCs, group comparisons, xAUC, pairwise accuracies.

Pure numpy/scipy/pandas: no Dagster, no DuckDB (the file/SQL front end lives in fair_pipeline.audit_file).
"""
from .aggregate import AuditReport, StreamingAudit, audit_aggregates, audit_grid
from .blocks import ScoreGrid, build_grid, grid_from_counts
from .compare import GroupComparison, compare_groups
from .inference import holm
from .pairwise import PairwiseResult, pairwise_accuracies
from .truncated_auc import DEFAULT_CUTOFFS, truncated_auc
from .validation import AuditInputError
from .xauc import XAUCResult, xauc

__all__ = [
    "AuditInputError", "AuditReport", "DEFAULT_CUTOFFS", "GroupComparison", "PairwiseResult",
    "ScoreGrid", "StreamingAudit", "XAUCResult", "audit_aggregates", "audit_grid", "build_grid",
    "compare_groups", "grid_from_counts", "holm", "pairwise_accuracies", "truncated_auc", "xauc",
]
