"""Public API of the fairness audit (re-exports fair_pipeline.core.audit).

    from fair_pipeline.audit import truncated_auc, compare_groups, xauc, pairwise_accuracies
    truncated_auc(scores, labels, cutoffs=[0.05, 0.1, 0.2, 0.5, 1])     # arrays
    truncated_auc(aggregates=df)                                        # score, n_pos, n_neg
    audit_aggregates(df_with_group_column)                              # everything from a GROUP BY
"""
from fair_pipeline.core.audit import (  # noqa: F401
    DEFAULT_CUTOFFS,
    AuditInputError,
    AuditReport,
    GroupComparison,
    PairwiseResult,
    StreamingAudit,
    XAUCResult,
    audit_aggregates,
    audit_grid,
    compare_groups,
    holm,
    pairwise_accuracies,
    truncated_auc,
    xauc,
)

__all__ = [
    "DEFAULT_CUTOFFS", "AuditInputError", "AuditReport", "GroupComparison", "PairwiseResult",
    "StreamingAudit", "XAUCResult", "audit_aggregates", "audit_grid", "compare_groups", "holm",
    "pairwise_accuracies", "truncated_auc", "xauc",
]
