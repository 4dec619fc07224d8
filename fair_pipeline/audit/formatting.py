"""The text tables of a file audit (`fair-pipeline audit` without --json): per group, group differences with
their verdicts, xAUC, pairwise accuracies."""
from __future__ import annotations

import pandas as pd

from fair_pipeline.audit.files import FileAudit
from fair_pipeline.audit.stats.clustered import ESTIMANDS

def _fmt(df: pd.DataFrame, columns: list) -> str:
    cols = [c for c in columns if c in df.columns]
    return df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="n/a")


VERDICT_COLUMNS = ["effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost", "verdict"]


def format_audit(result: FileAudit) -> str:
    """Readable tables: per group, group differences, xAUC, pairwise accuracies."""
    r = result.report
    clusters = result.columns.get("cluster")
    variance = (f"cluster-robust variance, clustered by {' and '.join(clusters)} ({int(r.groups['clusters'].iloc[0])} "
                "clusters; the population estimand: new clusters drawn like these)" if clusters else
                "the Lemma 3 / DeLong variance with every row independent (add --cluster ITEM_COLUMN when items "
                "or queries repeat)")
    lines = [f"Fairness audit of {result.path}: {result.rows} rows; columns {result.columns}",
             "I(a) = area under the ROC curve for FPR <= a (unnormalized); McClish = standardized "
             f"partial AUC (0.5 random, 1 perfect); 95% CIs from {variance}.", "",
             "Per group:",
             _fmt(r.groups, ["group", "cutoff", "n_pos", "n_neg", "auc", "se", "ci_low", "ci_high",
                             "mcclish", "estimable", "note"]), "",
             "All groups pooled:",
             _fmt(r.overall, ["cutoff", "n_pos", "n_neg", "auc", "se", "ci_low", "ci_high", "mcclish"])]
    compared = result.comparisons
    if compared.get("mode") == "reference":  # say which pairs the tables below hold, and how to get all of them
        lines += ["", f"Comparisons: each group against {compared['reference']!r} ({compared['pairs']} pairs; "
                  "--compare all for every pair, --reference GROUP for another reference)."]
    if len(r.pairs):
        lines += ["", "Group differences (I_a - I_b):",
                  _fmt(r.pairs, ["group_a", "group_b", "cutoff", "diff", "se", "ci_low", "ci_high",
                                 "z", "p_value", "p_holm", "estimable"]),
                  "", "Effect sizes (I_a - I_b)/cutoff against the margin δ (verdict; TOST = two one-sided tests):",
                  _fmt(r.pairs, ["group_a", "group_b", "cutoff"] + VERDICT_COLUMNS)]
    if r.xauc is not None:
        x = r.xauc
        lines += ["", "xAUC(a, b) = P(score of a positive of a > score of a negative of b):",
                  _fmt(x.pairs, ["group_a", "group_b", "xauc", "se", "ci_low", "ci_high", "n_pos_a",
                                 "n_neg_b", "estimable"]),
                  "", "Delta xAUC = xAUC(a, b) - xAUC(b, a):",
                  _fmt(x.deltas, ["group_a", "group_b", "delta", "se", "ci_low", "ci_high", "p_value",
                                  "p_holm", "estimable"]),
                  _fmt(x.deltas, ["group_a", "group_b"] + VERDICT_COLUMNS),
                  "", "Balanced xAUC: xAUC0(g) = P(R_1 > R_0^g), xAUC1(g) = P(R_1^g > R_0):",
                  _fmt(x.balanced, ["group", "xauc0", "se0", "n_neg", "xauc1", "se1", "n_pos"]),
                  _fmt(x.balanced_deltas, ["kind", "group_a", "group_b", "delta", "se", "p_value",
                                           "p_holm", "estimable"]),
                  _fmt(x.balanced_deltas, ["kind", "group_a", "group_b"] + VERDICT_COLUMNS)]
    if result.pairwise is not None:
        p = result.pairwise
        estimand = p.overall["variance_estimand"].iloc[0]
        sizes = ["n_pairs", "n_items", "n_queries", "df"]
        lines += ["", "Within-query pairwise accuracy A_{better>worse} (Narasimhan et al.); SEs and CIs "
                  f"{ESTIMANDS.get(estimand, estimand)} (df: effective clusters of the t interval"
                  + ("" if estimand == "two_way" else "; pass --cluster ITEM_COLUMN for new items") + "):",
                  _fmt(p.matrix, ["group_better", "group_worse", "accuracy", "se", "ci_low", "ci_high", *sizes,
                                  "estimable"]),
                  _fmt(p.marginals, ["metric", "accuracy", "se", *sizes]),
                  _fmt(p.overall, ["metric", "accuracy", "se", *sizes]),
                  "", "Cross-group gaps A_{a>b} - A_{b>a} against the margin δ:",
                  _fmt(p.gaps, ["group_a", "group_b", "gap", "se", "p_value", "p_holm", *sizes[1:]] + VERDICT_COLUMNS)
                  if p.gaps is not None and len(p.gaps) else "(one group: no gaps)",
                  "", "Pairwise statistical parity P(score_i > score_j), same query, labels ignored (query-clustered):",
                  _fmt(p.parity, ["group_i", "group_j", "p_i_above_j", "se", "n_pairs", "n_queries"])]
    return "\n".join(lines)
