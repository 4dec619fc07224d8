"""Rank candidate models by an elicited fair metric, with delta-method standard errors (per candidate) and
paired, cluster-robust differences to the winner (paired.py) when the held-out rows and scores are given."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric, group_pairs
from fair_pipeline.selection.elicitation.paired import DIFF_COLUMNS, MIN_DISAGREEING, differences_vs_winner


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
    held_out: pd.DataFrame | None = None,
    scores: Mapping[str, Sequence[float]] | None = None,
    selection_rate: float | None = None,
    cluster_col: str | None = "item_id",
    threshold_col: str = "threshold",
    decisions: Mapping[str, Sequence[float]] | None = None,
    min_disagreeing: int = MIN_DISAGREEING,
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

    These per-candidate SEs are marginal: they ignore that all candidates are scored on the same rows and that
    rows repeat (an item shown many times). For comparisons, pass the held-out rows (``held_out``: group,
    n_pos, n_neg and the cluster column ``cluster_col``, e.g. item_id; None = one cluster per row) and every
    estimable candidate's score on them (``scores``: candidate -> array aligned with the rows); each candidate
    then gets the paired difference to the winner (rank 1), clustered: ``diff_vs_winner`` = cost - winner's
    cost, ``diff_se``, ``diff_ci_low``, ``diff_ci_high``, ``diff_p`` (two-sided, H0: equal cost), ``diff_df`` (the
    degrees of freedom of the CI's and p's Student t; the winner's row: 0 and NaN), ``diff_disagreeing`` (the
    clusters on which the candidate and the winner decide differently; below ``min_disagreeing`` the
    difference has no SE, CI or p: not estimable), and ``cost_se_clustered`` (its own cost's cluster-robust SE). Thresholds are the
    candidates' ``threshold_col`` values (or the ``selection_rate`` quantiles when that column is absent);
    with ``selection_rate`` their estimation enters the SEs. ``decisions`` (candidate -> probability of a
    positive decision per row) holds the candidates that decide by themselves (fitted post-processors): their
    rates are expected rates and their rule is fixed (paired.py). Without rows the difference is the cost
    difference and the rest NaN. ``attrs`` holds n_clusters and n_rows of the paired comparison.
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
    table = table.reset_index(drop=True)
    return _add_paired_differences(table, candidates, metric, labels, candidate_col, held_out, scores, selection_rate,
                                   cluster_col, threshold_col, confidence, decisions or {}, min_disagreeing)


def _add_paired_differences(table, candidates, metric, labels, candidate_col, held_out, scores, selection_rate,
                            cluster_col, threshold_col, confidence, decisions, min_disagreeing) -> pd.DataFrame:
    estimable = table[table["estimable"].astype(bool)]
    table = table.assign(**{c: np.nan for c in DIFF_COLUMNS}, cost_se_clustered=np.nan)
    if estimable.empty:
        return table
    winner = estimable[candidate_col].iloc[0]
    table["diff_vs_winner"] = table["cost"] - estimable["cost"].iloc[0]
    if held_out is None or (scores is None and not decisions):
        return table
    scores = scores or {}
    missing = [c for c in estimable[candidate_col] if c not in scores and c not in decisions]
    if missing:
        raise ValueError(f"no held-out scores for estimable candidates {missing[:5]}")
    need = ["group", "n_pos", "n_neg"] + ([cluster_col] if cluster_col else [])
    absent = [c for c in need if c not in held_out.columns]
    if absent:
        raise ValueError(f"held_out lacks columns {absent}; it has {list(held_out.columns)}")
    thresholds = None
    if threshold_col in candidates.columns:
        thresholds = candidates.groupby(candidate_col, sort=False)[threshold_col].first().to_dict()
    elif selection_rate is None:
        raise ValueError(f"paired differences need the thresholds (column {threshold_col!r}) or the selection_rate")
    names = list(estimable[candidate_col])
    diffs = differences_vs_winner(metric, held_out, {c: scores[c] for c in names if c in scores}, labels, winner,
                                  thresholds=thresholds, selection_rate=selection_rate,
                                  clusters=held_out[cluster_col].to_numpy() if cluster_col else None,
                                  confidence=confidence,
                                  decisions={c: decisions[c] for c in names if c not in scores},
                                  min_disagreeing=min_disagreeing)
    diffs = diffs.loc[names]  # the estimable order (score candidates first in `diffs`)
    stored = estimable.set_index(candidate_col)["cost"]
    off = (diffs["paired_cost"] - stored).abs() > 1e-9 * np.maximum(1.0, stored.abs())
    if off.any():
        name = off[off].index[0]
        raise ValueError(f"the held-out rows and scores of candidate {name!r} give cost {diffs.at[name, 'paired_cost']!r}, "
                         f"not its rates' cost {stored[name]!r}: scores, thresholds or rows do not match the rates")
    for c in [*DIFF_COLUMNS, "cost_se_clustered"]:
        table[c] = table[candidate_col].map(diffs[c]).astype(float)
    table.attrs.update(diffs.attrs)
    return table


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
