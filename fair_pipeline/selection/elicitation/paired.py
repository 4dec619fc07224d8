"""Paired, cluster-robust comparison of two candidates scored on the SAME held-out rows.

Every candidate of model selection is evaluated on the same labelled rows, and a row is not an independent
draw: the held-out table has one row per item with n_pos / n_neg (an item shown many times), so the item is
the sampling unit (cluster). Comparing two candidates' marginal CIs ignores both facts: it forgets that the
two costs share their sampling noise (paired), and the binomial SEs treat every impression as independent.

Here the difference D = c(A) - c(W) gets an influence-function (delta-method) standard error:

* Rates (k = 2). For candidate h with threshold t, in group g:
      TPR_g = sum_{i in g} p_i 1[s_i >= t] / P_g,   TNR_g = sum_{i in g} n_i 1[s_i < t] / N_g,
  P_g = sum_{i in g} p_i, N_g = sum_{i in g} n_i (p_i, n_i: the row's positives / negatives). A ratio of sums
  r = sum a_i / sum b_i has the influence of row i  IF_i(r) = (a_i - r b_i) / sum_j b_j  (the derivative of r
  in the weight of row i), so that Var(r) ~ sum_i IF_i^2.
* Threshold. When t is the candidate's own selection-rate threshold (selection_threshold: the top share q of
  all examples), t is itself an estimate; linearising S(t)/N = q with S(t) = sum_i w_i 1[s_i >= t],
  w_i = p_i + n_i, gives IF_i(t) = w_i (1[s_i >= t] - q_hat) / D(t), D(t) the example density at t (q_hat the
  realised selected share, so the terms sum to 0). With dTPR_g/dt = -D_{g,+}(t) / P_g and
  dTNR_g/dt = +D_{g,-}(t) / N_g this adds
      IF_i(TPR_g) += -pi_{g,+} u_i / P_g,   IF_i(TNR_g) += +pi_{g,-} u_i / N_g,   u_i = w_i (1[s_i >= t] - q_hat),
  where pi_{g,y} = D_{g,y}(t) / D(t) is the share of examples with group g and class y among those scored at
  the threshold: estimated by the examples whose position in the score order lies within
  h = 0.5 G^(-1/3) (share of all examples; G clusters) of q_hat. Pass ``selection_rate=None`` to treat the
  thresholds as fixed.
* Decision candidates. A candidate that decides by itself (a post-processor fitted on other data, possibly
  randomized) gives each row its probability d_i of a positive decision instead of a score; its rates are the
  expected rates (1[s_i >= t] replaced by d_i above) and, its rule being fixed, it has no threshold term. The
  SE is for the expected rates: the extra noise of the random draws is not in it.
* Cost. phi (Definition 4, metric.py) is smooth in the rates; its gradient is
      d phi / d r^u = -(1 - lam) tau^u * a + lam sum_{v != u} B^{uv} (r^u - r^v)
  (``FairQuadraticMetric.gradient``), so IF_i(c) = sum_{g,j} grad_{g,j} IF_i(r_{g,j}), and
  IF_i(D) = IF_i(c(A)) - IF_i(c(W)).
* Clusters. The influences are summed per cluster (item by default; any cluster array may be passed), in parts
  that share a denominator: per group its positives' terms (P_g), its negatives' terms (N_g), and the threshold
  terms (all examples). The variance is CR2's (Bell & McCaffrey 2002; `audit.stats.small_sample`): each cluster's
  part divided by sqrt(1 - h), h its share of that part's denominator (a popular item holding much of a group's
  positives pulls the rates towards itself, so its own total comes out too small),
      Var(D) = sum_c (sum_parts U_{c,part} / sqrt(1 - h_{c,part}))^2,
  and the CI and two-sided p-value for D = 0 use Student's t with the smaller of the totals' effective clusters
  and the parts' design df (few effective items under heavy-tailed popularity: a normal critical value covered
  less than 95%; Monte Carlo in docs/audit_inference.md).
* Exchangeable items. Under heavy-tailed popularity the sandwich above is small exactly in the samples whose
  popular items fell away from the thresholds, and those samples' differences err to one side. Where larger, the
  variance is instead τ̂² Σ_c s_c², every item's CR2 total read as its share s_c of all examples times a residual
  of common variance (`exchangeable_variance`), with Satterthwaite's df for τ̂².
* Items that decide. Two candidates' decisions differ only on the items between their thresholds, and the
  difference is those items' share of the rows: with a handful of them it is too discrete for any Wald interval.
  With fewer than MIN_DISAGREEING clusters on which the decisions differ the difference is not estimable: no SE,
  CI or p, and the count is reported (Monte Carlo in docs/audit_inference.md).
* All-or-nothing rules. Where both candidates decide all-or-nothing per item, the difference is a linear
  combination of the cells' weighted-binomial counts of the items between the thresholds, and its CI and p are
  that combination's (`paired_binomial`; the SE and df stay the variance's). With selection-rate thresholds the
  counts are taken at the estimated thresholds and the interval's half-widths are scaled by `threshold_scale`,
  the thresholds' share of the SE.

Pure numpy / scipy / pandas.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.stats import norm

from fair_pipeline.audit.stats.exchangeable import exchangeable_variance
from fair_pipeline.audit.stats.small_sample import (ClusterInterval, adjusted_totals, cluster_robust_interval,
                                                    critical_value, t_wald, upper_tail)
from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric
from fair_pipeline.selection.elicitation.operating_point import selection_threshold
from fair_pipeline.selection.elicitation.paired_binomial import paired_binomial_interval


# Fewer clusters than this on which two candidates decide differently: their difference is a handful of items'
# share, too discrete for a Wald interval (Monte Carlo in docs/audit_inference.md); the audit's DEFAULT_MIN_CLUSTERS.
MIN_DISAGREEING = 15


@dataclass(frozen=True)
class PairedDifference:
    """D = cost(A) - cost(B) on the same rows, its cluster-robust SE, t CI and two-sided p-value (``df``: the t
    reference's degrees of freedom, the effective number of clusters; infinite = normal)."""

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    cost_a: float
    cost_b: float
    n_clusters: int
    n_rows: int
    df: float = float("inf")
    disagreeing: int = -1  # clusters on which the two candidates decide differently (-1: not counted)


def group_codes(groups, labels) -> np.ndarray:
    """Index of every row's group in ``labels`` (the metric's group order); unknown groups raise."""
    labels = list(labels)
    values = np.asarray(groups).astype(str)
    codes = pd.Categorical(values, categories=[str(g) for g in labels]).codes.astype(np.int64)
    if (codes < 0).any():
        raise ValueError(f"held-out rows have groups {sorted(map(str, set(values[codes < 0])))} not in {labels}")
    return codes


def rate_influence(codes: np.ndarray, n_pos, n_neg, score, threshold: float, n_groups: int, *,
                   selection_rate: float | None = None, n_clusters: int | None = None,
                   decision=None, split: bool = False):
    """(rates (m, 2) = per group (TPR, TNR) of h = 1[score >= threshold], influence (n_rows, m, 2)).

    With ``selection_rate`` the threshold is treated as the estimated selection-rate quantile (adds the
    threshold term of the module doc); without it the threshold is fixed. ``n_clusters`` sets the window of
    the local composition at the threshold (default: number of rows). ``decision``: each row's probability of
    a positive decision, used instead of 1[score >= threshold] (a decision candidate: expected rates, no
    threshold term; score and threshold are then ignored). ``split``: return (rates, the rates' own terms, the
    threshold terms) instead of their sum (the parts of the CR2 variance)."""
    p, n = np.asarray(n_pos, dtype=float), np.asarray(n_neg, dtype=float)
    if decision is None:
        s = np.asarray(score, dtype=float)
        sel = (s >= threshold).astype(float)
    else:
        sel = np.asarray(decision, dtype=float)
        if sel.shape != p.shape or not ((sel >= 0) & (sel <= 1)).all():
            raise ValueError(f"decision must be {p.size} probabilities in [0, 1], one per row")
        s, selection_rate = sel, None
    pos = np.bincount(codes, weights=p, minlength=n_groups)
    neg = np.bincount(codes, weights=n, minlength=n_groups)
    if (pos <= 0).any() or (neg <= 0).any():
        raise ValueError(f"every group needs positives and negatives; per group n_pos={pos.tolist()}, n_neg={neg.tolist()}")
    tpr = np.bincount(codes, weights=p * sel, minlength=n_groups) / pos
    tnr = np.bincount(codes, weights=n * (1.0 - sel), minlength=n_groups) / neg
    rates = np.column_stack([tpr, tnr])
    infl = np.zeros((s.size, n_groups, 2))
    rows = np.arange(s.size)
    infl[rows, codes, 0] = (p * sel - tpr[codes] * p) / pos[codes]
    infl[rows, codes, 1] = (n * (1.0 - sel) - tnr[codes] * n) / neg[codes]
    threshold_terms = np.zeros_like(infl)
    if selection_rate is not None:
        w = p + n
        share = float((w * sel).sum() / w.sum())
        u = w * (sel - share)
        pi = local_composition(codes, p, n, s, share, n_groups, n_clusters or s.size)
        threshold_terms[:, :, 0] = -u[:, None] * (pi[:, 0] / pos)[None, :]
        threshold_terms[:, :, 1] = u[:, None] * (pi[:, 1] / neg)[None, :]
    if split:
        return rates, infl, threshold_terms
    return rates, infl + threshold_terms


def local_composition(codes, n_pos, n_neg, score, share: float, n_groups: int, n_clusters: int) -> np.ndarray:
    """pi (m, 2): share of examples of (group g, positive) and (group g, negative) among the examples scored at
    the threshold, i.e. whose position in the descending score order (as a share of all examples) is within
    h = 0.5 G^(-1/3) of ``share`` (widened to the 10 nearest rows if that holds no example)."""
    w = n_pos + n_neg
    order = np.argsort(-score, kind="stable")
    total = w.sum()
    mid = (np.cumsum(w[order]) - w[order] / 2.0) / total
    h = 0.5 * max(n_clusters, 1) ** (-1.0 / 3.0)
    near = np.abs(mid - share) <= h
    if w[order][near].sum() <= 0:
        near = np.zeros(order.size, dtype=bool)
        near[np.argsort(np.abs(mid - share), kind="stable")[:10]] = True
    idx = order[near]
    mass = w[idx].sum()
    pi = np.zeros((n_groups, 2))
    pi[:, 0] = np.bincount(codes[idx], weights=n_pos[idx], minlength=n_groups) / mass
    pi[:, 1] = np.bincount(codes[idx], weights=n_neg[idx], minlength=n_groups) / mass
    return pi


def cluster_variance(influence: np.ndarray, clusters=None) -> tuple[float, int]:
    """Liang-Zeger CR1 (G / (G - 1) * sum_c (sum_{i in c} IF_i)^2, G), the large-sample variance the CR2 one above
    corrects (kept for comparisons); ``clusters`` None = every row its own cluster."""
    influence = np.asarray(influence, dtype=float)
    if clusters is None:
        sums, g = influence, influence.size
    else:
        codes, uniques = pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), use_na_sentinel=False)
        g = len(uniques)
        sums = np.bincount(codes, weights=influence, minlength=g)
    if g < 2:
        return float("nan"), int(g)
    return float(g / (g - 1) * (sums**2).sum()), int(g)


def clustered_parts(parts, rows: pd.DataFrame, labels, clusters=None) -> tuple[np.ndarray, np.ndarray]:
    """(totals, shares), each (2 m + 1, clusters): per-cluster sums of the (n_rows, 3) influence ``parts`` of
    `candidate_parts` (or a difference of two candidates' parts) split by what their denominators count, group
    g's positives (P_g), group g's negatives (N_g) and all examples (the threshold terms), with each cluster's
    share of that denominator; ``clusters`` None = one cluster per row."""
    parts = np.asarray(parts, dtype=np.float64)
    codes = group_codes(rows["group"], labels)
    if clusters is None:
        cluster, size = np.arange(len(rows)), len(rows)
    else:
        cluster, uniques = pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), use_na_sentinel=False)
        size = len(uniques)
    p, n = rows["n_pos"].to_numpy(dtype=np.float64), rows["n_neg"].to_numpy(dtype=np.float64)
    totals, shares = [], []
    for g in range(len(list(labels))):
        mine = codes == g
        for column, count in ((0, p), (1, n)):
            weight = count * mine
            totals.append(np.bincount(cluster, weights=parts[:, column] * mine, minlength=size))
            shares.append(np.bincount(cluster, weights=weight, minlength=size) / max(weight.sum(), 1e-300))
    w = p + n
    totals.append(np.bincount(cluster, weights=parts[:, 2], minlength=size))
    shares.append(np.bincount(cluster, weights=w, minlength=size) / w.sum())
    return np.stack(totals), np.minimum(np.stack(shares), 1.0)


def clustered_interval(estimate: float, parts, rows: pd.DataFrame, labels, clusters=None,
                       confidence: float = 0.95) -> ClusterInterval:
    """SE and t interval of ``estimate`` from its per-row influence ``parts`` (`clustered_parts`): CR2's, or the
    exchangeable-items variance (`exchangeable_variance`, with its df) where that is larger."""
    totals, shares = clustered_parts(parts, rows, labels, clusters)
    ci = cluster_robust_interval(estimate, totals, shares, confidence=confidence)
    variance, df = exchangeable_variance(adjusted_totals(totals, shares), shares[-1])
    if not variance > ci.se ** 2 * (1 + 1e-9):  # ties (equal clusters) and NaN (too few clusters) stay CR2's
        return ci
    t = t_wald(estimate, variance, df, confidence)
    return ClusterInterval(float(estimate), float(t["se"]), float(df), float(t["ci_low"]), float(t["ci_high"]),
                           float(t["z"]), float(t["p_value"]), ci.n_clusters, float(df), confidence)


def candidate_parts(metric: FairQuadraticMetric, rows: pd.DataFrame, score, labels, *, threshold: float | None = None,
                    selection_rate: float | None = None, n_clusters: int | None = None,
                    decision=None) -> tuple[float, np.ndarray, float]:
    """(cost, per-row influence on the cost in three parts (n_rows, 3): the positives' rate terms, the
    negatives' rate terms, the threshold terms; threshold) of one candidate on ``rows`` (group, n_pos, n_neg).
    The threshold is ``threshold`` when given, else the ``selection_rate`` threshold of the scores.
    ``decision`` (probability of a positive decision per row) replaces score and threshold (threshold NaN)."""
    if metric.n_classes != 2:
        raise ValueError(f"paired differences need k = 2 classes (TPR, TNR); the metric has k = {metric.n_classes}")
    if decision is not None:
        threshold = float("nan")
    elif threshold is None:
        if selection_rate is None:
            raise ValueError("give the candidate's threshold or the selection_rate that placed it")
        threshold = selection_threshold(rows[["group", "n_pos", "n_neg"]].assign(score=np.asarray(score, dtype=float)),
                                        selection_rate)
    codes = group_codes(rows["group"], labels)
    rates, own, at_threshold = rate_influence(codes, rows["n_pos"], rows["n_neg"], score, threshold, metric.n_groups,
                                              selection_rate=selection_rate, n_clusters=n_clusters, decision=decision,
                                              split=True)
    grad = metric.gradient(rates)
    parts = np.column_stack([own[:, :, 0] @ grad[:, 0], own[:, :, 1] @ grad[:, 1],
                             np.einsum("gj,ngj->n", grad, at_threshold)])
    return float(metric(rates)), parts, float(threshold)


def candidate_influence(metric: FairQuadraticMetric, rows: pd.DataFrame, score, labels, **options) -> tuple[float, np.ndarray, float]:
    """(cost, per-row influence on the cost, threshold) of one candidate: `candidate_parts` summed."""
    cost, parts, threshold = candidate_parts(metric, rows, score, labels, **options)
    return cost, parts.sum(axis=1), threshold


def paired_cost_difference(metric: FairQuadraticMetric, rows: pd.DataFrame, score_a, score_b, labels, *,
                           threshold_a: float | None = None, threshold_b: float | None = None,
                           selection_rate: float | None = None, clusters=None,
                           confidence: float = 0.95) -> PairedDifference:
    """D = cost(A) - cost(B) of two candidates scored on the same ``rows`` (columns group, n_pos, n_neg), with
    the cluster-robust SE of the module doc. ``clusters``: one label per row (e.g. item_id); None = one cluster
    per row. ``selection_rate``: the thresholds are that rate's quantiles (computed when not given, and their
    estimation enters the SE); None = fixed thresholds (both must be given)."""
    n_clusters = None if clusters is None else int(pd.Series(np.asarray(clusters, dtype=object)).nunique(dropna=False))
    cost_a, parts_a, t_a = candidate_parts(metric, rows, score_a, labels, threshold=threshold_a,
                                           selection_rate=selection_rate, n_clusters=n_clusters)
    cost_b, parts_b, t_b = candidate_parts(metric, rows, score_b, labels, threshold=threshold_b,
                                           selection_rate=selection_rate, n_clusters=n_clusters)
    decided_a, decided_b = decisions_of(score_a, t_a), decisions_of(score_b, t_b)
    binomial = paired_binomial_interval(metric, rows, group_codes(rows["group"], labels), decided_a, decided_b,
                                        clusters, confidence, scale=threshold_scale(parts_a - parts_b, rows, labels,
                                                                                    clusters))
    return paired_summary(cost_a, parts_a, cost_b, parts_b, rows, labels, clusters, confidence,
                          differing=decided_a != decided_b, binomial=binomial)


def threshold_scale(parts, rows: pd.DataFrame, labels, clusters=None) -> float:
    """SE of a difference's influence ``parts`` (`candidate_parts`, three columns) over its SE without the
    threshold column, both CR2 (`paired_binomial`: the estimated thresholds' share of the interval's width);
    exactly 1 without threshold terms."""
    parts = np.asarray(parts, dtype=np.float64)
    if not parts[:, 2].any():
        return 1.0
    rates_only = parts * np.array([1.0, 1.0, 0.0])
    full, fixed = (cluster_robust_interval(0.0, *clustered_parts(p, rows, labels, clusters)).se
                   for p in (parts, rates_only))
    return float(full / fixed) if fixed > 0 else float("nan")


def decisions_of(score, threshold: float, decision=None) -> np.ndarray:
    """Each row's decision: 1[score >= threshold], or a decision candidate's probability of a positive one."""
    if decision is not None:
        return np.asarray(decision, dtype=float)
    return (np.asarray(score, dtype=float) >= threshold).astype(float)


def disagreeing_clusters(differing, clusters=None) -> int:
    """How many clusters hold a row on which the two candidates decide differently (``differing``: per row)."""
    differing = np.asarray(differing, dtype=bool)
    if clusters is None:
        return int(np.count_nonzero(differing))
    return int(pd.Series(np.asarray(clusters, dtype=object)[differing]).nunique(dropna=False))


def paired_summary(cost_a: float, parts_a, cost_b: float, parts_b, rows: pd.DataFrame, labels, clusters=None,
                   confidence: float = 0.95, differing=None,
                   min_disagreeing: int = MIN_DISAGREEING, binomial=None) -> PairedDifference:
    """The `PairedDifference` of two candidates from their costs and `candidate_parts` on the same rows
    (`clustered_interval`). ``differing`` (per row:
    the candidates' decisions differ) counts the clusters the difference rests on; with fewer than
    ``min_disagreeing`` the difference is not estimable (SE, CI and p NaN; ``disagreeing`` says how many).
    ``binomial``: (low, high, p) of `paired_binomial.paired_binomial_interval`, which then replace the t
    interval's (the SE and df stay the variance's)."""
    g = len(rows) if clusters is None else int(pd.Series(np.asarray(clusters, dtype=object)).nunique(dropna=False))
    k = -1 if differing is None else disagreeing_clusters(differing, clusters)
    if 0 <= k < min_disagreeing:
        return replace(summarize(cost_a - cost_b, np.nan, cost_a, cost_b, g, len(rows), confidence, df=np.nan),
                       disagreeing=k)
    ci = clustered_interval(cost_a - cost_b, np.asarray(parts_a) - np.asarray(parts_b), rows, labels, clusters, confidence)
    out = replace(summarize(cost_a - cost_b, ci.se ** 2, cost_a, cost_b, g, len(rows), confidence, df=ci.df),
                  disagreeing=k)
    if binomial is not None:
        out = replace(out, ci_low=binomial[0], ci_high=binomial[1], p_value=binomial[2])
    return out


def summarize(estimate: float, variance: float, cost_a: float, cost_b: float, n_clusters: int, n_rows: int,
              confidence: float = 0.95, df: float = float("inf")) -> PairedDifference:
    """SE, t interval with ``df`` degrees of freedom (normal where infinite; NaN: too few clusters, no interval)
    and two-sided p of ``estimate`` with ``variance``."""
    se = float(np.sqrt(variance)) if np.isfinite(variance) and not np.isnan(df) else float("nan")
    crit = float(critical_value(confidence, np.inf if np.isnan(df) else df))
    if se > 0:
        p = float(2 * upper_tail(abs(estimate) / se, df))
    else:
        p = float("nan") if not np.isfinite(se) else (1.0 if estimate == 0 else 0.0)
    return PairedDifference(float(estimate), se, float(estimate - crit * se), float(estimate + crit * se), p,
                            float(cost_a), float(cost_b), int(n_clusters), int(n_rows), float(df))


def every_candidates_parts(metric: FairQuadraticMetric, rows: pd.DataFrame, scores: dict, labels, *,
                           thresholds: dict | None = None, selection_rate: float | None = None,
                           n_clusters: int | None = None, decisions: dict | None = None) -> dict:
    """{name: `candidate_parts`} of the score candidates (their ``thresholds``, else the ``selection_rate``'s) and of
    the decision candidates, on the same held-out ``rows``."""
    thresholds = thresholds or {}
    parts = {name: candidate_parts(metric, rows, s, labels, threshold=thresholds.get(name),
                                   selection_rate=selection_rate, n_clusters=n_clusters)
             for name, s in scores.items()}
    parts.update({name: candidate_parts(metric, rows, None, labels, decision=d, n_clusters=n_clusters)
                  for name, d in (decisions or {}).items()})
    return parts


# The paired-difference columns every ranking carries (the winner's row: 0 and NaN; NaN without held-out rows).
DIFF_COLUMNS = ["diff_vs_winner", "diff_se", "diff_ci_low", "diff_ci_high", "diff_p", "diff_df", "diff_disagreeing"]


def differences_vs_winner(metric: FairQuadraticMetric, rows: pd.DataFrame, scores: dict, labels, winner, *,
                          thresholds: dict | None = None, selection_rate: float | None = None, clusters=None,
                          confidence: float = 0.95, decisions: dict | None = None,
                          min_disagreeing: int = MIN_DISAGREEING) -> pd.DataFrame:
    """One row per candidate of ``scores`` (name -> score array aligned with ``rows``) and of ``decisions``
    (name -> probability of a positive decision per row: decision candidates, see the module doc): the paired difference
    cost(candidate) - cost(winner) with SE, CI and p (the winner's own row: difference 0, the rest NaN), the
    candidate's cost recomputed from the rows (``paired_cost``) and its own cluster-robust SE
    (``cost_se_clustered``), ``diff_df`` the t reference's df; n_clusters and n_rows are in ``attrs``."""
    thresholds, decisions = thresholds or {}, decisions or {}
    if winner not in scores and winner not in decisions:
        raise ValueError(f"no held-out scores for the winner {winner!r}")
    n_clusters = None if clusters is None else int(pd.Series(np.asarray(clusters, dtype=object)).nunique(dropna=False))
    z = norm.ppf(0.5 + confidence / 2)
    parts = every_candidates_parts(metric, rows, scores, labels, thresholds=thresholds, selection_rate=selection_rate,
                                   n_clusters=n_clusters, decisions=decisions)
    decided = {name: decisions_of(scores.get(name), threshold, decisions.get(name))
               for name, (_, _, threshold) in parts.items()}
    cost_w, parts_w, _ = parts[winner]
    out, g = [], len(rows) if n_clusters is None else n_clusters
    for name, (cost, mine, _) in parts.items():
        own = clustered_interval(cost, mine, rows, labels, clusters, confidence)
        row = {"candidate": name, "paired_cost": cost, "cost_se_clustered": own.se}
        if name == winner:
            row.update(diff_vs_winner=0.0, diff_se=np.nan, diff_ci_low=np.nan, diff_ci_high=np.nan, diff_p=np.nan,
                       diff_df=np.nan, diff_disagreeing=np.nan)
        else:
            binomial = paired_binomial_interval(metric, rows, group_codes(rows["group"], labels), decided[name],
                                                decided[winner], clusters, confidence,
                                                scale=threshold_scale(mine - parts_w, rows, labels, clusters))
            d = paired_summary(cost, mine, cost_w, parts_w, rows, labels, clusters, confidence,
                               differing=decided[name] != decided[winner], min_disagreeing=min_disagreeing,
                               binomial=binomial)
            row.update(diff_vs_winner=d.estimate, diff_se=d.se, diff_ci_low=d.ci_low, diff_ci_high=d.ci_high, diff_p=d.p_value,
                       diff_df=d.df, diff_disagreeing=d.disagreeing)
        out.append(row)
    frame = pd.DataFrame(out).set_index("candidate")
    frame.attrs.update(n_clusters=int(g), n_rows=len(rows), winner=winner, z=float(z))
    return frame
