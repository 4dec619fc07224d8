"""The minimum cell size of an audit by attribute cells: a cell held by too few items is not estimable.

Crossing attributes makes small cells: a handful of items whose ROC, xAUC and pairwise accuracies are noise, and
whose clustered variances (items are the sampling unit) are not trustworthy below ``min_clusters`` items (the rule
of the audit's ``--min-clusters``, see `compare.estimability`). `flag_small_cells` applies that rule to the
stored tables of one attribute table: every estimate of a small cell, and of each comparison involving it, becomes
NaN with ``estimable = False``, verdict "not estimable" and the note "not estimable (k items; ...)". The rows stay
(never dropped); Holm is recomputed over each family without them (`holm` leaves NaN p-values out). The pairwise
accuracies come from a sample of queries, so there the rule also counts the cell's items with positives and with
negatives in that sample (`sampled_small_cells`), as the clustered AUCs count them in the whole window.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.equivalence import NOT_ESTIMABLE
from fair_pipeline.audit.stats.inference import holm

# the estimates of each table that a not-estimable cell must not show
ESTIMATES = {
    "groups": ("auc", "variance", "se", "ci_low", "ci_high", "auc_normalized", "se_normalized", "mcclish",
               "mcclish_se", "mcclish_ci_low", "mcclish_ci_high", "roc_at_cutoff"),
    "pairs": ("auc_a", "auc_b", "diff", "diff_normalized", "se", "ci_low", "ci_high", "z", "p_value", "p_holm",
              "effect", "effect_ci_low", "effect_ci_high", "p_tost"),
    "xauc": ("xauc", "variance", "se", "ci_low", "ci_high"),
    "xauc_deltas": ("xauc_ab", "xauc_ba", "delta", "se", "ci_low", "ci_high", "z", "p_value", "p_holm", "effect",
                    "effect_ci_low", "effect_ci_high", "p_tost"),
    "pairwise": ("accuracy", "se", "ci_low", "ci_high", "p_value", "p_holm", "effect", "effect_ci_low",
                 "effect_ci_high", "p_tost"),
}
# the rows that compare within one family: Holm runs over each
FAMILIES = {"pairs": ("scored_output", "cutoff"), "xauc_deltas": ("scored_output", "kind"),
            "pairwise": ("scored_output", "kind")}


def small_cells(items: pd.Series, min_clusters: int) -> dict[str, str]:
    """{cell: why it is not estimable} of the cells (``items``: items per cell) below ``min_clusters`` items."""
    return {cell: f"not estimable ({int(n)} items; a cell needs >= {min_clusters} items, the minimum cell size)"
            for cell, n in items.items() if n < min_clusters}


def sampled_cell_items(rows: pd.DataFrame) -> pd.DataFrame:
    """group, with_pos, with_neg: each cell's distinct items with positives and with negatives among the sampled
    queries' ``rows`` (group, item_id, n_pos, n_neg)."""
    pos = rows[rows["n_pos"] > 0].groupby("group")["item_id"].nunique()
    neg = rows[rows["n_neg"] > 0].groupby("group")["item_id"].nunique()
    cells = rows["group"].unique()
    return pd.DataFrame({"group": cells, "with_pos": [int(pos.get(c, 0)) for c in cells],
                         "with_neg": [int(neg.get(c, 0)) for c in cells]})


def sampled_small_cells(rows: pd.DataFrame | None, min_clusters: int, *,
                        counts: pd.DataFrame | None = None) -> dict[str, str]:
    """{cell: why} of the cells whose items with positives, or with negatives, number fewer than ``min_clusters``
    in the sampled queries' ``rows`` (group, item_id, n_pos, n_neg), or in their ``counts`` per cell
    (`sampled_cell_items`'s columns; what Spark's executors count, `audit.spark_pairwise.sampled_cell_items`)."""
    if counts is None:
        if rows is None or rows.empty:
            return {}
        counts = sampled_cell_items(rows)
    out = {}
    for cell, p, n in zip(counts["group"], counts["with_pos"].astype(int), counts["with_neg"].astype(int)):
        if p < min_clusters or n < min_clusters:
            out[cell] = (f"not estimable ({p} items with positives, {n} with negatives in the sampled queries; "
                         f"need >= {min_clusters} each)")
    return out


def flag_small_cells(kind: str, frame: pd.DataFrame, small: dict[str, str]) -> pd.DataFrame:
    """``frame`` (a stored table of kind ``kind``: groups, pairs, xauc, xauc_deltas or pairwise) with every row of
    a cell in ``small`` ({cell: note}; as `group`, `group_a` or `group_b`) not estimable, and Holm recomputed per
    family."""
    if frame.empty or not small:
        return frame
    out = frame.copy()
    keys = [c for c in ("group", "group_a", "group_b") if c in out.columns]
    hit = np.zeros(len(out), dtype=bool)
    for column in keys:
        hit |= out[column].isin(list(small)).to_numpy()
    if not hit.any():
        return out
    for column in ESTIMATES[kind]:
        if column in out.columns:
            out.loc[hit, column] = np.nan
    out.loc[hit, "estimable"] = False
    if "verdict" in out.columns:
        out.loc[hit, "verdict"] = NOT_ESTIMABLE
    notes = []
    for row in out.loc[hit, keys].itertuples(index=False):
        notes.append(small[next(v for v in row if v in small)])
    if "note" not in out.columns:
        out["note"] = None
    out["note"] = out["note"].astype(object)
    out.loc[hit, "note"] = notes
    if kind in FAMILIES and "p_holm" in out.columns:
        by = [c for c in FAMILIES[kind] if c in out.columns]
        for _, index in out.groupby(by, dropna=False, sort=False).groups.items():
            if out.loc[index, "p_holm"].notna().any():  # a family (more than two groups) before the flagging
                out.loc[index, "p_holm"] = holm(out.loc[index, "p_value"].to_numpy(dtype=np.float64))
    return out
