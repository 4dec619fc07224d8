"""Rank candidate models by an elicited fair metric, with delta-method standard errors."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric, group_pairs


def rank_candidates(
    candidates: pd.DataFrame,
    metric: FairQuadraticMetric,
    *,
    candidate_col: str = "candidate",
    group_col: str = "group",
    rate_cols: Sequence[str] = ("tpr", "tnr"),
    count_cols: Sequence[str] | None = ("n_pos", "n_neg"),
    groups: Sequence | None = None,
    min_count: int = 20,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Cost of every candidate under ``metric`` (lower is better), ranked.

    ``candidates`` has one row per (candidate, group) with the group's rates in ``rate_cols``
    (k = 2: TPR, TNR; column i is r_i^g = P(h = i | Y = i, G = g)) and, optionally, the number of
    examples of each class in that group in ``count_cols`` (e.g. n_pos, n_neg).  ``groups`` gives the
    group labels in the metric's group order (default: sorted labels).  Other columns that are
    constant per candidate (e.g. the penalty or alpha of the grid) are carried through.

    With counts, each rate is treated as a binomial proportion and the cost's standard error comes
    from the delta method (independent groups and classes); a candidate with a group-class count
    below ``min_count`` is marked not estimable (cost NaN, ranked last) with the reason.  Without
    counts the standard error is NaN.  Returns one row per candidate with cost, cost_se, CI bounds,
    the error and violation parts of the cost, estimable, reason and rank (1 = best).
    """
    rate_cols, k, m = list(rate_cols), metric.n_classes, metric.n_groups
    if len(rate_cols) != k:
        raise ValueError(f"metric has {k} classes but rate_cols has {len(rate_cols)}: {rate_cols}")
    count_cols = None if count_cols is None else list(count_cols)
    if count_cols is not None and not set(count_cols) <= set(candidates.columns):
        count_cols = None if count_cols == ["n_pos", "n_neg"] else count_cols  # default is optional
    needed = [candidate_col, group_col, *rate_cols, *(count_cols or [])]
    missing = [c for c in needed if c not in candidates.columns]
    if missing:
        raise ValueError(f"candidates table lacks columns {missing}; it has {list(candidates.columns)}")
    labels = sorted(candidates[group_col].dropna().unique().tolist()) if groups is None else list(groups)
    if len(labels) != m:
        raise ValueError(f"metric has {m} groups but the candidates table has groups {labels}")
    index = {g: i for i, g in enumerate(labels)}
    unknown = set(candidates[group_col].unique()) - set(labels)
    if unknown:
        raise ValueError(f"candidates table has groups {sorted(map(str, unknown))} not in {labels}")

    passthrough = [c for c in candidates.columns if c not in needed]
    z = norm.ppf(0.5 + confidence / 2)
    rows = []
    for cand, part in candidates.groupby(candidate_col, sort=False):
        dup = part[group_col][part[group_col].duplicated()].tolist()
        if dup:
            raise ValueError(f"candidate {cand!r} has several rows for group(s) {dup}")
        absent = [g for g in labels if g not in set(part[group_col])]
        rates = np.full((m, k), np.nan)
        counts = np.full((m, k), np.nan)
        for row in part.itertuples(index=False):
            g = index[getattr(row, group_col)]
            rates[g] = [getattr(row, c) for c in rate_cols]
            if count_cols:
                counts[g] = [getattr(row, c) for c in count_cols]
        reason = _not_estimable_reason(rates, counts, labels, rate_cols, count_cols, absent, min_count)
        out = {candidate_col: cand}
        out.update({c: part[c].iloc[0] for c in passthrough})
        if reason is None:
            _check_unit(rates, cand, labels, rate_cols)
            cost, error, violation = _cost_parts(metric, rates)
            se = _delta_se(metric, rates, counts) if count_cols else np.nan
            out.update(cost=cost, cost_se=se, ci_low=cost - z * se, ci_high=cost + z * se,
                       error_part=error, violation_part=violation, estimable=True, reason="")
        else:
            out.update(cost=np.nan, cost_se=np.nan, ci_low=np.nan, ci_high=np.nan,
                       error_part=np.nan, violation_part=np.nan, estimable=False, reason=reason)
        if count_cols:
            out["min_group_count"] = np.nanmin(counts) if np.isfinite(counts).any() else np.nan
        rows.append(out)
    table = pd.DataFrame(rows).sort_values(["estimable", "cost"], ascending=[False, True], kind="stable")
    table["rank"] = np.where(table["estimable"], np.arange(1, len(table) + 1), np.nan)
    return table.reset_index(drop=True)


def _not_estimable_reason(rates, counts, labels, rate_cols, count_cols, absent, min_count) -> str | None:
    if absent:
        return f"no rates for group(s) {absent}"
    for g, i in zip(*np.nonzero(~np.isfinite(rates))):
        return f"group {labels[g]!r} has no {rate_cols[i]}"
    if count_cols:
        for g, i in zip(*np.nonzero(~(counts >= min_count))):
            return f"group {labels[g]!r} has {count_cols[i]}={counts[g, i]:g} < min_count={min_count}"
    return None


def _check_unit(rates, cand, labels, rate_cols) -> None:
    bad = (rates < 0) | (rates > 1)
    if bad.any():
        g, i = np.argwhere(bad)[0]
        raise ValueError(f"candidate {cand!r}, group {labels[g]!r}: {rate_cols[i]}={float(rates[g, i])!r} is outside [0, 1]")


def _cost_parts(metric: FairQuadraticMetric, rates: np.ndarray) -> tuple[float, float, float]:
    overall = (metric.group_weights * rates).sum(axis=0)
    error = float(metric.a @ (1.0 - overall))
    violation = 0.5 * sum(float((rates[u] - rates[v]) @ metric.B[u, v] @ (rates[u] - rates[v]))
                          for u, v in group_pairs(metric.n_groups))
    return metric(rates), error, violation


def _delta_se(metric: FairQuadraticMetric, rates: np.ndarray, counts: np.ndarray) -> float:
    var = rates * (1.0 - rates) / counts
    return float(np.sqrt((metric.gradient(rates) ** 2 * var).sum()))
