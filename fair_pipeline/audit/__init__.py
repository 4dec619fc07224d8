"""Fairness audit: partial AUCs with analytic variances, group comparisons, xAUC, pairwise accuracies, exposure parity.

The statistics (`stats`: truncated/partial AUC by a sweep over score blocks, Lemma 3 variances, group
comparisons, exposure per unit of merit by group from click logs (`stats.exposure`), xAUC of Kallus & Zhou, within-query pairwise accuracies of Narasimhan et al., ROC bands, each
gap's verdict against a practical margin δ in `stats.equivalence`) are pure numpy/scipy and work on arrays or on GROUP BY aggregates. `files` audits any Parquet/CSV file through
DuckDB with bounded memory (`fair-pipeline audit`); `sql` picks the evaluation window and label source and runs
the aggregations, `outputs` lists the scored outputs to audit (production, EO-transformed, retrained rankers),
`evaluation` audits each of them, `store` writes `marts.fairness_audit*`, `report` and `tracking` render and log
tables and figures, `assets` is the Dagster glue. Inputs: held-out impressions and every stage's scored output.
Outputs: audit tables in the warehouse and MLflow. Tests: tests/audit/.

    from fair_pipeline.audit import truncated_auc, compare_groups, xauc, pairwise_accuracies
    truncated_auc(scores, labels, cutoffs=[0.05, 0.1, 0.2, 0.5, 1])     # arrays
    truncated_auc(aggregates=df)                                        # score, n_pos, n_neg
    audit_aggregates(df_with_group_column)                              # everything from a GROUP BY
"""
from fair_pipeline.audit.stats import (  # noqa: F401
    DEFAULT_CUTOFFS,
    DEFAULT_MARGINS,
    VERDICTS,
    AuditInputError,
    AuditReport,
    ClusterInterval,
    ExposureParity,
    GroupComparison,
    PairwiseResult,
    StreamingAudit,
    XAUCResult,
    audit_aggregates,
    audit_grid,
    classify_gaps,
    cluster_robust_interval,
    compare_groups,
    exposure_parity,
    exposure_parity_by_attributes,
    holm,
    pairwise_accuracies,
    truncated_auc,
    xauc,
)

__all__ = [
    "DEFAULT_CUTOFFS", "DEFAULT_MARGINS", "VERDICTS", "AuditInputError", "AuditReport", "ClusterInterval", "ExposureParity",
    "GroupComparison", "PairwiseResult", "StreamingAudit", "XAUCResult", "audit_aggregates", "audit_grid", "classify_gaps",
    "cluster_robust_interval", "compare_groups", "exposure_parity", "exposure_parity_by_attributes", "holm",
    "pairwise_accuracies", "truncated_auc", "xauc",
]
