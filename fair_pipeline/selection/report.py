"""Model selection as the fairness report shows it: the elicited metric of a ranking as one row per parameter
(pure: numpy and pandas only), from a `marts.elicited_metrics` row."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from fair_pipeline.selection.elicitation import group_pairs, metric_from_dict

SIMULATED_LABEL = "SIMULATED oracle: answers come from the ground-truth metric in the run config, not from a person"
RECORDED_LABEL = "recorded oracle: a person's answers from `fair-pipeline elicit`, replayed"


def oracle_label(simulated: bool, session_id: str | None) -> str:
    return SIMULATED_LABEL if simulated else f"{RECORDED_LABEL} (session {session_id})"


def metric_table(metric, truth, labels, oracle: str, n_queries: int) -> pd.DataFrame:
    """Elicited (and, when simulated, true) lam, a and B as one row per parameter: the report's metric table
    (`elicited_metric`: oracle, parameter, elicited, truth, n_queries)."""
    rows = [("lam", metric.lam, None if truth is None else truth.lam)]
    for i, value in enumerate(metric.a):
        rows.append((f"a[{i + 1}]", value, None if truth is None else truth.a[i]))
    for (u, v), b in zip(group_pairs(metric.n_groups), metric.pair_matrices()):
        for i, j in np.ndindex(*b.shape):
            if i <= j:
                rows.append((f"B[{labels[u]} vs {labels[v]}][{i + 1},{j + 1}]", b[i, j],
                             None if truth is None else truth.B[u, v][i, j]))
    how = metric.exposure_weight_source or "not set: 0, exposure reported, not weighed"
    rows.append((f"exposure weight mu (x exposure disparity added to the cost; {how})", metric.exposure_weight, None))
    frame = pd.DataFrame(rows, columns=["parameter", "elicited", "truth"])
    return frame.assign(oracle=oracle, n_queries=int(n_queries))[["oracle", "parameter", "elicited", "truth", "n_queries"]]


def stored_metric_table(row: Mapping[str, Any]) -> pd.DataFrame:
    """`metric_table` of one stored elicitation (a `marts.elicited_metrics` row)."""
    metric = metric_from_dict(json.loads(row["metric_json"]))
    truth = metric_from_dict(json.loads(row["truth_json"])) if isinstance(row.get("truth_json"), str) else None
    return metric_table(metric, truth, [str(g) for g in row["group_labels"]],
                        oracle_label(bool(row["simulated"]), row.get("session_id")), int(row["n_queries"]))


def markdown(frame: pd.DataFrame) -> str:
    """A markdown table with blanks (not 'nan') where a value does not apply."""
    return frame.astype(object).where(frame.notna(), "").to_markdown(index=False)


def ranking_markdown(ranking: pd.DataFrame, rows: int = 15) -> str:
    columns = ["rank", "model", "family", "cost", "ci_low", "ci_high", "diff_vs_winner", "diff_ci_low", "diff_ci_high",
               "diff_p", "error_part", "violation_part", "exposure_disparity", "min_group_count", "reason"]
    view = ranking[[c for c in columns if c in ranking.columns]]
    more = f"\n\n... {len(ranking) - rows} more candidates" if len(ranking) > rows else ""
    ranked_by = ""
    if "selected_by" in ranking.columns and ranking["selected_by"].notna().any():
        ranked_by = f"Ranked by: {ranking['selected_by'].dropna().iloc[0]}.\n\n"
    return ranked_by + markdown(view.head(rows).round(4)) + more


__all__ = ["RECORDED_LABEL", "SIMULATED_LABEL", "markdown", "metric_table", "oracle_label", "ranking_markdown",
           "stored_metric_table"]
