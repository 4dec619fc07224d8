"""Truncated (partial) AUC I(alpha) = int_0^alpha ROC(t) dt at many cutoffs, with Lemma 3 variances.

Accepts raw arrays (sorted here) or SQL-style aggregates (one row per distinct score with n_pos,
n_neg); both end in the same sweep over distinct scores (sweep.py), so they agree to rounding.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.blocks import ScoreGrid, build_grid, grid_from_counts, positive_positions
from fair_pipeline.audit.stats.clustered import estimand_name, row_clusters
from fair_pipeline.audit.stats.grid_audit import column_df, run_grid_audit
from fair_pipeline.audit.stats.small_sample import t_wald
from fair_pipeline.audit.stats.sweep import RocSweep
from fair_pipeline.audit.stats.sweep_no_ties import sweep_no_cross_ties
from fair_pipeline.audit.stats.validation import AuditInputError, as_cutoffs, as_labels, as_scores, require_both_classes

DEFAULT_CUTOFFS = (0.05, 0.1, 0.2, 0.5, 1.0)


def roc_table(res: dict, col: int, m: float, n: float, alphas: np.ndarray,
              confidence: float = 0.95, df=np.inf) -> pd.DataFrame:
    """One column of a sweep result as the public per-cutoff table."""
    return pd.DataFrame(roc_columns(res, col, m, n, alphas, confidence, df))


def roc_columns(res: dict, col: int, m: float, n: float, alphas: np.ndarray,
                confidence: float = 0.95, df=np.inf) -> dict[str, np.ndarray]:
    """The columns of `roc_table`, as arrays (callers assembling many tables build one frame from them).

    ``df``: degrees of freedom of the t critical value per cutoff (infinite: normal theory, rows independent)."""
    auc = res["auc"][col]
    var = res["variance"][col]
    w = t_wald(auc, var, np.broadcast_to(np.asarray(df, dtype=np.float64), auc.shape), confidence)
    mc_scale = 0.5 / (alphas - alphas**2 / 2)  # McClish: 0.5 (1 + (I - a^2/2) / (a - a^2/2))
    mcclish = 0.5 + (auc - alphas**2 / 2) * mc_scale
    return {
        "cutoff": alphas,
        "n_pos": np.full(alphas.size, int(m)),
        "n_neg": np.full(alphas.size, int(n)),
        "auc": auc,
        "variance": var,
        "se": w["se"],
        "ci_low": w["ci_low"],
        "ci_high": w["ci_high"],
        "auc_normalized": auc / alphas,
        "se_normalized": w["se"] / alphas,
        "mcclish": mcclish,
        "mcclish_se": w["se"] * mc_scale,
        "mcclish_ci_low": 0.5 + (w["ci_low"] - alphas**2 / 2) * mc_scale,
        "mcclish_ci_high": 0.5 + (w["ci_high"] - alphas**2 / 2) * mc_scale,
        "roc_at_cutoff": res["roc_at_cutoff"][col],
        "neg_below_cutoff": alphas * n,
        "df": w["df"],
    }


def aggregates_to_grid(aggregates, group_col: str | None = None) -> ScoreGrid:
    """Validate an aggregate table (score, n_pos, n_neg[, group]) and turn it into blocks."""
    if isinstance(aggregates, ScoreGrid):
        return aggregates
    df = pd.DataFrame(aggregates)
    need = ["score", "n_pos", "n_neg"] + ([group_col] if group_col else [])
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise AuditInputError(f"aggregates lack column(s) {missing}; have {list(df.columns)}")
    as_scores(df["score"].to_numpy(), name="aggregates.score")
    for c in ("n_pos", "n_neg"):
        v = df[c].to_numpy(dtype=np.float64)
        bad = ~np.isfinite(v) | (v < 0) | (v != np.round(v))
        if bad.any():
            raise AuditInputError(f"aggregates.{c} must be non-negative integers; {int(bad.sum())} rows are not")
    groups = None
    if group_col:
        g = df[group_col]
        if g.isna().any():
            raise AuditInputError(f"aggregates.{group_col} has {int(g.isna().sum())} missing values")
        groups = g.to_numpy()
    return grid_from_counts(df["score"].to_numpy(), df["n_pos"].to_numpy(), df["n_neg"].to_numpy(), groups)


def truncated_auc(scores=None, labels=None, cutoffs=DEFAULT_CUTOFFS, *, clusters=None, aggregates=None,
                  confidence: float = 0.95) -> pd.DataFrame:
    """Partial AUCs I(alpha) for every cutoff alpha, with variance, SE, CI and normalized forms.

    Either ``scores`` and ``labels`` (0/1; 1 = positive, higher score = more positive) or
    ``aggregates``: a table with columns ``score``, ``n_pos``, ``n_neg`` (one row per distinct
    score, e.g. from ``SELECT score, SUM(label), SUM(1 - label) ... GROUP BY score``).

    Columns: ``cutoff``; ``auc`` = I(alpha) (unnormalized; equals the Mann-Whitney AUC at 1) with
    ``variance`` (Lemma 3), ``se``, ``ci_low``/``ci_high``; ``auc_normalized`` = I/alpha;
    ``mcclish`` = McClish's standardized partial AUC (what ``roc_auc_score(max_fpr=alpha)``
    returns, ties included: the ROC is linear across tied scores); ``roc_at_cutoff`` = ROC(alpha);
    counts ``n_pos``, ``n_neg``, ``neg_below_cutoff``.

    ``clusters`` (arrays only): per-row cluster ids, e.g. item ids when items repeat, or a tuple of two
    arrays (items, queries) for two-way clustering: the variance is then cluster-robust (the population
    estimand: new items drawn like these) instead of Lemma 3's (rows independent). Column
    ``variance_estimand`` says which.
    """
    alphas = as_cutoffs(cutoffs)
    if aggregates is not None:
        if scores is not None or labels is not None:
            raise AuditInputError("pass either scores/labels or aggregates, not both")
        grid = aggregates_to_grid(aggregates)
        m, n = float(grid.n_pos[0]), float(grid.n_neg[0])
        require_both_classes(int(m), int(n), "aggregates")
        sweep = RocSweep(alphas, [m], [n])
        sweep.update(grid.pos, grid.neg)
        table = roc_table(sweep.result(), 0, m, n, alphas, confidence)
        table["variance_estimand"] = "conditional"
        return table
    if scores is None or labels is None:
        raise AuditInputError("truncated_auc needs scores and labels (or aggregates=)")
    s, lo, hi = as_scores(scores, return_range=True)
    y = as_labels(labels, s.size)
    m = int(np.count_nonzero(y))
    n = s.size - m
    require_both_classes(m, n)
    if clusters is not None:
        return _clustered_table(s, y, alphas, clusters, confidence)
    positions = positive_positions(s, y, lo, hi)
    if positions is not None:
        res = sweep_no_cross_ties(positions, s.size, alphas)
    else:
        grid = build_grid(s, y)
        sweep = RocSweep(alphas, [m], [n])
        sweep.update(grid.pos, grid.neg)
        res = sweep.result()
    table = roc_table(res, 0, m, n, alphas, confidence)
    table["variance_estimand"] = "conditional"
    return table


def _clustered_table(s, y, alphas, clusters, confidence) -> pd.DataFrame:
    codes = np.zeros(s.size, dtype=np.intp)
    grid = build_grid(s, y)
    res = run_grid_audit(grid, alphas, xauc=False, clusters=row_clusters(clusters, s, y, codes))
    table = roc_table(res, 0, float(grid.n_pos[0]), float(grid.n_neg[0]), alphas, confidence,
                      column_df(res, alphas, {0: 1.0}))
    table["variance_estimand"] = estimand_name(clusters)
    table["clusters"] = res["clusters"]
    table["clusters_pos"], table["clusters_neg"] = res["clusters_with"]["pos"][0], res["clusters_with"]["neg"][0]
    return table
