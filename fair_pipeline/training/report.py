"""The training results as people read them (pure: pandas and numpy only): the λ trade-off frontier of a ranker
path from the rows of `marts.ranker_candidates` and `marts.ranker_candidate_audits` (the fairness report's), and
the cells of the fits' markdown summaries."""
from __future__ import annotations

import numpy as np
import pandas as pd


def lambda_frontier(candidates: pd.DataFrame, audits: pd.DataFrame, label_source: str, cutoff: float = 0.1) -> pd.DataFrame:
    """The report's `lambda_frontier` table: utility = held-out AUC (95% CI), unfairness = |partial-AUC gap|
    at `cutoff` (the largest over group pairs) with the image of the gap's 95% CI under |.|."""
    rows = []
    for c in candidates.itertuples():
        gaps = audits[(audits["candidate_id"] == c.candidate_id) & (audits["label_source"] == label_source)
                      & (audits["row_type"] == "gap") & np.isclose(audits["cutoff"], cutoff)] if len(audits) else audits
        gap = gaps.loc[gaps["auc"].abs().idxmax()] if len(gaps) and gaps["auc"].notna().any() else None
        low, high = (np.nan, np.nan) if gap is None else (abs(gap["ci_low"]), abs(gap["ci_high"]))
        straddles = gap is not None and gap["ci_low"] <= 0 <= gap["ci_high"]
        rows.append({
            "lambda": c.lam, "utility": c.heldout_auc,
            "utility_ci_low": c.heldout_auc - 1.96 * c.heldout_auc_se, "utility_ci_high": c.heldout_auc + 1.96 * c.heldout_auc_se,
            "unfairness": np.nan if gap is None else abs(gap["auc"]),
            "unfairness_ci_low": 0.0 if straddles else min(low, high), "unfairness_ci_high": max(low, high),
            "unfairness_p_value": np.nan if gap is None else gap["p_value"], "cutoff": cutoff, "label_source": label_source,
        })
    return pd.DataFrame(rows)


def cell_text(estimate, se) -> str:
    """'0.812 ± 0.021' (the 95% half-width), or 'n/a' when not estimable."""
    return "n/a" if not np.isfinite(estimate) else f"{estimate:.3f} ± {1.96 * se:.3f}"


def gap_cell(audit: pd.DataFrame, cutoff: float) -> str:
    """A fit's group gap at `cutoff` with its CI and p, from its audit rows, or 'not estimable'."""
    gap = audit[(audit["row_type"] == "gap") & np.isclose(audit["cutoff"], cutoff)]
    if gap.empty or not gap["estimable"].iloc[0]:
        return "not estimable"
    r = gap.iloc[0]
    return f"{r.auc:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] p={r.p_value:.3g}"


__all__ = ["cell_text", "gap_cell", "lambda_frontier"]
