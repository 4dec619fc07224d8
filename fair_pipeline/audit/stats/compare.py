"""Per-group truncated AUCs and pairwise group differences (independent samples)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.clustered import estimand_name, row_clusters
from fair_pipeline.audit.stats.comparisons import compared_pairs
from fair_pipeline.audit.stats.equivalence import add_equivalence
from fair_pipeline.audit.stats.grid_audit import column_cov, column_df, run_grid_audit
from fair_pipeline.audit.stats.inference import holm
from fair_pipeline.audit.stats.small_sample import t_wald
from fair_pipeline.audit.stats.records import records
from fair_pipeline.audit.stats.truncated_auc import DEFAULT_CUTOFFS, roc_columns
from fair_pipeline.audit.stats.validation import AuditInputError, as_cutoffs, as_groups, as_labels, as_scores

DEFAULT_MIN_COUNT = 10  # positives and negatives a group needs before we estimate anything


@dataclass
class GroupComparison:
    """``groups``: one row per group x cutoff; ``pairs``: one row per pair of groups x cutoff."""

    groups: pd.DataFrame
    pairs: pd.DataFrame
    overall: pd.DataFrame

    def to_dict(self) -> dict:
        return {name: records(getattr(self, name)) for name in ("groups", "pairs", "overall")}


DEFAULT_MIN_CLUSTERS = 15  # clusters holding a group's positives, and its negatives, before a clustered CI is given
MIN_TAIL_CLUSTERS = 5  # negative clusters expected below an FPR cutoff (alpha x negative clusters)


def estimability(n_pos, n_neg, alphas, min_count: int, clusters_pos=None, clusters_neg=None,
                 min_clusters: int = DEFAULT_MIN_CLUSTERS) -> tuple[np.ndarray, list]:
    """Whether a (group, cutoff) can be estimated, and why not.

    Rows: >= ``min_count`` positives and negatives and one negative below the cutoff. With clustered variances
    (``clusters_pos`` / ``clusters_neg``: clusters holding the group's positives / negatives) the sampling unit is
    the cluster: >= ``min_clusters`` of each and alpha x negative clusters >= MIN_TAIL_CLUSTERS. Below that the
    clustered 95% CIs covered 0.87-0.91 in Monte Carlo (30 items in a group: ~10 with positives; 45-60 items:
    3-4 negative items in the top 10% of FPR), see docs/audit_inference.md.
    """
    ok = np.ones(alphas.size, dtype=bool)
    why = [""] * alphas.size
    for k, a in enumerate(alphas):
        if n_pos < min_count or n_neg < min_count:
            ok[k] = False
            why[k] = f"not estimable: {int(n_pos)} positives, {int(n_neg)} negatives (need >= {min_count} each)"
        elif a * n_neg < 1:
            ok[k] = False
            why[k] = f"not estimable: fewer than one negative below FPR {a:g} ({int(n_neg)} negatives)"
        elif clusters_pos is not None and (clusters_pos < min_clusters or clusters_neg < min_clusters):
            ok[k] = False
            why[k] = (f"not estimable ({int(clusters_pos)} clusters with positives, {int(clusters_neg)} with "
                      f"negatives; need >= {min_clusters} each)")
        elif clusters_neg is not None and a * clusters_neg < MIN_TAIL_CLUSTERS:
            ok[k] = False
            why[k] = (f"not estimable ({int(clusters_neg)} clusters with negatives: fewer than "
                      f"{MIN_TAIL_CLUSTERS} expected below FPR {a:g})")
    return ok, why


COUNT_COLUMNS = ("cutoff", "n_pos", "n_neg", "neg_below_cutoff", "clusters_pos", "clusters_neg")


def group_tables(res: dict, cutoffs: np.ndarray, min_count: int, confidence: float, margins=None,
                 min_clusters: int = DEFAULT_MIN_CLUSTERS):
    """Per-group and overall tables plus pairwise comparisons from a run_grid_audit result."""
    sel = np.searchsorted(res["alphas"], cutoffs)
    sub = {k: v[:, sel] for k, v in res.items() if isinstance(v, np.ndarray) and v.ndim == 2}
    groups = res["groups"]
    # Columns as arrays, one DataFrame per table: writing cells of small frames cost pandas more than the sweep.
    tables = []  # every group's columns, then the overall ones
    for i, (kind, a, _) in enumerate(res["columns"]):
        if kind not in ("group", "overall"):
            continue
        m, n = res["m"][i], res["n"][i]
        columns = roc_columns(sub, i, m, n, cutoffs, confidence, column_df(res, cutoffs, {i: 1.0}))
        c_pos = c_neg = None
        if "clusters_with" in res:  # clusters holding the vector's positives and negatives
            v = a if kind == "group" else len(groups)
            c_pos, c_neg = res["clusters_with"]["pos"][v], res["clusters_with"]["neg"][v]
            columns["clusters_pos"] = np.full(cutoffs.size, c_pos)
            columns["clusters_neg"] = np.full(cutoffs.size, c_neg)
        ok, why = estimability(m, n, cutoffs, min_count, c_pos, c_neg, min_clusters)
        if not ok.all():  # a non-estimable (group, cutoff) keeps its counts; every estimate is NaN
            columns.update({name: np.where(ok, values, np.nan) for name, values in columns.items()
                            if name not in COUNT_COLUMNS})
        label = groups[a] if kind == "group" else "(all)"
        tables.append({"group": [label] * cutoffs.size, **columns, "estimable": ok, "note": why})
    per_group = pd.DataFrame({name: np.concatenate([np.asarray(t[name], dtype=object if name in ("group", "note") else None)
                                                    for t in tables[:-1]]) for name in tables[0]})
    overall = pd.DataFrame(tables[-1])
    column = {groups[a]: i for i, (kind, a, _) in enumerate(res["columns"]) if kind == "group"}
    pairs = pairwise_differences(per_group, confidence, margins,
                                 cov_of=lambda a, b: column_cov(res, cutoffs, column[a], column[b]),
                                 df_of=lambda a, b: column_df(res, cutoffs, {column[a]: 1.0, column[b]: -1.0}),
                                 compared=res.get("compared"))
    estimand = res.get("estimand", "conditional")
    for table in (per_group, pairs, overall):
        table["variance_estimand"] = estimand
        table["clusters"] = res.get("clusters", np.nan)
    return per_group, pairs, overall


def pairwise_differences(per_group: pd.DataFrame, confidence: float, margins=None, cov_of=None,
                         df_of=None, compared=None) -> pd.DataFrame:
    """For each compared pair of groups (``compared``: (a, b) positions in the table's group order, default all
    pairs a < b; `comparisons.compared_pairs`) and cutoff: I_a - I_b with SE, CI, z, p (and Holm if > 2 groups), then the
    effect size (I_a - I_b)/cutoff with its CI, margin δ, TOST p and verdict (`audit.stats.equivalence`).

    ``cov_of(a, b)``: covariance of the two groups' estimates per cutoff (clusters spanning groups,
    e.g. queries); None for independent groups. ``df_of(a, b)``: degrees of freedom of the difference per cutoff
    (None: normal theory).
    """
    names = list(dict.fromkeys(per_group["group"].tolist()))
    if len(names) < 2:
        return pd.DataFrame(columns=["group_a", "group_b", "cutoff", "diff", "se", "p_value",
                                     "effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost", "verdict"])
    # (groups, cutoffs) matrices, then every pair at once (rows: pairs in combinations order, then cutoffs)
    cutoffs = per_group.loc[per_group["group"] == names[0], "cutoff"].to_numpy()
    G, K = len(names), cutoffs.size
    code = pd.Index(names).get_indexer(per_group["group"])
    order = np.lexsort((per_group["cutoff"].to_numpy(), code))

    def matrix(column: str) -> np.ndarray:
        return per_group[column].to_numpy()[order].reshape(G, K)

    auc, variance, estimable = matrix("auc").astype(np.float64), matrix("variance").astype(np.float64), matrix("estimable")
    ia, ib = np.triu_indices(G, 1) if compared is None else np.array(compared, dtype=np.intp).reshape(-1, 2).T
    diff = auc[ia] - auc[ib]
    var = variance[ia] + variance[ib]
    if cov_of is not None:
        var = var - 2 * np.array([cov_of(names[a], names[b]) for a, b in zip(ia, ib)]).reshape(var.shape)
    df = np.inf if df_of is None else np.array([df_of(names[a], names[b]) for a, b in zip(ia, ib)]).ravel()
    w = t_wald(diff.ravel(), var.ravel(), df, confidence)
    pairs = pd.DataFrame({
        "group_a": np.repeat(np.array(names, dtype=object)[ia], K), "group_b": np.repeat(np.array(names, dtype=object)[ib], K),
        "cutoff": np.tile(cutoffs, ia.size), "auc_a": auc[ia].ravel(), "auc_b": auc[ib].ravel(),
        "diff": diff.ravel(), "diff_normalized": (diff / cutoffs).ravel(),
        **w, "estimable": (estimable[ia] & estimable[ib]).ravel().astype(bool),
    })
    if len(names) > 2:  # family = the compared pairs at one cutoff
        p_holm = np.apply_along_axis(holm, 0, w["p_value"].reshape(ia.size, K))
        pairs["p_holm"] = p_holm.ravel()
    return add_equivalence(pairs, "partial_auc_normalized", "diff_normalized", pairs["se"] / pairs["cutoff"],
                           margins=margins, confidence=confidence)


def compare_groups(scores, labels, sensitive_features, cutoffs=DEFAULT_CUTOFFS, *, clusters=None,
                   min_count: int = DEFAULT_MIN_COUNT, confidence: float = 0.95, margins=None,
                   min_clusters: int = DEFAULT_MIN_CLUSTERS, comparisons: str = "all",
                   reference=None) -> GroupComparison:
    """Truncated AUCs per group (table of :func:`truncated_auc`) and pairwise differences: of all pairs, or
    (``comparisons="reference"``) of each group minus ``reference`` (default the largest group).

    Without ``clusters`` rows are independent (Lemma 3) and groups are independent samples, so
    var(I_a - I_b) = var(I_a) + var(I_b). With ``clusters`` (per-row ids, e.g. item ids; a tuple of two
    arrays, e.g. (items, queries), for two-way clustering) the variances are cluster-robust and the
    covariance of clusters spanning groups enters the differences. A group with fewer than
    ``min_count`` positives or negatives (or no negative below a cutoff) is reported with
    ``estimable = False`` and NaN estimates, never as equal to the others; with ``clusters`` so is a group whose
    positives or negatives come from fewer than ``min_clusters`` clusters (see `estimability`). Clustered CIs use
    CR2 variances and Student t with the effective number of clusters (column ``df``; `small_sample`). ``margins``: practical margins δ
    per metric (default `audit.stats.equivalence.DEFAULT_MARGINS`) behind each pair's verdict.
    """
    alphas = as_cutoffs(cutoffs)
    s = as_scores(scores)
    y = as_labels(labels, s.size)
    codes, levels = as_groups(sensitive_features, s.size)
    if np.count_nonzero(y) == 0 or np.count_nonzero(~y) == 0:
        raise AuditInputError(f"labels contain a single class ({np.count_nonzero(y)} positives of {y.size})")
    grid = build_grid(s, y, codes, levels)
    compared, _ = compared_pairs(levels, grid.n_pos + grid.n_neg, comparisons, reference)
    res = run_grid_audit(grid, alphas, xauc=False, clusters=row_clusters(clusters, s, y, codes), compared=compared)
    res["estimand"] = estimand_name(clusters)
    per_group, pairs, overall = group_tables(res, alphas, min_count, confidence, margins, min_clusters)
    return GroupComparison(per_group, pairs, overall)
