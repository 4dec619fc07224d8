"""The reported df of `exposure_parity` rebuilt from the rows, independently of the estimator's cells, and the
rules it is compared with: the effective number of clusters with the lone clicks' fourth-power mass taken out,
(Σ U²)² / (Σ U⁴ - Σ_c λ_c⁴ F_c), F_c = Σ over group c's clicks of the click's share of the group's merit
Σ click / w, to the fourth power, bounded by the smallest group's clusters - 1 (reported); the same without the
bound; and (Σ U²)² / Σ U⁴ with the lone clicks left in.

Why the lone clicks come out: clicks are independent within a cluster, so the part of Σ U⁴ that single clicks
carry is click noise (many units), not a dominant cluster. Where a small group's variance is mostly its ~30 clicks
spread over ~10 items (the 500-item pool's 4% group: SE / SD 1.01, normal 0.94) the whole-Σ U⁴ df (~5)
over-covers (0.975). Unbounded, the rule also lifts the df of a few replications to the cap (a small group whose
Σ U⁴ is mostly lone clicks) where the t is needed because the SE is low; the bound stops that (docs/exposure.md).
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def lone_click_fourth(d: pd.DataFrame, w: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """F per group (``groups``' order): Σ over its clicks of (1 / w) / Σ_group(click / w), to the fourth power."""
    g = pd.Index(groups).get_indexer(d["group"])
    inverse = 1.0 / w[d["position"].to_numpy() - 1]
    click = d["click"].to_numpy(dtype=np.float64)
    merit = np.bincount(g, weights=click * inverse, minlength=len(groups))
    share = click * inverse / np.where(merit[g] > 0, merit[g], 1.0)
    return np.bincount(g, weights=share**4, minlength=len(groups))


def bounded_df(reported: float, lone_out: float, smallest: float) -> float:
    """The lone-click df allowed above the reported one only up to the smallest group's clusters - 1
    (``smallest``): a ratio with a 4-item group cannot rest on 20 effective clusters of the other group."""
    return min(lone_out, max(reported, smallest))


def contrast_dfs(totals: list[np.ndarray], caps: list[float], lam: np.ndarray, lone: np.ndarray) -> tuple[float, float]:
    """(reported df, df with the lone clicks out) of the contrast λ: per clustering dimension (clusters × groups
    totals, two-way's intersection left out as the estimator leaves it) (Σ U²)² / Σ U⁴, resp. / (Σ U⁴ - Σ λ⁴ F),
    each within [1, cap] (cap: the clusters of the contrast's groups - 1), the smaller over the dimensions."""
    lone_mass = float(np.sum(lam**4 * lone))
    out = []
    for removed in (0.0, lone_mass):
        dfs = []
        for t, cap in zip(totals, caps):
            u = t @ lam
            s2, s4 = float(u @ u), float(np.sum(u**4)) - removed
            dfs.append(max(min(s2 * s2 / s4 if s4 > 0 else cap, cap), 1.0))
        out.append(min(dfs))
    return out[0], out[1]
