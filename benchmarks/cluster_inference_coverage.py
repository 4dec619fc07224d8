"""Monte Carlo coverage of the audit's clustered 95% CIs under heavy-tailed popularity, minorities and query effects.

Every replication draws FRESH items (the simulator's item generator: group, relevance, merit) and fresh queries,
then impressions whose number per item is heavy-tailed: ``ceil(2 (1 + Lomax(a)))`` (Pareto tail index a; a = 1.1
puts a few items at thousands of impressions) or light-tailed ``1 + Poisson(9)``. Scores are the item's merit
(fixed per item), plus the query's effect N(0, 0.2) in the query rows; labels are the item's relevance. The truth is
in closed form (`audit_coverage.true_values`: given group and relevance the merit is normal plus a uniform in group
"0"; with the query effect, the marginal score is merit + N(0, 0.2)); the within-query pairwise accuracy
A_{a>b} = P(s_i > s_j | i relevant in a, j irrelevant in b) equals xAUC(a, b) of the merits (the query effect
cancels inside a query).

The ``rates_*`` rows evaluate a post-processed rule (decide merit >= RULE_THRESHOLD, one decision per item) on the
held-out impressions: `rate_table`'s group TPR, TPR difference and FPR difference, clustered by item. The
``selection_*`` rows compare two candidates on the same impressions (merit, and merit + W_SHIFT in group "1", both
at RULE_THRESHOLD) by SELECTION_METRIC: selection's paired cost difference clustered by item. Their truths are the
same closed forms (a rate is a normal-plus-uniform survival function at the threshold).

Rows (configurations) x statistics, each with four intervals from the same per-cluster influence totals:
``cr1_z`` (Liang-Zeger C/(C-1), normal critical value), ``cr2_z`` (leverage-adjusted totals, normal), ``cr1_t`` and
``cr2_t`` (Student t with the audit's df: the smaller of the totals' effective clusters and the parts' design df;
cr2_t is what the audit reports; the held-out rows: rates have no CR1 here (NaN), and their one df makes
``cr2_t_totals`` repeat ``cr2_t``), ``cr2_t_totals`` (CR2, t with the totals' effective clusters alone),
``cr2_t_design`` (CR2, t with the parts' Welch-combined design df alone; NaN for the pairwise rows, whose df has no
design part). ``cov_se`` is the binomial Monte Carlo SE of a coverage.

    python benchmarks/cluster_inference_coverage.py                 # every row, 500 replications, 2 processes
    python benchmarks/cluster_inference_coverage.py --reps 100 --rows pareto1.3,minority45   # pilot
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from fair_pipeline.audit.stats.blocks import build_grid  # noqa: E402
from fair_pipeline.audit.stats.cluster_pass import contrast_df, part_design_df  # noqa: E402
from fair_pipeline.audit.stats.clustered import row_clusters  # noqa: E402
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_COUNT, estimability  # noqa: E402
from fair_pipeline.audit.stats.equivalence import EQUIVALENT, INCONCLUSIVE, LARGER, WITHIN, classify_gaps  # noqa: E402
from fair_pipeline.audit.stats.grid_audit import column_df, run_grid_audit  # noqa: E402
from fair_pipeline.audit.stats.small_sample import (adjusted_parts, cluster_robust_interval, critical_value,  # noqa: E402
                                                    parts_design_df)
from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric  # noqa: E402
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402

_spec = importlib.util.spec_from_file_location("audit_coverage", Path(__file__).with_name("audit_coverage.py"))
ac = importlib.util.module_from_spec(_spec)  # the sibling benchmark: closed-form truths of the simulator's items
_spec.loader.exec_module(ac)

CUTOFFS = (0.1, 1.0)
QUERY_SD = 0.2
METHODS = ("cr1_z", "cr2_z", "cr1_t", "cr2_t_totals", "cr2_t_design", "cr2_t")
# name: (tail index or None for 1 + Poisson(9), items, minority items in group "0" or None, queries or 0, kind)
CONFIGS = {
    "pareto1.1": (1.1, 500, None, 0, "auc"),
    "pareto1.3": (1.3, 500, None, 0, "auc"),
    "pareto1.5": (1.5, 500, None, 0, "auc"),
    "pareto2.5": (2.5, 500, None, 0, "auc"),
    "minority30": (None, 500, 30, 0, "auc"),
    "minority45": (None, 500, 45, 0, "auc"),
    "minority60": (None, 500, 60, 0, "auc"),
    "minority45_pareto1.3": (1.3, 500, 45, 0, "auc"),
    "query_pareto1.3": (1.3, 500, None, 50, "auc"),
    "pairwise_fresh": (1.5, 400, None, 150, "pairwise"),
    "rates_pareto1.3": (1.3, 500, None, 0, "rates"),
    "rates_minority45": (None, 500, 45, 0, "rates"),
    "selection_pareto1.3": (1.3, 500, None, 0, "selection"),
    "selection_minority45_pareto1.3": (1.3, 500, 45, 0, "selection"),
    "selection_pareto1.3_2000": (1.3, 2000, None, 0, "selection"),
    "selection_pareto1.3_4000": (1.3, 4000, None, 0, "selection"),
}
RULE_THRESHOLD = 1.0  # the post-processed rule and the selection candidates decide score >= this
W_SHIFT = 0.3  # selection's other candidate: the merit plus this in group "1"
# selection's elicited metric (Definition 4: error weights, one fairness pair, lam = 0.5)
SELECTION_METRIC = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], lam=0.5)


def draw(config: str, seed: int) -> dict:
    tail, n_items, minority, n_queries, _ = CONFIGS[config]
    rng = np.random.default_rng(seed)
    pool = simulate_items(SimulationConfig(n_items=4 * n_items, seed=int(rng.integers(2**31))))
    g = pool["group_id"].to_numpy()
    if minority is None:
        pick = rng.choice(len(pool), n_items, replace=False)
    else:  # conditional distributions given the group are untouched, so the truth is too
        zero, one = np.flatnonzero(g == "0"), np.flatnonzero(g == "1")
        pick = np.r_[rng.choice(zero, minority, replace=False), rng.choice(one, n_items - minority, replace=False)]
    items = pool.iloc[pick]
    if tail is None:
        shows = 1 + rng.poisson(9.0, n_items)
    else:
        shows = np.ceil(2.0 * (1.0 + rng.pareto(tail, n_items))).astype(np.int64)
    item = np.repeat(np.arange(n_items), shows)
    out = {"item": item, "group": items["group_id"].to_numpy().astype(str)[item],
           "label": items["relevance"].to_numpy().astype(bool)[item], "score": items["merit_score"].to_numpy()[item]}
    if n_queries:
        query = rng.integers(0, n_queries, item.size)
        out["query"] = query
        if CONFIGS[config][4] == "auc":
            out["score"] = out["score"] + QUERY_SD * rng.standard_normal(n_queries)[query]
    return out


def truths(config: str) -> dict:
    tail, _, _, n_queries, kind = CONFIGS[config]
    variant = "per_impression" if n_queries and kind == "auc" else "fixed"
    v = ac.true_values(variant, "relevance")  # I_0(0.1), I_0(1), I_0-I_1(0.1), I_0-I_1(1)
    out = {"I0-I1(0.1)": v[2], "I0-I1(1)": v[3]}
    cfg = SimulationConfig()
    comp = {}
    for c in (0, 1):
        comp[c] = (ac._Component(cfg.relevance_effect + cfg.group_effect * c, cfg.relevance_sd, 2.0 * (1 - c)),
                   ac._Component(cfg.group_effect * c, cfg.relevance_sd, 1.0 * (1 - c)))
    if kind in ("rates", "selection"):
        return heldout_truths(kind, comp)
    x01 = ac._partial_auc(comp[0][0], comp[1][1], 1.0)  # positives of 0 above negatives of 1
    x10 = ac._partial_auc(comp[1][0], comp[0][1], 1.0)
    if kind == "pairwise":
        return {"A0>1-A1>0": x01 - x10, "A0>1-A1>0 queries only": x01 - x10}
    if not n_queries:
        out["dxAUC"] = x01 - x10
    return out


def _intervals(est, var_cr1, var_cr2, df, df_totals=None, df_design=np.nan) -> dict:
    z = critical_value(0.95)
    t = critical_value(0.95, df)
    t_totals = critical_value(0.95, df if df_totals is None else df_totals)
    return {"cr1_z": z * np.sqrt(var_cr1), "cr2_z": z * np.sqrt(var_cr2),
            "cr1_t": t * np.sqrt(var_cr1), "cr2_t_totals": t_totals * np.sqrt(var_cr2),
            "cr2_t_design": critical_value(0.95, df_design) * np.sqrt(var_cr2), "cr2_t": t * np.sqrt(var_cr2),
            "df_totals": df if df_totals is None else df_totals, "df_design": df_design}


def auc_statistics(d: dict) -> list[dict]:
    s, y, g = d["score"], d["label"], d["group"]
    codes, levels = np.unique(g, return_inverse=True)[1], np.unique(g)
    clusters = (d["item"], d["query"]) if "query" in d else d["item"]
    grid = build_grid(s, y, codes, levels)
    res = run_grid_audit(grid, list(CUTOFFS), xauc="query" not in d, clusters=row_clusters(clusters, s, y, codes))
    col = {name: i for i, name in enumerate(res["columns"])}
    c0, c1 = col[("group", 0, 0)], col[("group", 1, 1)]
    ok = {}  # the audit's estimability rule per group and cutoff (clusters of positives / negatives)
    fewest = {"min_clusters_pos": int(min(res["clusters_with"]["pos"])),
              "min_clusters_neg": int(min(res["clusters_with"]["neg"]))}
    for g in (0, 1):
        c_pos, c_neg = res["clusters_with"]["pos"][g], res["clusters_with"]["neg"][g]
        ok[g] = dict(zip(CUTOFFS, estimability(grid.n_pos[g], grid.n_neg[g], np.array(CUTOFFS), DEFAULT_MIN_COUNT,
                                               c_pos, c_neg)[0]))
    contrasts = {f"I0-I1({a:g})": (a, {c0: 1.0, c1: -1.0}) for a in CUTOFFS}
    if "query" not in d:
        contrasts["dxAUC"] = (1.0, {col[("xauc", 0, 1)]: 1.0, col[("xauc", 1, 0)]: -1.0})
    rows = []
    for name, (a, w) in contrasts.items():
        k = int(np.searchsorted(res["cov_alphas"], a))
        ka = int(np.searchsorted(res["alphas"], a))
        vec = np.zeros(len(res["pairs"]))
        for c, coef in w.items():
            vec[c] = coef
        est = float(vec @ res["auc"][:, ka])
        v1, v2 = float(vec @ res["cov_cr1"][k] @ vec), float(vec @ res["cov"][k] @ vec)
        df = float(column_df(res, [a], w)[0])
        df_totals = float(contrast_df(res["cluster_totals"], vec)[k])  # without the design df
        df_design = float(min(part_design_df(d, vec, res["pairs"])[k] for d in res["cluster_designs"]))
        rows.append({"statistic": name, "estimate": est, "df": df,
                     **_intervals(est, v1, v2, df, df_totals, df_design),
                     "clusters": int(res["clusters"]), "estimable": bool(ok[0][a] and ok[1][a]), "margin": 0.02 * a, **fewest})
    return rows


def pairwise_statistics(d: dict) -> list[dict]:
    from fair_pipeline.audit.stats.pairwise import pairwise_accuracies
    rows = []
    for name, clusters in (("items+queries", (d["item"], d["query"])),):
        r = pairwise_accuracies(d["score"], d["label"], d["group"], d["query"], clusters=clusters)
        gap = r.gaps.iloc[0]
        sign = 1.0 if gap["group_a"] == "0" else -1.0
        est = sign * float(gap["gap"])
        v1, v2, df = (float(gap[c]) for c in ("variance_cr1", "variance", "df"))
        rows.append({"statistic": "A0>1-A1>0", "estimate": est, "df": df, **_intervals(est, v1, v2, df),
                     "clusters": int(gap["n_clusters"]), "estimable": bool(gap["estimable"]), "margin": 0.02})
    old = pairwise_accuracies(d["score"], d["label"], d["group"], d["query"]).gaps.iloc[0]  # queries only
    half = critical_value(0.95) * float(old["se"])
    rows.append({"statistic": "A0>1-A1>0 queries only", "estimate": est, "df": np.inf,
                 **{m: half for m in METHODS}, "df_design": np.nan, "clusters": int(old["n_queries"]), "estimable": bool(old["estimable"]),
                 "margin": 0.02})
    return rows


def _group_rates(comp, shift: float = 0.0) -> np.ndarray:
    """(groups, 2) true TPR and TNR of score >= RULE_THRESHOLD for scores = merit + shift x (group "1")."""
    return np.array([[1 - comp[c][0].cdf(RULE_THRESHOLD - shift * c), comp[c][1].cdf(RULE_THRESHOLD - shift * c)]
                     for c in (0, 1)])


def heldout_truths(kind: str, comp) -> dict:
    rates = _group_rates(comp)
    if kind == "rates":
        return {"TPR0": rates[0, 0], "TPR1-TPR0": rates[1, 0] - rates[0, 0], "FPR1-FPR0": rates[0, 1] - rates[1, 1]}
    return {"cost(A)-cost(W)": float(SELECTION_METRIC(rates) - SELECTION_METRIC(_group_rates(comp, W_SHIFT)))}


def _rate_design_dfs(decision, label, group, item) -> dict:
    """The design df alone of the ``rates_*`` statistics: each cell's CR2 part (its items' residual totals and
    shares of its rows, as `rate_table` forms them), Welch-combined over a difference's two cells."""
    from fair_pipeline.postprocessing.rates import _Linearizer  # the cells' parts exactly as rate_table forms them
    lin = _Linearizer(decision, pd.factorize(item)[0])
    parts = {(level, metric): lin.residual(mask)[1] for level in ("0", "1")
             for metric, mask in (("tpr", (group == level) & label), ("fpr", (group == level) & ~label))}

    def df(*cells):
        if any(parts[c] is None for c in cells):
            return np.nan
        totals, shares = np.stack([parts[c][0] for c in cells]), np.stack([parts[c][1] for c in cells])
        return parts_design_df(adjusted_parts(totals, np.minimum(shares, 1.0)), np.minimum(shares, 1.0))

    return {"TPR0": df(("0", "tpr")), "TPR1-TPR0": df(("1", "tpr"), ("0", "tpr")),
            "FPR1-FPR0": df(("1", "fpr"), ("0", "fpr"))}


def _reported_interval(estimate, low, high, asymmetric: bool) -> dict:
    """The reported weighted-binomial CI's distances below / above the estimate (``cr2_t``'s coverage and verdicts)."""
    return {"ci_below": float(estimate - low), "ci_above": float(high - estimate)} if asymmetric and np.isfinite(low) else {}


def heldout_statistics(d: dict, kind: str) -> list[dict]:
    """Post-processed rule's held-out rates (`rate_table`) or selection's paired cost difference, clustered by item."""
    g = np.where(d["group"] == "0", "0", "1")
    n_clusters_held = int(np.unique(d["item"]).size)
    if kind == "rates":
        from fair_pipeline.postprocessing.rates import rate_table
        decision = (d["score"] >= RULE_THRESHOLD).astype(float)
        t = rate_table(decision, d["label"], g, clusters=d["item"]).set_index(["group", "metric"])
        design = _rate_design_dfs(decision, d["label"], g, d["item"])
        picks = {"TPR0": ("0", "tpr", 1.0), "TPR1-TPR0": ("1 - 0", "tpr", 1.0), "FPR1-FPR0": ("1 - 0", "fpr", 1.0)}
        rows = []
        for name, (group, metric, _) in picks.items():
            r = t.loc[(group, metric)]
            est, se, df = float(r["estimate"]), float(r["se"]), float(r["df"])
            rows.append({"statistic": name, "estimate": est, "df": df, **_intervals(est, np.nan, se**2, df, df_design=design[name]),
                         **_reported_interval(est, r["ci_low"], r["ci_high"], r["interval"] != "t"),
                         "clusters": int(r["clusters"]), "estimable": bool(np.isfinite(se)), "margin": 0.02})
        return rows
    from fair_pipeline.selection.elicitation.paired import (candidate_parts, cluster_variance, clustered_interval,
                                                            clustered_parts, group_codes, paired_binomial_interval, paired_summary)
    held = pd.DataFrame({"group": g, "n_pos": d["label"].astype(int), "n_neg": (~d["label"]).astype(int)})
    labels = ["0", "1"]
    cost_a, parts_a, _ = candidate_parts(SELECTION_METRIC, held, d["score"], labels, threshold=RULE_THRESHOLD)
    cost_w, parts_w, _ = candidate_parts(SELECTION_METRIC, held, d["score"] + W_SHIFT * (g == "1"), labels,
                                         threshold=RULE_THRESHOLD)
    decided = [(s >= RULE_THRESHOLD).astype(float) for s in (d["score"], d["score"] + W_SHIFT * (g == "1"))]
    binomial = paired_binomial_interval(SELECTION_METRIC, held, group_codes(held["group"], labels), *decided, d["item"])
    out = paired_summary(cost_a, parts_a, cost_w, parts_w, held, labels, d["item"], differing=decided[0] != decided[1],
                         binomial=binomial)  # fixed thresholds: the reported CI is the weighted-binomial one
    var_cr1 = cluster_variance((parts_a - parts_w).sum(axis=1), d["item"])[0]
    totals, shares = clustered_parts(parts_a - parts_w, held, labels, d["item"])
    df_design = parts_design_df(adjusted_parts(totals, shares), shares)
    cr2 = cluster_robust_interval(out.estimate, totals, shares)  # CR2 alone, and the audit's before its rule
    floored = clustered_interval(out.estimate, parts_a - parts_w, held, labels, d["item"])
    se, df = (out.se, out.df) if np.isfinite(out.se) else (floored.se, floored.df)
    return [{"statistic": "cost(A)-cost(W)", "estimate": out.estimate, "df": df,
             **_intervals(out.estimate, var_cr1, se**2, df, df_design=df_design), "clusters": n_clusters_held,
             "disagreeing": out.disagreeing, "cr2_only": critical_value(0.95, cr2.df) * cr2.se,
             "floored": critical_value(0.95, floored.df) * floored.se,
             **_reported_interval(out.estimate, out.ci_low, out.ci_high, binomial is not None),
             "estimable": bool(np.isfinite(out.se)), "margin": 0.02}]


def one_replication(args) -> list[dict]:
    config, rep, seed = args
    d = draw(config, [seed, rep, list(CONFIGS).index(config)])
    kind = CONFIGS[config][4]
    if kind in ("rates", "selection"):
        return [{"config": config, "rep": rep, **row} for row in heldout_statistics(d, kind)]
    stats_of = pairwise_statistics if kind == "pairwise" else auc_statistics
    return [{"config": config, "rep": rep, **row} for row in stats_of(d)]


def coverage(raw: pd.DataFrame) -> pd.DataFrame:
    """Per configuration x statistic: coverage of each interval over the replications the audit's rule calls
    estimable (``not_estimable``: the share it does not), with its binomial Monte Carlo SE."""
    rows = []
    for (config, name), g in raw.groupby(["config", "statistic"], sort=False):
        truth = truths(config)[name]
        est_ok = g["estimable"].astype(bool)
        reported = g["ci_below"].notna() if "ci_below" in g.columns else False  # a weighted binomial CI exists
        g = g[est_ok & (g["cr2_t"].notna() | reported)]  # even where the SE is 0 (a rate of 0 or 1)
        err = g["estimate"] - truth
        row = {"config": config, "statistic": name, "truth": truth, "reps": len(g),
               "not_estimable": float(1 - est_ok.mean()), "bias/sd": err.mean() / g["estimate"].std(ddof=1),
               "median_df": g["df"].median(), "median_df_design": g["df_design"].median()}
        for m in METHODS:  # NaN: the method does not apply (held-out rates have no CR1 here, t none at SE 0)
            has = g[m].notna()
            row[m] = float((np.abs(err[has]) <= g[m][has]).mean()) if has.any() else np.nan
        if "ci_below" in g.columns and g["ci_below"].notna().all():  # the reported, asymmetric interval
            row["cr2_t"] = float(((err <= g["ci_below"]) & (-err <= g["ci_above"])).mean())
        row["cov_se"] = float(np.sqrt(row["cr2_t"] * (1 - row["cr2_t"]) / max(row["reps"], 1)))
        row["se/sd_cr2"] = float((g["cr2_z"] / critical_value(0.95)).mean() / g["estimate"].std(ddof=1))
        rows.append(row)
    return pd.DataFrame(rows)


def diagnostics(raw: pd.DataFrame) -> pd.DataFrame:
    """Per row, over the replications the rule keeps: is a miscoverage the SE's or the critical value's? ``var/mse``
    = mean(SE²) / mean(error²) (1: unbiased); ``t_needed`` = the 95% quantile of |error| / SE beside ``t_used``, the
    median t_{0.975, df}; ``corr_abs_err_se`` (positive: large errors come with large SEs, a light-tailed t ratio);
    ``miss_low`` / ``miss_high``: intervals entirely below / above the truth; ``cov_df_q1`` / ``cov_df_q4``: coverage
    in the quarter of draws with the smallest / largest df (the reported interval's: the rates' is asymmetric)."""
    rows = []
    for (config, name), g in raw.groupby(["config", "statistic"], sort=False):
        g = g[g["estimable"].astype(bool) & g["cr2_t"].notna()]
        if name.endswith("queries only") or len(g) < 2:
            continue
        err, se = g["estimate"].to_numpy() - truths(config)[name], g["cr2_z"].to_numpy() / critical_value(0.95)
        half, df = g["cr2_t"].to_numpy(), g["df"].to_numpy()
        asymmetric = "ci_below" in g.columns and g["ci_below"].notna().all()  # the reported interval (rates)
        below, above = (g["ci_below"].to_numpy(), g["ci_above"].to_numpy()) if asymmetric else (half, half)
        low, high = df <= np.quantile(df, 0.25), df >= np.quantile(df, 0.75)
        covered = (err <= below) & (-err <= above)
        rows.append({"config": config, "statistic": name, "reps": len(g), "var/mse": float(np.mean(se**2) / np.mean(err**2)),
                     "t_needed": float(np.quantile(np.abs(err) / se, 0.95)), "t_used": float(np.median(critical_value(0.95, df))),
                     "corr_abs_err_se": float(np.corrcoef(np.abs(err), se)[0, 1]),
                     "miss_low": float(np.mean(-err > above)), "miss_high": float(np.mean(err > below)),
                     "cov_df_q1": float(np.mean(covered[low])), "cov_df_q4": float(np.mean(covered[high]))})
    return pd.DataFrame(rows)


def coverage_by_disagreement(raw: pd.DataFrame, least=(1, 5, 10, 15, 20)) -> pd.DataFrame:
    """Selection rows, every replication before the estimability rule: the items on which the two candidates decide
    differently (the whole difference rests on them; the rule needs MIN_DISAGREEING of them) and, over the
    replications with at least k of them (``kept``: their share), the coverage of CR2 alone (``cr2``) and of CR2
    floored by the exchangeable-items variance (``floor``)."""
    if "disagreeing" not in raw.columns:
        return pd.DataFrame()
    rows = []
    for (config, name), g in raw[raw["disagreeing"].notna()].groupby(["config", "statistic"], sort=False):
        g = g[g["floored"].notna() & g["cr2_only"].notna()]
        err = np.abs(g["estimate"] - truths(config)[name])
        row = {"config": config, "reps": len(g), "median_disagreeing": g["disagreeing"].median(),
               "p10": g["disagreeing"].quantile(0.1), "p90": g["disagreeing"].quantile(0.9)}
        for k in least:
            keep = (g["disagreeing"] >= k).to_numpy()
            row[f"kept>={k}"] = float(keep.mean())
            for label, column in (("cr2", "cr2_only"), ("floor", "floored")):
                row[f"{label}>={k}"] = float((err <= g[column])[keep].mean()) if keep.any() else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _interval_verdicts(estimate, below, above, delta):
    """`classify_gaps`' rule applied to an interval [estimate - below, estimate + above] that is not symmetric:
    "larger than δ" when it lies beyond ±δ, "equivalent" when inside (-δ, δ), else inconclusive."""
    low, high = estimate - below, estimate + above
    verdict = np.where((low > delta) | (high < -delta), LARGER,
                       np.where((low > -delta) & (high < delta), EQUIVALENT, INCONCLUSIVE))
    return verdict, None


def verdict_errors(raw: pd.DataFrame) -> pd.DataFrame:
    """Verdict error rates of the audit's rule (`classify_gaps` with the CR2 SE and df) at a true gap of 0 and of
    ±δ, by shifting each replication's error to that truth (the same draws, relabelled: the estimate's error does not
    depend on where the gap lies). δ = 3 x the row's median SE, so that both "equivalent" and "larger than δ" can
    happen (with the default δ = 0.02 and these small samples no CI fits inside ±δ): P(larger than δ | 0),
    P(equivalent or within | ±δ), P(larger than δ | ±δ); ``max_err`` the largest of them with its binomial MC SE
    ``err_se``. ``tost90_eq|±δ``: "equivalent" at ±δ under the textbook TOST at 5% per side (the 90% CI inside ±δ),
    the rule the audit does not use because its one-sided errors exceed 5% when the t ratio is skewed."""
    rows = []
    for (config, name), g in raw.groupby(["config", "statistic"], sort=False):
        g = g[g["estimable"].astype(bool) & g["cr2_z"].notna()]
        if name.endswith("queries only") or g.empty:
            continue
        err = g["estimate"].to_numpy() - truths(config)[name]
        se = g["cr2_z"].to_numpy() / critical_value(0.95)
        df = g["df"].to_numpy()
        delta = np.full(len(g), 3.0 * float(np.median(se)))
        out = {"config": config, "statistic": name, "reps": len(g), "δ": delta[0]}
        asymmetric = "ci_below" in g.columns and g["ci_below"].notna().all()
        for label, theta in (("0", 0.0), ("δ", delta), ("-δ", -delta)):
            verdict, _ = (_interval_verdicts(theta + err, g["ci_below"].to_numpy(), g["ci_above"].to_numpy(), delta)
                          if asymmetric else classify_gaps(theta + err, se, delta, df=df))
            if label == "0":
                out["larger|gap=0"] = float(np.mean(verdict == LARGER))
            else:
                out[f"equivalent|gap={label}"] = float(np.mean((verdict == EQUIVALENT) | (verdict == WITHIN)))
                out[f"larger|gap={label}"] = float(np.mean(verdict == LARGER))
        worst = max(v for k, v in out.items() if "|gap=" in k)
        out["max_err"], out["err_se"] = worst, float(np.sqrt(max(worst, 1e-9) * (1 - worst) / len(g)))
        for label, theta in (("δ", delta), ("-δ", -delta)):
            textbook = np.abs(theta + err) + critical_value(0.90, df) * se < delta
            out[f"tost90_eq|{label}"] = np.nan if asymmetric else float(np.mean(textbook))
        rows.append(out)
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--rows", default=",".join(CONFIGS), help="comma-separated configurations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the table and raw rows here")
    a = ap.parse_args(argv)
    names = a.rows.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown rows {unknown}; known: {list(CONFIGS)}")
    tasks = [(c, r, a.seed) for c in names for r in range(a.reps)]
    t0, c0 = time.time(), time.process_time()
    raw = pd.DataFrame(replication_rows(one_replication, tasks, a.jobs, chunks_per_job=16))
    table, errors = coverage(raw), verdict_errors(raw)
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        print()
        print(errors.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        diagnosed = diagnostics(raw)
        print()
        print(diagnosed.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        by_disagreement = coverage_by_disagreement(raw)
        if not by_disagreement.empty:
            print()
            print(by_disagreement.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"{len(tasks)} replications in {time.time() - t0:.0f} s wall ({a.jobs} processes; parent CPU "
          f"{time.process_time() - c0:.0f} s)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"table": table.to_dict(orient="records"), "verdict_errors": errors.to_dict(orient="records"),
                       "diagnostics": diagnosed.to_dict(orient="records"),
                       "by_disagreement": by_disagreement.to_dict(orient="records"),
                       "raw": raw.to_dict(orient="records")}, fh)


if __name__ == "__main__":
    main()
