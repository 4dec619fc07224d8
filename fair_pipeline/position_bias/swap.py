"""The adjacent-swap estimator (Nandy et al. section 2.2): η_j from the two items swapped between slots j-1 and j.

η_j = (CTR[orig j-1 at j] + CTR[orig j at j]) / (CTR[orig j-1 at j-1] + CTR[orig j at j-1]): both sums weigh the
same two items (production ranks j-1 and j), so the ratio is w_j / w_{j-1}; ŵ_J chains η_2 ... η_J.

Uncertainty: delta method on log ŵ_J with each cell's clicks Binomial(N, p). Deep positions have few clicks and most
swapped cells none, where the plug-in N (C/N)(1 - C/N) is 0: the chain then gathers no variance from those cells and
its CIs shrink as it drifts. p is therefore the model-pooled rate p = ŵ_pos r_item, the item rank's click rate
r_o = (its clicks in its three cells) / Σ ŵ_pos N pooled over the positions it was shown at, so a cell without
clicks still carries the variance its impressions imply. And where the swapped cells' expected clicks are too few
for the delta method (fewer than MIN_SWAPPED_CLICKS between the two cells that tell w_j from w_{j-1}), η_j and every
weight chained from it are not estimable (NaN, with a warning) rather than reported with a CI that does not cover.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.position_bias.chain import (
    chain_weights,
    check_positions,
    policy_rows,
    positions_text,
    report_chain_break,
    warn_note,
)

# Expected clicks in the two swapped cells of η_j below which it is not estimable. Monte Carlo (sparse deep
# positions; benchmarks/position_bias_accuracy.py --only-swap): see docs/position_bias.md.
MIN_SWAPPED_CLICKS = 1.0


def _swap_cells(swaps: pd.DataFrame):
    """(k, {shift: (impressions, clicks)}) indexed by position 0..k+1, shift = original_position - position."""
    rows = policy_rows(swaps, "adjacent_swap", "swap-cell aggregates")
    moved = (rows["original_position"] - rows["position"]).abs() > 1
    if moved.any():
        row = rows[moved].iloc[0]
        raise PositionBiasInputError(
            f"adjacent_swap traffic moved an item by more than one slot (position {row['position']}, original_position"
            f" {row['original_position']}, {int(rows.loc[moved, 'impressions'].sum())} impressions)"
        )
    k = check_positions(rows, "adjacent_swap")
    cells = {shift: (np.zeros(k + 2), np.zeros(k + 2)) for shift in (-1, 0, 1)}
    for shift, (n, c) in cells.items():
        part = rows[rows["original_position"] - rows["position"] == shift]
        np.add.at(n, part["position"].to_numpy(), part["impressions"].to_numpy(dtype=float))
        np.add.at(c, part["position"].to_numpy(), part["clicks"].to_numpy(dtype=float))
    return k, cells


def _ctr(clicks: np.ndarray, impressions: np.ndarray) -> np.ndarray:
    return np.where(impressions > 0, clicks / np.maximum(impressions, 1), np.nan)


def _inverse(impressions: np.ndarray) -> np.ndarray:
    return np.where(impressions > 0, 1.0 / np.maximum(impressions, 1), 0.0)


def pooled_rates(cells: dict, log_w: np.ndarray) -> dict:
    """{shift: fitted click rate per position} = ŵ_pos r_o, r_o pooled over the item rank o's cells.

    Where ŵ_pos is not finite (below a break of the chain) the cell's own C/N stands in; those weights are NaN."""
    k = len(log_w)
    w = np.full(k + 2, np.nan)
    w[1 : k + 1] = np.exp(log_w)
    pos = np.arange(k + 2)
    clicks, exposure = np.zeros(k + 4), np.zeros(k + 4)  # per original position o = pos + shift (offset by 1)
    for shift, (n, c) in cells.items():
        use = np.isfinite(w) & (n > 0)
        np.add.at(clicks, pos[use] + shift + 1, c[use])
        np.add.at(exposure, pos[use] + shift + 1, w[use] * n[use])
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(exposure > 0, clicks / exposure, np.nan)
    out = {}
    for shift, (n, c) in cells.items():
        fitted = w * r[pos + shift + 1]
        own = _ctr(c, n)
        out[shift] = np.clip(np.where(np.isfinite(fitted), fitted, np.nan_to_num(own)), 0.0, 1.0)
    return out


def adjacent_swap(swaps: pd.DataFrame, truncate: int | None, notes: list[str]):
    """(log ŵ, Var log ŵ, (impressions, clicks) per position) from normalized swap-cell aggregates."""
    k, cells = _swap_cells(swaps)
    (n_up, c_up), (n_stay, c_stay), (n_down, c_down) = cells[1], cells[0], cells[-1]  # indexed by position
    j = np.arange(2, k + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        num = _ctr(c_down[j], n_down[j]) + _ctr(c_stay[j], n_stay[j])
        den = _ctr(c_stay[j - 1], n_stay[j - 1]) + _ctr(c_up[j - 1], n_up[j - 1])
        ok = (num > 0) & (den > 0)
        log_eta = np.concatenate([[0.0], np.where(ok, np.log(num) - np.log(den), np.nan)])
    raw_log_w, _ = chain_weights(log_eta, np.zeros(k), np.zeros(k), None)
    p = pooled_rates(cells, raw_log_w)
    expected_swapped = n_down[j] * p[-1][j] + n_up[j - 1] * p[1][j - 1]
    sparse = ok & ~(expected_swapped >= MIN_SWAPPED_CLICKS)
    by_reason: dict[str, list[int]] = {}
    for pos in j[~ok | sparse]:
        if min(n_down[pos], n_up[pos - 1]) == 0:
            reason = "no impressions of items swapped with the slot above"
        elif ok[pos - 2]:
            reason = (f"fewer than {MIN_SWAPPED_CLICKS:g} clicks expected on the items swapped with the slot above"
                      " (too few for a CI)")
        else:
            reason = "no clicks on the items swapped into it"
        by_reason.setdefault(reason, []).append(int(pos))
    for reason, positions in by_reason.items():
        warn_note(notes, f"adjacent_swap: {positions_text(positions)}: {reason}; η_j not estimable")
    ok = ok & ~sparse
    log_eta[1:][~ok] = np.nan
    report_chain_break(int(j[~ok][0]) if (~ok).any() else None, notes)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Click gradients of log η_j per cell; stay[i] enters η_i (+, numerator) and η_{i+1} (-, denominator).
        g_down, g_stay_num = _inverse(n_down[j]) / num, _inverse(n_stay[j]) / num
        g_stay_den, g_up = _inverse(n_stay[j - 1]) / den, _inverse(n_up[j - 1]) / den
    # Gradients of a not-estimable η_j are infinite; zero them (every ŵ from that j down is NaN anyway).
    g_down, g_up, g_stay_num, g_stay_den = (np.where(ok, g, 0.0) for g in (g_down, g_up, g_stay_num, g_stay_den))
    var = {shift: n * p[shift] * (1.0 - p[shift]) for shift, (n, _) in cells.items()}
    zero = np.zeros(1)
    own = np.concatenate([zero, g_down**2 * var[-1][j] + g_up**2 * var[1][j - 1]])
    a = np.concatenate([zero, g_stay_num])  # at stay[J], J = 1..k
    d = np.concatenate([g_stay_den, zero])  # at stay[i] from η_{i+1}
    v_stay = var[0][1 : k + 1]
    final = own + (a - d) ** 2 * v_stay  # row i < J: own terms of η_i, stay[i] in η_i and η_{i+1}
    partial = own + a**2 * v_stay
    # chain_weights adds final_i for i < J and partial_J: the own terms of η_J sit in partial_J, earlier ones in final.
    log_w, var_log_w = chain_weights(log_eta, final, partial, truncate)
    totals = (n_up + n_stay + n_down)[1 : k + 1], (c_up + c_stay + c_down)[1 : k + 1]
    return log_w, var_log_w, totals
