"""Paired differences to the winner when the elicited metric weighs exposure: total = cost(rates) + mu · D.

D = 1/2 Σ_{u<v} (L_u - L_v)² is a candidate's exposure disparity on the logs (L_g its log exposure per unit of merit
of group g when it re-ranks the logged requests, `audit.exposure_offpolicy`). Its delta-method influence is
Σ_g c_g (L̂_g - L_g) with c_g = dD/dL_g = Σ_v (L_g - L_v) = K l_g - Σ_v l_v (l: the log ratios to the reference;
the c sum to 0, so the reference's scale cancels). The audit's per-cluster influence totals of every L_g
(`exposure_parity(keep_totals=True)`: CR2-adjusted, with the exposure each item displaces) therefore give D's
per-cluster totals T·c, and the difference of two candidates re-ranking the same logged requests has the
difference of their totals, cluster by cluster.

The rates' part of the paired difference (`paired`) has per-item CR2 totals on the held-out rows. Held-out rows and
logged impressions are different rows, but the same items: an item whose labels make a candidate's rates look good
can be the item whose clicks make its exposure look fair. Joined on the item, the total's influence per item is

    U_i = R_i(A) - R_i(B) + mu (T_i(A) - T_i(B)) · c        (0 for a side where the item does not appear)

and Var = Σ_i U_i² (items), plus the exposure part's two-way term mu² (V_request - V_item×request) (Cameron,
Gelbach & Miller; the larger one-way variance when the sum is not positive), plus the rates' exchangeable-items
excess where `paired.clustered_interval` uses it, plus the examination curve's delta-method term of
mu (dD_A/d log w - dD_B/d log w) (common to both candidates: paired, and independent of the clicks and labels).
Student t with the combined totals' effective number of items ((Σ U²)² / Σ U⁴, at most items - 1; the smaller
with the requests' when two-way), Welch-combined with the other parts' df. With mu = 0 it is the rates-only paired
difference (`paired.paired_summary`). A candidate's own total (`exposure_weighted_cost`) is the same with nothing
subtracted: U_i = R_i(A) + mu T_i(A) · c; its interval is inverted on D's root scale (the delta method's SE of a
square grows with D̂, so its symmetric interval over-covers; paired differences do not have this, both candidates'
D̂ moving together).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from fair_pipeline.audit.stats.exposure import ExposureParity
from fair_pipeline.audit.stats.exposure_examination import Examination
from fair_pipeline.audit.stats.small_sample import adjusted_totals, critical_value, satterthwaite_df, welch_df
from fair_pipeline.selection.elicitation.paired import (PairedDifference, clustered_interval, clustered_parts,
                                                       paired_summary, summarize)


@dataclass(frozen=True)
class DisparityTotals:
    """A candidate's exposure disparity D and its influence totals per cluster of each clustering dimension of the
    audit (the first: items; then requests and items × requests when two-way), with dD / d log w and the curve."""

    value: float
    totals: dict
    examination_gradient: np.ndarray
    examination: Examination


def disparity_totals(result: ExposureParity) -> DisparityTotals | None:
    """`DisparityTotals` of an exposure audit kept with its cluster totals; None when a group is not estimable
    (D then has no value) or the totals were not kept."""
    groups = result.per_group
    if not result.cluster_totals or not groups["estimable"].astype(bool).all():
        return None
    labels = list(groups["group"])
    log_ratio = np.log(groups["exposure_over_merit"].to_numpy(dtype=np.float64))
    l = log_ratio - log_ratio[labels.index(result.reference)]
    value = 0.25 * float(((l[:, None] - l[None, :]) ** 2).sum())
    c = l.size * l - l.sum()
    totals = {name: pd.Series(frame[labels].to_numpy() @ c, index=frame.index)
              for name, frame in result.cluster_totals.items()}
    return DisparityTotals(value, totals, c @ result.examination_gradient, result.examination)


def _cluster_keys(rows: pd.DataFrame, clusters) -> pd.Index:
    if clusters is None:
        return pd.Index(rows.index)
    return pd.Index(pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), use_na_sentinel=False)[1])


def exposure_weighted_cost(cost: float, parts, disparity: DisparityTotals, rows: pd.DataFrame, labels,
                           weight: float, clusters=None, confidence: float = 0.95) -> PairedDifference:
    """One candidate's own total cost + ``weight`` · D with its interval: the same joined influence per item as
    the paired difference (`exposure_weighted_difference`) with nothing subtracted, so the rates' and the
    exposure's parts, which share items, are not added as if independent. ``se`` and ``df`` are the delta
    method's at D̂; the interval is on D's root scale (`_root_scale_interval`), so it is not symmetric."""
    if not weight > 0:
        raise ValueError(f"the exposure weight of a total must be a positive number, got {weight!r}")
    joined = _JoinedParts.of(cost, parts, disparity, 0.0, np.zeros_like(np.asarray(parts, dtype=float)), None, rows,
                             labels, weight, clusters, confidence)
    delta = joined.summary(confidence)
    low, high = _root_scale_interval(joined, cost, weight * disparity.value, delta, confidence)
    return replace(delta, ci_low=low, ci_high=high)


def exposure_weighted_difference(cost_a: float, parts_a, disparity_a: DisparityTotals, cost_b: float, parts_b,
                                 disparity_b: DisparityTotals | None, rows: pd.DataFrame, labels, weight: float,
                                 clusters=None, confidence: float = 0.95) -> PairedDifference:
    """The `PairedDifference` of totals cost + ``weight`` · D of two candidates: costs and `candidate_parts` on the
    same held-out ``rows`` (clustered by ``clusters``, whose values are the audit's first dimension's, the items),
    and `disparity_totals` of their re-rankings of the same logged requests (module doc). ``disparity_b`` None:
    B has no exposure part (D = 0, no totals)."""
    if not weight >= 0:
        raise ValueError(f"the exposure weight must be a non-negative number, got {weight!r}")
    if weight == 0:
        return paired_summary(cost_a, parts_a, cost_b, parts_b, rows, labels, clusters, confidence)
    return _JoinedParts.of(cost_a, parts_a, disparity_a, cost_b, parts_b, disparity_b, rows, labels, weight,
                           clusters, confidence).summary(confidence)


@dataclass(frozen=True)
class _JoinedParts:
    """The pieces of a total's variance, with the exposure part's influence scalable by k (`variance`): per item
    the rates' totals R_i and the exposure's E_i; the exposure part's two-way excess (V_request - V_item×request,
    None one-way); the rates' exchangeable-items excess; the examination curve's term; the dfs."""

    estimate: float
    total_a: float
    total_b: float
    rates: np.ndarray
    exposure: np.ndarray
    two_way: tuple | None
    exchangeable_excess: float
    v_exam: float
    df: float
    rates_df: float
    exam_df: float
    n_rows: int

    @classmethod
    def of(cls, cost_a, parts_a, disparity_a, cost_b, parts_b, disparity_b, rows, labels, weight, clusters,
           confidence) -> "_JoinedParts":
        dims = list(disparity_a.totals)
        if disparity_b is None:
            disparity_b = DisparityTotals(0.0, {name: pd.Series(dtype=np.float64) for name in dims},
                                          np.zeros_like(disparity_a.examination_gradient), disparity_a.examination)
        if dims != list(disparity_b.totals):
            raise ValueError(f"the two candidates' exposure audits are clustered differently: {dims} vs "
                             f"{list(disparity_b.totals)}")
        diff = np.asarray(parts_a, dtype=np.float64) - np.asarray(parts_b, dtype=np.float64)
        totals, shares = clustered_parts(diff, rows, labels, clusters)
        rates = pd.Series(adjusted_totals(totals, shares), index=_cluster_keys(rows, clusters))
        exposure = {name: weight * disparity_a.totals[name].sub(disparity_b.totals[name], fill_value=0.0)
                    for name in dims}
        item = exposure[dims[0]]
        if len(rates) and len(item) and not rates.index.isin(item.index).any():
            raise ValueError(f"no held-out cluster is among the logged {dims[0]} values (held-out e.g. "
                             f"{list(rates.index[:3])}, logged e.g. {list(item.index[:3])}): they must be the same ids")
        keys = rates.index.union(item.index, sort=False)
        r = rates.reindex(keys, fill_value=0.0).to_numpy()
        e = item.reindex(keys, fill_value=0.0).to_numpy()
        joined = r + e
        df = float(satterthwaite_df(joined))
        two_way = None
        if len(dims) == 3:
            two_way = tuple(float(exposure[n].to_numpy() @ exposure[n].to_numpy()) for n in dims[1:])
            df = float(np.fmin(df, satterthwaite_df(exposure[dims[1]].to_numpy())))
        rates_only = clustered_interval(cost_a - cost_b, diff, rows, labels, clusters, confidence)
        excess = max(rates_only.se ** 2 - float(rates.to_numpy() @ rates.to_numpy()), 0.0)
        gradient = weight * (disparity_a.examination_gradient - disparity_b.examination_gradient)
        v_exam = float(disparity_a.examination.variance(gradient)[0])
        exam_df = disparity_a.examination.df if disparity_a.examination.df is not None else df
        total_a, total_b = cost_a + weight * disparity_a.value, cost_b + weight * disparity_b.value
        return cls(total_a - total_b, total_a, total_b, r, e, two_way, excess, v_exam, df, rates_only.df, exam_df,
                   len(rows))

    def variance(self, k: float = 1.0) -> float:
        """Var of the total with the exposure influence scaled by k (1: the delta method at the estimate)."""
        joined = self.rates + k * self.exposure
        v = float(joined @ joined)
        if self.two_way is not None:
            v_request, v_both = (k * k * x for x in self.two_way)
            both = v + v_request - v_both
            v = both if both > 0 else max(v, v_request)
        return v + self.exchangeable_excess + k * k * self.v_exam

    def summary(self, confidence: float) -> PairedDifference:
        parts = np.array([self.variance() - self.exchangeable_excess - self.v_exam, self.exchangeable_excess,
                          self.v_exam])
        df = self.df
        if parts[1:].any():
            df = float(welch_df(parts, [self.df, self.rates_df, self.exam_df]))
        return summarize(self.estimate, float(parts.sum()), self.total_a, self.total_b, len(self.rates),
                         self.n_rows, confidence, df=df)


def _root_scale_interval(joined: _JoinedParts, cost: float, weighted_d: float, delta: PairedDifference,
                         confidence: float) -> tuple[float, float]:
    """Interval of cost + mu D inverted on D's root scale S = sqrt(D): a value T0 is in it when
    |T̂ - T0| <= t · SE(T0), SE(T0) the delta method with D's gradient taken at (Ŝ + S0) / 2 instead of Ŝ,
    S0 = sqrt(max(T0 - cost, 0) / mu) the root the value implies at the estimated cost (mu D̂ - mu D0 =
    mu (Ŝ - S0)(Ŝ + S0) exactly). The delta method's gradient 2Ŝ makes the SE grow with D̂, so draws whose D̂
    lands high get the widest intervals (over-coverage); with the cost's part left out this is exactly the interval
    Ŝ ± t · SE(Ŝ) squared back. D̂ = 0 (no gradient) or no finite SE: the delta method's interval."""
    if not (weighted_d > 0 and np.isfinite(delta.se) and delta.se > 0):
        return delta.ci_low, delta.ci_high
    crit = float(critical_value(confidence, delta.df))
    root = np.sqrt(weighted_d)

    def excess(t0: float) -> float:  # |T̂ - T0| - t · SE(T0): negative inside the interval
        k = 0.5 * (1.0 + np.sqrt(max(t0 - cost, 0.0)) / root)
        return abs(joined.estimate - t0) - crit * np.sqrt(max(joined.variance(k), 0.0))

    widest = crit * np.sqrt(max(joined.variance(0.5), joined.variance(1.0)))  # SE is largest at an end for k <= 1
    low = brentq(excess, joined.estimate - widest - 1e-12 * (1 + abs(joined.estimate)), joined.estimate)
    step = max(delta.ci_high - delta.estimate, 1e-12)
    high = joined.estimate + step
    while excess(high) < 0:
        step *= 2.0
        high = joined.estimate + step
    return float(low), float(brentq(excess, joined.estimate, high))
