"""Each model-selection candidate's exposure parity on the logged requests, as columns of the ranking (glue).

Every candidate (retrained ranker x EO relaxation, pairwise-fair ranker, post-processors) re-ranks the shown items
of a bounded sample of the evaluation window's logged production requests (`audit.exposure_offpolicy`); its
exposure per unit of merit of each group over the reference group's (the largest) becomes the ranking's columns
`exposure_ratio[g]`, `exposure_ratio_ci_low[g]`, `exposure_ratio_ci_high[g]`, and `exposure_ratio_worst` (with
its CI and `exposure_ratio_worst_group`: the group whose ratio is farthest from 1 on the log scale), so an elicited
metric or a reader of `marts.model_ranking` can weigh exposure. A post-processor decides rather than ranks: its
ranking orders items by the probability of a positive decision, ties by the base ranker's score.

The elicited metric weighs it through its ``exposure_weight`` mu (`weigh_exposure`): every candidate's
`exposure_disparity` D = 1/2 Σ_{u<v} (l_u - l_v)², l_g the log exposure ratio of group g to the reference (0 for the
reference), is added to the cost as mu · D (0 when every group's exposure is proportional to its merit), and the
ranking is re-ordered by the total; `selected_by` says which metric ranked. The paired differences to the winner
are then those of the totals (`paired_exposure`: the rates' held-out rows and the logs joined by item).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from fair_pipeline.audit import exposure_offpolicy as offpolicy
from fair_pipeline.audit.sql import AuditDataError
from fair_pipeline.selection.elicitation.paired import DIFF_COLUMNS, every_candidates_parts
from fair_pipeline.selection.elicitation.paired_exposure import (disparity_totals, exposure_weighted_cost,
                                                                exposure_weighted_difference)

EXPOSURE_NOTE = ("exposure_ratio[g]: exposure per unit of merit of group g over the reference group's when the "
                 "candidate re-ranks the shown items of the logged production requests (off-policy, from the logs; "
                 "1 = proportional), 95% CI two-way clustered by item and request; exposure_ratio_worst: the group "
                 "farthest from 1.")


def _scorer(candidate):
    if getattr(candidate, "decides", False):  # decisions first, the base ranker's score among equal decisions
        return lambda rows: (np.asarray(candidate.decisions(rows), dtype=float), candidate.base.score(rows))
    return lambda rows: np.asarray(candidate.score(rows), dtype=float)


def candidate_exposure(marts, window, curve: pd.DataFrame, candidates, max_requests: int = offpolicy.DEFAULT_MAX_REQUESTS,
                       keep_totals: bool = True) -> tuple[pd.DataFrame, str, dict]:
    """(candidate x group rows: candidate, group, reference, ratio, ci_low, ci_high, log_ratio, se_log, verdict,
    note; a note naming what could not be computed; {candidate: `paired_exposure.DisparityTotals`}, the
    influence totals of its exposure disparity per item and request) for the candidates that have a fitted model.
    Without ``keep_totals`` the disparities are None: the totals, one per item x request cell of the sampled logs
    and candidate, are only read by the totals' paired differences (a metric weighing exposure)."""
    usable = [c for c in candidates if getattr(c, "transform", True) is not None and getattr(c, "model", True) is not None]
    if not usable:
        return pd.DataFrame(), "", {}
    features = sorted({f for c in usable for f in (c.ranker.features if hasattr(c, "ranker") else c.base.features)})
    try:
        rows, _ = offpolicy.sampled_requests(marts, window, features, max_requests)
    except AuditDataError as error:
        return pd.DataFrame(), f"exposure of the candidates not computed: {error}", {}
    if rows.empty:
        return (pd.DataFrame(), f"exposure of the candidates not computed: no logged production request in "
                f"{window.label}", {})
    found = offpolicy.offpolicy_exposure(rows, {c.name: _scorer(c) for c in usable}, curve, keep_totals=keep_totals)
    frames, notes, disparities = [], [], {}
    for name, result in found.items():
        if isinstance(result, str):
            notes.append(result)
            continue
        disparities[name] = disparity_totals(result)
        frames.append(result.pairs[["group", "reference", "ratio", "ci_low", "ci_high", "log_ratio", "se_log",
                                    "verdict", "note"]]
                      .assign(candidate=name))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), "; ".join(notes), disparities


def with_exposure(ranking: pd.DataFrame, exposure: pd.DataFrame) -> pd.DataFrame:
    """The ranking with each candidate's exposure columns (NaN for a candidate without them)."""
    if exposure.empty:
        return ranking.assign(exposure_ratio_worst=np.nan)
    wide = exposure.pivot(index="candidate", columns="group", values=["ratio", "ci_low", "ci_high"])
    wide.columns = [f"exposure_{'ratio' if stat == 'ratio' else 'ratio_' + stat}[{group}]" for stat, group in wide.columns]
    scale = np.abs(np.log(exposure["ratio"].where(exposure["ratio"] > 0)))
    worst = exposure.assign(distance=scale.fillna(-1.0)).sort_values(["candidate", "distance"], ascending=[True, False])
    worst = worst.drop_duplicates("candidate").set_index("candidate")
    wide["exposure_ratio_worst"] = worst["ratio"]
    wide["exposure_ratio_worst_ci_low"] = worst["ci_low"]
    wide["exposure_ratio_worst_ci_high"] = worst["ci_high"]
    wide["exposure_ratio_worst_group"] = worst["group"].astype(str)
    wide["exposure_reference"] = worst["reference"].astype(str)
    return ranking.merge(wide, left_on="model", right_index=True, how="left")


RATES_ONLY = "elicited metric on the group-wise rates (exposure weight 0: exposure parity reported, not weighed)"


def exposure_disparity(log_ratios, se_logs) -> tuple[float, float]:
    """(D, SE of D) of one candidate: D = 1/2 Σ_{u<v} (l_u - l_v)² over its groups, the reference's l = 0 included;
    the SE by the delta method with the worst case over the unknown correlations of the l (the pairs share the
    reference), (Σ_g |dD/dl_g| se_g)²; NaN when a group's ratio is missing."""
    logs = np.append(np.asarray(log_ratios, dtype=float), 0.0)
    se = np.asarray(se_logs, dtype=float)
    if logs.size < 2 or not (np.all(np.isfinite(logs)) and np.all(np.isfinite(se))):
        return np.nan, np.nan
    value = 0.25 * float(((logs[:, None] - logs[None, :]) ** 2).sum())  # each pair appears twice
    gradient = logs.size * logs[:-1] - logs.sum()  # dD/dl_g = Σ_v (l_g - l_v), the reference's l held at 0
    return value, float(np.abs(gradient) @ se)


@dataclass(frozen=True)
class HeldOut:
    """The held-out rows of the rates' paired differences (one cluster per ``item_id``), each candidate's
    `paired.candidate_parts` on them, and each candidate's `paired_exposure.DisparityTotals` on the logs."""

    rows: pd.DataFrame
    labels: list
    parts: dict
    disparities: dict


def held_out_parts(metric, items: pd.DataFrame, labels, names, scores: dict, decisions: dict | None,
                   rates: pd.DataFrame, selection_rate: float, disparities: dict) -> HeldOut:
    """`HeldOut` of the candidates ``names`` (the estimable ones): their thresholds from ``rates`` (as
    `rank_candidates` takes them)."""
    thresholds = rates.groupby("candidate", sort=False)["threshold"].first().to_dict()
    decisions = decisions or {}
    parts = every_candidates_parts(metric, items, {n: scores[n] for n in names if n in scores}, labels,
                                   thresholds=thresholds, selection_rate=selection_rate,
                                   n_clusters=int(items["item_id"].nunique()),
                                   decisions={n: decisions[n] for n in names if n not in scores and n in decisions})
    return HeldOut(items, list(labels), parts, disparities)


def _own_totals(out: pd.DataFrame, held: HeldOut, weight: float, confidence: float) -> pd.DataFrame:
    """Each estimable candidate's own CI of cost + weight · D from its rates' and exposure's influence joined by item
    (`paired_exposure.exposure_weighted_cost`: the parts share items, so their variances do not simply add)."""
    if "cost_se_clustered" not in out.columns:
        out["cost_se_clustered"] = np.nan
    for i in out.index[out["estimable"].astype(bool)]:
        name = out.at[i, "model"]
        if name not in held.parts or held.disparities.get(name) is None:
            continue
        cost, parts, _ = held.parts[name]
        own = exposure_weighted_cost(cost, parts, held.disparities[name], held.rows, held.labels, weight,
                                     clusters=held.rows["item_id"].to_numpy(), confidence=confidence)
        below, above = own.estimate - own.ci_low, own.ci_high - own.estimate  # not symmetric: D's root scale
        out.loc[i, ["cost_se", "ci_low", "ci_high", "cost_se_clustered"]] = [
            own.se, out.at[i, "cost"] - below, out.at[i, "cost"] + above, own.se]
    return out


def _paired_totals(out: pd.DataFrame, held: HeldOut, weight: float, confidence: float) -> pd.DataFrame:
    """Each estimable candidate's paired difference of cost + weight · D to the winner (`paired_exposure`)."""
    estimable = out[out["estimable"].astype(bool)]
    if estimable.empty:
        return out
    winner = estimable["model"].iloc[0]
    if winner not in held.parts or held.disparities.get(winner) is None:
        return out
    cost_w, parts_w, _ = held.parts[winner]
    for i in estimable.index[1:]:
        name = out.at[i, "model"]
        if name not in held.parts or held.disparities.get(name) is None:
            continue
        cost, parts, _ = held.parts[name]
        d = exposure_weighted_difference(cost, parts, held.disparities[name], cost_w, parts_w, held.disparities[winner],
                                         held.rows, held.labels, weight, clusters=held.rows["item_id"].to_numpy(),
                                         confidence=confidence)
        out.loc[i, ["diff_vs_winner", "diff_se", "diff_ci_low", "diff_ci_high", "diff_p", "diff_df"]] = [
            d.estimate, d.se, d.ci_low, d.ci_high, d.p_value, d.df]
    return out


def weigh_exposure(ranking: pd.DataFrame, exposure: pd.DataFrame, weight: float,
                   confidence: float = 0.95, held_out: HeldOut | None = None) -> pd.DataFrame:
    """The ranking with each candidate's `exposure_disparity` (and its SE) and, when ``weight`` > 0, its cost, CI
    and rank taken over the total cost(rates) + weight · D; a candidate without exposure parity on the logs is
    then not estimable. With ``held_out``, each candidate's own CI (``cost_se``, ``ci_low``, ``ci_high``, also
    ``cost_se_clustered``) and its paired difference of the totals to the winner come from the rates' and the
    exposure's influence totals joined by item (`paired_exposure`: the exposure's two-way by request, the curve's
    delta-method term, Student t; the own CI on D's root scale, not symmetric); without it, or for a candidate lacking either part, the own CI adds the two
    parts' variances as if independent (normal) and only ``diff_vs_winner`` (the totals' difference) is filled."""
    found = {}
    if not exposure.empty:
        for name, part in exposure.groupby("candidate", sort=False):
            found[name] = exposure_disparity(part["log_ratio"], part["se_log"])
    disparity = ranking["model"].map(lambda m: found.get(m, (np.nan, np.nan))[0]).astype(float)
    disparity_se = ranking["model"].map(lambda m: found.get(m, (np.nan, np.nan))[1]).astype(float)
    out = ranking.assign(exposure_disparity=disparity, exposure_disparity_se=disparity_se, exposure_weight=weight,
                         selected_by=RATES_ONLY)
    if not weight > 0:
        return out
    out["selected_by"] = (f"elicited metric on the group-wise rates + {weight:g} x exposure disparity on the logs "
                          "(1/2 Σ over group pairs of the squared difference of log exposure ratios)")
    lacking = out["estimable"].astype(bool) & out["exposure_disparity"].isna()
    out.loc[lacking, "reason"] = "no exposure parity on the logs for this candidate (the metric weighs exposure)"
    out.loc[lacking, "estimable"] = False
    z = norm.ppf(0.5 + confidence / 2)
    out["cost"] = np.where(out["estimable"].astype(bool), out["cost"] + weight * out["exposure_disparity"], np.nan)
    out["cost_se"] = np.sqrt(out["cost_se"] ** 2 + (weight * out["exposure_disparity_se"]) ** 2)
    out["ci_low"], out["ci_high"] = out["cost"] - z * out["cost_se"], out["cost"] + z * out["cost_se"]
    out = out.sort_values(["estimable", "cost"], ascending=[False, True], kind="stable").reset_index(drop=True)
    estimable = out["estimable"].astype(bool)
    out["rank"] = np.where(estimable, np.cumsum(estimable), np.nan)
    best = out.loc[estimable, "cost"].iloc[0] if estimable.any() else np.nan
    out["diff_vs_winner"] = out["cost"] - best
    for column in (*DIFF_COLUMNS[1:], "cost_se_clustered"):
        if column in out.columns:
            out[column] = np.nan
    if held_out is None:
        return out
    return _paired_totals(_own_totals(out, held_out, weight, confidence), held_out, weight, confidence)
