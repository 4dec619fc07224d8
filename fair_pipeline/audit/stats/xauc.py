"""Cross-group ranking accuracy (Kallus & Zhou 2019): xAUC, balanced xAUC, xROC curves.

xAUC(a, b) = P(R_1^a > R_0^b) (ties count 1/2) is the Mann-Whitney statistic of the positives of
group a against the negatives of group b, so its DeLong variance is the FPR-cutoff-1 case of the
sweep; everything comes from one pass over distinct scores (no O(mn) pair loop).

* Delta xAUC(a, b) = xAUC(a, b) - xAUC(b, a): the two use disjoint samples (positives of a and
  negatives of b, vs positives of b and negatives of a), so the variances add.
* Balanced xAUC_0(g) = P(R_1 > R_0^g) and xAUC_1(g) = P(R_1^g > R_0) (Definition 3). Differences
  between groups share all positives (xAUC_0) or all negatives (xAUC_1); their covariance is the
  shared sample's DeLong covariance.
* xROC(a, b): TPR of group a's positives against FPR of group b's negatives, at a grid of FPRs.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.clustered import estimand_name, row_clusters
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_COUNT
from fair_pipeline.audit.stats.equivalence import add_equivalence
from fair_pipeline.audit.stats.grid_audit import CURVE_GRID, column_cov, run_grid_audit
from fair_pipeline.audit.stats.inference import holm, wald
from fair_pipeline.audit.stats.records import records
from fair_pipeline.audit.stats.validation import AuditInputError, as_groups, as_labels, as_scores


@dataclass
class XAUCResult:
    """``pairs``: xAUC(a, b) for ordered pairs; ``deltas``: Delta xAUC per unordered pair;
    ``balanced``: xAUC_0 / xAUC_1 per group; ``balanced_deltas``: their group differences;
    ``curves``: ROC per group and xROC per ordered pair on an FPR grid."""

    pairs: pd.DataFrame
    deltas: pd.DataFrame
    balanced: pd.DataFrame
    balanced_deltas: pd.DataFrame
    curves: pd.DataFrame

    def to_dict(self, curves: bool = False) -> dict:
        names = ["pairs", "deltas", "balanced", "balanced_deltas"] + (["curves"] if curves else [])
        return {name: records(getattr(self, name)) for name in names}


def _holm_if_many(df: pd.DataFrame, n_groups: int) -> pd.DataFrame:
    if n_groups > 2 and len(df):
        df["p_holm"] = holm(df["p_value"].to_numpy())
    return df


def xauc_tables(res: dict, min_count: int = DEFAULT_MIN_COUNT, confidence: float = 0.95, margins=None) -> XAUCResult:
    """Shape a run_grid_audit(..., xauc=True, curves=True) result into the xAUC tables; the delta tables end
    with effect, CI, margin, p_tost and verdict (`audit.stats.equivalence`)."""
    groups = res["groups"]
    G = len(groups)
    n_pos_g, n_neg_g = res["n_pos_group"], res["n_neg_group"]
    k1 = int(np.flatnonzero(res["alphas"] == 1.0)[0])
    col = {name: i for i, name in enumerate(res["columns"])}
    ok_pos = n_pos_g >= min_count
    ok_neg = n_neg_g >= min_count

    def stat(i):
        return res["auc"][i, k1], res["variance"][i, k1]

    rows = []
    for a in range(G):
        for b in range(G):
            if a == b:
                continue
            est, var = stat(col[("xauc", a, b)])
            ok = bool(ok_pos[a] and ok_neg[b])
            w = wald(est, var, confidence, null=0.5)
            rows.append({"group_a": groups[a], "group_b": groups[b],
                         "xauc": est if ok else np.nan, "variance": var if ok else np.nan,
                         "se": w["se"] if ok else np.nan, "ci_low": w["ci_low"] if ok else np.nan,
                         "ci_high": w["ci_high"] if ok else np.nan,
                         "n_pos_a": int(n_pos_g[a]), "n_neg_b": int(n_neg_g[b]), "estimable": ok})
    pairs = pd.DataFrame(rows)

    rows = []
    for a, b in combinations(range(G), 2):
        e1, v1 = stat(col[("xauc", a, b)])
        e2, v2 = stat(col[("xauc", b, a)])
        ok = bool(ok_pos[a] and ok_neg[a] and ok_pos[b] and ok_neg[b])
        # disjoint rows, but one cluster (an item with clicks and skips) can feed both directions
        c12 = column_cov(res, [1.0], col[("xauc", a, b)], col[("xauc", b, a)])[0]
        w = wald(e1 - e2, v1 + v2 - 2 * c12, confidence)
        rows.append({"group_a": groups[a], "group_b": groups[b], "xauc_ab": e1, "xauc_ba": e2,
                     "delta": e1 - e2, **{k: float(v) for k, v in w.items()}, "estimable": ok})
    deltas = pd.DataFrame(rows)
    if len(deltas):
        deltas.loc[~deltas["estimable"], ["xauc_ab", "xauc_ba", "delta", "se", "ci_low", "ci_high", "z", "p_value"]] = np.nan
    deltas = _holm_if_many(deltas, G)

    cov = res["balanced_cov"]
    rows = []
    for g in range(G):
        e0, v0 = stat(col[("xauc0", g, None)])
        e1, v1 = stat(col[("xauc1", g, None)])
        w0, w1 = wald(e0, v0, confidence), wald(e1, v1, confidence)
        rows.append({"group": groups[g], "xauc0": e0, "se0": float(w0["se"]),
                     "ci0_low": float(w0["ci_low"]), "ci0_high": float(w0["ci_high"]),
                     "n_neg": int(n_neg_g[g]), "estimable0": bool(ok_neg[g]),
                     "xauc1": e1, "se1": float(w1["se"]),
                     "ci1_low": float(w1["ci_low"]), "ci1_high": float(w1["ci_high"]),
                     "n_pos": int(n_pos_g[g]), "estimable1": bool(ok_pos[g])})
    balanced = pd.DataFrame(rows)
    for s in ("0", "1"):
        bad = ~balanced[f"estimable{s}"]
        balanced.loc[bad, [f"xauc{s}", f"se{s}", f"ci{s}_low", f"ci{s}_high"]] = np.nan

    rows = []
    for a, b in combinations(range(G), 2):
        for s, okv in (("0", ok_neg), ("1", ok_pos)):
            C = cov[f"xauc{s}"]
            ea = stat(col[(f"xauc{s}", a, None)])[0]
            eb = stat(col[(f"xauc{s}", b, None)])[0]
            ok = bool(okv[a] and okv[b])
            w = wald(ea - eb, C[a, a] + C[b, b] - 2 * C[a, b], confidence)
            rows.append({"kind": f"xauc{s}", "group_a": groups[a], "group_b": groups[b],
                         "delta": ea - eb if ok else np.nan,
                         **{k: (float(v) if ok else np.nan) for k, v in w.items()}, "estimable": ok})
    balanced_deltas = pd.DataFrame(rows)
    if G > 2 and len(balanced_deltas):
        balanced_deltas["p_holm"] = np.nan
        for kind, idx in balanced_deltas.groupby("kind").groups.items():
            balanced_deltas.loc[idx, "p_holm"] = holm(balanced_deltas.loc[idx, "p_value"].to_numpy())

    curves = curve_table(res)
    deltas = add_equivalence(deltas, "xauc", "delta", "se", margins=margins, confidence=confidence)
    balanced_deltas = add_equivalence(balanced_deltas, "balanced_xauc", "delta", "se", margins=margins,
                                      confidence=confidence)
    estimand = res.get("estimand", "conditional")
    for table in (pairs, deltas, balanced, balanced_deltas):
        table["variance_estimand"] = estimand
        table["clusters"] = res.get("clusters", np.nan)
    return XAUCResult(pairs, deltas, balanced, balanced_deltas, curves)


def curve_table(res: dict) -> pd.DataFrame:
    """Per-group ROC and xROC(a, b) on the FPR grid (linear interpolation inside tied blocks)."""
    sel = np.searchsorted(res["alphas"], CURVE_GRID)
    if not np.allclose(res["alphas"][sel], CURVE_GRID):
        return pd.DataFrame(columns=["kind", "group_a", "group_b", "fpr", "tpr"])
    groups = res["groups"]
    out = []
    for i, (kind, a, b) in enumerate(res["columns"]):
        if kind not in ("group", "xauc"):
            continue
        out.append(pd.DataFrame({"kind": "roc" if kind == "group" else "xroc",
                                 "group_a": groups[a], "group_b": groups[b],
                                 "fpr": CURVE_GRID, "tpr": res["tpr_interp"][i, sel]}))
    return pd.concat(out, ignore_index=True)


def xauc(scores, labels, sensitive_features, *, clusters=None, min_count: int = DEFAULT_MIN_COUNT,
         confidence: float = 0.95, margins=None) -> XAUCResult:
    """xAUC(a, b), Delta xAUC, balanced xAUC_0 / xAUC_1 and xROC curves, with DeLong variances.

    Convention as in Kallus & Zhou: label 1 is the positive (beneficial) outcome and higher scores
    should rank positives above negatives. ``clusters``: per-row cluster ids (or a tuple of two arrays
    for two-way clustering) for cluster-robust variances, as in :func:`compare_groups`. ``margins``:
    practical margins δ (keys ``xauc``, ``balanced_xauc``) behind each delta's verdict.
    """
    s = as_scores(scores)
    y = as_labels(labels, s.size)
    codes, levels = as_groups(sensitive_features, s.size)
    if levels.size < 2:
        raise AuditInputError(f"xAUC compares groups; sensitive_features has a single value {levels[0]!r}")
    if np.count_nonzero(y) == 0 or np.count_nonzero(~y) == 0:
        raise AuditInputError(f"labels contain a single class ({np.count_nonzero(y)} positives of {y.size})")
    grid = build_grid(s, y, codes, levels)
    res = run_grid_audit(grid, [1.0], xauc=True, curves=True, clusters=row_clusters(clusters, s, y, codes))
    res["estimand"] = estimand_name(clusters)
    return xauc_tables(res, min_count, confidence, margins)
