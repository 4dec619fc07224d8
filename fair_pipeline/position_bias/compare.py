"""Does an observational position-bias curve agree with a randomized one within their joint CIs?

The two estimates come from disjoint traffic, so on the log scale the difference of the estimates has
variance se_obs² + se_rand² (se of log ŵ = se / ŵ). Per position: z = (log ŵ_obs - log ŵ_rand) / joint se;
a position disagrees when |z| > z_{1-α/2}. With many positions some disagree by chance at level α, so the
summary also applies a Bonferroni correction (the verdict an asset check should warn on).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from fair_pipeline.position_bias.aggregates import PositionBiasInputError, require_columns


def compare_estimates(
    observational: pd.DataFrame, randomized: pd.DataFrame, level: float = 0.95, max_position: int | None = None
) -> tuple[pd.DataFrame, dict]:
    """Per-position agreement table and a summary dict (positions compared, disagreeing ones, verdict).

    Positions where either weight is NaN, or position 1 (both are 1 by definition), are not compared;
    `max_position` limits the comparison (e.g. to the truncation threshold of the observational estimate)."""
    for name, frame in (("observational", observational), ("randomized", randomized)):
        require_columns(frame, ["position", "weight", "se"], f"{name} estimate")
    if not 0 < level < 1:
        raise PositionBiasInputError(f"level={level!r} must be in (0, 1)")
    joined = observational[["position", "weight", "se"]].merge(
        randomized[["position", "weight", "se"]], on="position", suffixes=("_observational", "_randomized")
    )
    if max_position is not None:
        joined = joined[joined["position"] <= max_position]
    w_o, w_r = joined["weight_observational"].to_numpy(float), joined["weight_randomized"].to_numpy(float)
    se_log = np.sqrt((joined["se_observational"] / w_o) ** 2 + (joined["se_randomized"] / w_r) ** 2).to_numpy(float)
    comparable = (joined["position"].to_numpy() > 1) & np.isfinite(w_o) & np.isfinite(w_r) & (se_log > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(comparable, (np.log(w_o) - np.log(w_r)) / se_log, np.nan)
    p_value = np.where(comparable, 2 * stats.norm.sf(np.abs(z)), np.nan)
    table = joined.assign(z=z, p_value=p_value, agrees=np.where(comparable, p_value >= 1 - level, pd.NA))
    n = int(comparable.sum())
    bonferroni = (1 - level) / max(n, 1)
    disagree = table.loc[comparable & (p_value < 1 - level), "position"].astype(int).tolist()
    disagree_bonferroni = table.loc[comparable & (p_value < bonferroni), "position"].astype(int).tolist()
    summary = {
        "positions_compared": n,
        "level": level,
        "disagreeing_positions": disagree,
        "expected_by_chance": (1 - level) * n,
        "disagreeing_positions_bonferroni": disagree_bonferroni,
        "agrees": n > 0 and not disagree_bonferroni,
    }
    return table.reset_index(drop=True), summary
