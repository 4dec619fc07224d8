"""Degrees of freedom of exposure parity's t ratios: the effective number of clusters of a contrast's totals U,
(Σ U²)² / (Σ U⁴ - Σ_c λ_c⁴ F_c), with the part of Σ U⁴ that single clicks carry taken out.

Why the lone clicks come out: clicks are independent within a cluster, so a click's own share of its group's
merit, to the fourth power (F_c sums it over group c's clicks), is click noise spread over many units, not a
dominant cluster. Left in, a small group whose variance is mostly its few clicks spread over ~10 items gets ~5 df
where its SE is right, and its t interval over-covers. The df may rise above the whole-Σ U⁴ one only up to the
smallest involved group's clusters - 1: a ratio whose small group has 4 items cannot rest on the other group's 20
effective clusters. F comes from the (group, position) cells (impression and click counts), so every engine path
forms the same df from the sums it already has.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.small_sample import satterthwaite_from_sums, welch_df


def lone_click_fourth(clicks: np.ndarray, b: np.ndarray) -> np.ndarray:
    """F per group from the K×J click counts and `influence_coefficients`' b (a click's share of its group's merit
    Σ click / w at its logged slot): Σ over the group's clicks of that share to the fourth power."""
    return (np.asarray(clicks, dtype=np.float64) * np.asarray(b, dtype=np.float64) ** 4).sum(axis=1)


def _clusters_df(s2: float, s4: float, cap: float) -> float:
    """(Σ U²)² / Σ U⁴ within [1, cap]: every clustered CI's effective number of clusters, with ``cap`` + 1 clusters."""
    return float(satterthwaite_from_sums(s2, s4, cap + 1.0))


def effective_df(dims, lam: np.ndarray, var_cluster: float, var_exam: float, exam_df: float | None,
                 lone=None) -> float:
    """Degrees of freedom of λ'·log ratios' t ratio. Per clustering dimension (`ClusterSums`, the two-way
    intersection left out) the effective clusters of the contrast's totals, at most its groups' clusters - 1;
    the smaller over two dimensions (inf without fourth sums: impressions as clusters). ``lone`` (F per group,
    `lone_click_fourth`) is taken out of Σ U⁴, the result bounded by max(whole-Σ U⁴ df, smallest involved group's
    clusters - 1). Then Welch-Satterthwaite with the examination term at its own df (the clicks behind the curve;
    unknown: the clustered part's), so the df never exceeds the two parts' sum."""
    involved = np.flatnonzero(lam)
    removed = 0.0 if lone is None else float(np.sum(np.asarray(lam)[involved] ** 4 * np.asarray(lone)[involved]))
    whole, lone_out, smallest = [], [], []
    for d in dims[:2]:
        if d.fourth is None:
            whole.append(np.inf)
            lone_out.append(np.inf)
            continue
        a, b = (involved[0], involved[0]) if involved.size == 1 else involved[:2]
        s2, s4 = float(lam @ d.cross @ lam), float(d.fourth[a, b])
        counts = np.asarray(d.per_group, dtype=np.float64)[involved]
        cap = float(counts.sum()) - 1.0
        whole.append(_clusters_df(s2, s4, cap))
        lone_out.append(_clusters_df(s2, s4 - removed, cap))
        smallest.append(float(counts.min()) - 1.0)
    df = min(whole)
    if smallest:
        df = min(min(lone_out), max(df, min(smallest)))
    if not var_exam > 0:
        return df
    return float(welch_df([max(var_cluster, 0.0), var_exam], [df, df if exam_df is None else exam_df]))
