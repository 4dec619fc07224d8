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

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.clustered import estimand_name, row_clusters
from fair_pipeline.audit.stats.comparisons import compared_pairs
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_CLUSTERS, DEFAULT_MIN_COUNT
from fair_pipeline.audit.stats.equivalence import add_equivalence
from fair_pipeline.audit.stats.grid_audit import CURVE_GRID, column_cov, column_df, run_grid_audit
from fair_pipeline.audit.stats.inference import holm
from fair_pipeline.audit.stats.records import records
from fair_pipeline.audit.stats.small_sample import t_wald
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


def xauc_tables(res: dict, min_count: int = DEFAULT_MIN_COUNT, confidence: float = 0.95, margins=None,
                min_clusters: int = DEFAULT_MIN_CLUSTERS) -> XAUCResult:
    """Shape a run_grid_audit(..., xauc=True, curves=True) result into the xAUC tables; the delta tables end
    with effect, CI, margin, p_tost and verdict (`audit.stats.equivalence`)."""
    groups = res["groups"]
    G = len(groups)
    n_pos_g, n_neg_g = res["n_pos_group"], res["n_neg_group"]
    k1 = int(np.flatnonzero(res["alphas"] == 1.0)[0])
    col = {name: i for i, name in enumerate(res["columns"])}
    ok_pos = n_pos_g >= min_count
    ok_neg = n_neg_g >= min_count
    if "clusters_with" in res:  # clustered: the sampling unit is the cluster (`compare.estimability`)
        ok_pos &= res["clusters_with"]["pos"][:G] >= min_clusters
        ok_neg &= res["clusters_with"]["neg"][:G] >= min_clusters

    def stat(i):
        return res["auc"][i, k1], res["variance"][i, k1]

    levels = np.asarray(groups, dtype=object)
    # xAUC(a, b) columns: both directions of the compared pairs (all ordered pairs by default), a-major
    xcol = {(name[1], name[2]): i for name, i in col.items() if name[0] == "xauc"}
    ordered = np.array(list(xcol), dtype=np.intp).reshape(-1, 2)
    a_idx, b_idx = ordered[:, 0], ordered[:, 1]
    x_idx = np.array(list(xcol.values()), dtype=np.intp)
    est, var = res["auc"][x_idx, k1], res["variance"][x_idx, k1]
    ok = ok_pos[a_idx] & ok_neg[b_idx]
    df = np.array([column_df(res, [1.0], {int(c): 1.0})[0] for c in x_idx], dtype=np.float64)
    w = t_wald(est, var, df, confidence, null=0.5)
    pairs = pd.DataFrame({"group_a": levels[a_idx], "group_b": levels[b_idx],
                          "xauc": np.where(ok, est, np.nan), "variance": np.where(ok, var, np.nan),
                          **{k: np.where(ok, w[k], np.nan) for k in ("se", "ci_low", "ci_high")},
                          "n_pos_a": n_pos_g[a_idx].astype(int), "n_neg_b": n_neg_g[b_idx].astype(int),
                          "estimable": ok.astype(bool)})

    compared = res.get("compared")
    if compared is None:  # all pairs, in combinations order
        compared = list(zip(*np.triu_indices(G, 1)))
    a_idx, b_idx = np.array(compared, dtype=np.intp).reshape(-1, 2).T
    s_ab = np.array([xcol[a, b] for a, b in zip(a_idx.tolist(), b_idx.tolist())], dtype=np.intp)
    s_ba = np.array([xcol[b, a] for a, b in zip(a_idx.tolist(), b_idx.tolist())], dtype=np.intp)
    e1, v1, e2, v2 = res["auc"][s_ab, k1], res["variance"][s_ab, k1], res["auc"][s_ba, k1], res["variance"][s_ba, k1]
    ok = ok_pos[a_idx] & ok_neg[a_idx] & ok_pos[b_idx] & ok_neg[b_idx]
    # disjoint rows, but one cluster (an item with clicks and skips) can feed both directions
    c12 = np.array([column_cov(res, [1.0], s, t)[0] for s, t in zip(s_ab, s_ba)], dtype=np.float64)
    df = np.array([column_df(res, [1.0], {int(s): 1.0, int(t): -1.0})[0] for s, t in zip(s_ab, s_ba)],
                  dtype=np.float64)
    w = t_wald(e1 - e2, v1 + v2 - 2 * c12, df, confidence)
    rows = {"group_a": levels[a_idx], "group_b": levels[b_idx], "xauc_ab": e1, "xauc_ba": e2, "delta": e1 - e2,
            **{k: np.asarray(v, dtype=float) for k, v in w.items()}, "estimable": ok.astype(bool)}
    deltas = pd.DataFrame(rows)
    if len(deltas):
        deltas.loc[~deltas["estimable"], ["xauc_ab", "xauc_ba", "delta", "se", "ci_low", "ci_high", "z", "p_value"]] = np.nan
    deltas = _holm_if_many(deltas, G)

    cov = res["balanced_cov"]
    rows = []
    for g in range(G):
        e0, v0 = stat(col[("xauc0", g, None)])
        e1, v1 = stat(col[("xauc1", g, None)])
        w0 = t_wald(e0, v0, column_df(res, [1.0], {col[("xauc0", g, None)]: 1.0})[0], confidence)
        w1 = t_wald(e1, v1, column_df(res, [1.0], {col[("xauc1", g, None)]: 1.0})[0], confidence)
        rows.append({"group": groups[g], "xauc0": e0, "se0": float(w0["se"]),
                     "ci0_low": float(w0["ci_low"]), "ci0_high": float(w0["ci_high"]),
                     "df0": float(w0["df"]), "n_neg": int(n_neg_g[g]), "estimable0": bool(ok_neg[g]),
                     "xauc1": e1, "se1": float(w1["se"]),
                     "ci1_low": float(w1["ci_low"]), "ci1_high": float(w1["ci_high"]),
                     "df1": float(w1["df"]), "n_pos": int(n_pos_g[g]), "estimable1": bool(ok_pos[g])})
    balanced = pd.DataFrame(rows)
    for s in ("0", "1"):
        bad = ~balanced[f"estimable{s}"]
        balanced.loc[bad, [f"xauc{s}", f"se{s}", f"ci{s}_low", f"ci{s}_high"]] = np.nan

    parts = []
    for s, okv in (("0", ok_neg), ("1", ok_pos)):
        C = cov[f"xauc{s}"]  # variances per group, covariances per compared pair
        e = np.array([stat(col[(f"xauc{s}", g, None)])[0] for g in range(G)])
        ok = okv[a_idx] & okv[b_idx]
        cols = [col[(f"xauc{s}", g, None)] for g in range(G)]
        df = np.array([column_df(res, [1.0], {cols[a]: 1.0, cols[b]: -1.0})[0] for a, b in zip(a_idx, b_idx)],
                      dtype=np.float64)
        w = t_wald(e[a_idx] - e[b_idx], C["var"][a_idx] + C["var"][b_idx] - 2 * C["cov"], df, confidence)
        parts.append({"kind": np.full(a_idx.size, f"xauc{s}", dtype=object), "group_a": levels[a_idx],
                      "group_b": levels[b_idx], "delta": np.where(ok, e[a_idx] - e[b_idx], np.nan),
                      **{k: np.where(ok, np.asarray(v, dtype=float), np.nan) for k, v in w.items()},
                      "estimable": ok.astype(bool)})
    # rows of a pair: xauc0 then xauc1
    rows = {k: np.stack([parts[0][k], parts[1][k]], axis=1).ravel() for k in parts[0]}
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
    groups = np.asarray(res["groups"], dtype=object)
    picked = [(i, kind, a, b) for i, (kind, a, b) in enumerate(res["columns"]) if kind in ("group", "xauc")]
    idx = np.array([p[0] for p in picked], dtype=np.intp)
    kinds = np.array(["roc" if p[1] == "group" else "xroc" for p in picked], dtype=object)
    a = groups[[p[2] for p in picked]]
    b = groups[[p[3] for p in picked]]
    K = CURVE_GRID.size
    return pd.DataFrame({"kind": np.repeat(kinds, K), "group_a": np.repeat(a, K), "group_b": np.repeat(b, K),
                         "fpr": np.tile(CURVE_GRID, idx.size), "tpr": res["tpr_interp"][idx][:, sel].ravel()})


def xauc(scores, labels, sensitive_features, *, clusters=None, min_count: int = DEFAULT_MIN_COUNT,
         confidence: float = 0.95, margins=None, min_clusters: int = DEFAULT_MIN_CLUSTERS, comparisons: str = "all",
         reference=None) -> XAUCResult:
    """xAUC(a, b), Delta xAUC, balanced xAUC_0 / xAUC_1 and xROC curves, with DeLong variances.

    Convention as in Kallus & Zhou: label 1 is the positive (beneficial) outcome and higher scores
    should rank positives above negatives. ``clusters``: per-row cluster ids (or a tuple of two arrays
    for two-way clustering) for cluster-robust variances, as in :func:`compare_groups`. ``margins``:
    practical margins δ (keys ``xauc``, ``balanced_xauc``) behind each delta's verdict. ``comparisons``: "all"
    pairs of groups, or "reference": each group with ``reference`` (default the largest group).
    """
    s = as_scores(scores)
    y = as_labels(labels, s.size)
    codes, levels = as_groups(sensitive_features, s.size)
    if levels.size < 2:
        raise AuditInputError(f"xAUC compares groups; sensitive_features has a single value {levels[0]!r}")
    if np.count_nonzero(y) == 0 or np.count_nonzero(~y) == 0:
        raise AuditInputError(f"labels contain a single class ({np.count_nonzero(y)} positives of {y.size})")
    grid = build_grid(s, y, codes, levels)
    compared, _ = compared_pairs(levels, grid.n_pos + grid.n_neg, comparisons, reference)
    res = run_grid_audit(grid, [1.0], xauc=True, curves=True, clusters=row_clusters(clusters, s, y, codes),
                         compared=compared)
    res["estimand"] = estimand_name(clusters)
    return xauc_tables(res, min_count, confidence, margins, min_clusters)
