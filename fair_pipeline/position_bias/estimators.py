"""Position-bias estimators of Nandy et al. (section 2.2, appendix A.3) on aggregates.

w_j = P(Y(j)=1 | Y(1)=1), w_1 = 1. Every estimator here is a product of ratios of sums of clicks, computed from
the aggregates of `position_bias_aggregates` (the in-memory and the SQL path feed the same code):

* `randomized`        eq. (3): CTR_j / CTR_1 on `shuffle` traffic.
* `naive`             the same ratio on `production` traffic (biased: lower slots hold worse items).
* `direct_is`         w_j = E[Y f_1(s)/f_j(s) | γ=j] / E[Y | γ=1] on production traffic.
* `adjacent_pairwise` η_j = E[Y f_{j-1}(s)/f_j(s) | γ=j] / E[Y | γ=j-1], ŵ_j = ∏_{r=2}^{min(j,T)} η_r.
* `adjacent_swap`     η_j from the two items swapped between slots j-1 and j, chained like adjacent_pairwise.

Densities are histograms on fixed-width score bins b, so f_r(b)/f_j(b) = (N_rb/N_r)/(N_jb/N_j) and the
importance-sampling ratio becomes a post-stratified CTR ratio
    ratio(j; r) = Σ_{b∈S} N_rb · C_jb/N_jb  /  Σ_{b∈S} C_rb,        S = bins seen at both positions,
i.e. the CTR at j re-weighted to the score mix of position r. Restricting to the common support S keeps the
ratio consistent (both sums estimate w_j resp. w_r times the same Σ_b N_rb π_b). With one bin it is eq. (3).

Uncertainty: delta method on log ŵ_j, clicks of each (position, bin) cell Binomial given the impression
counts (impressions of different items are taken as independent; the reweighting counts enter only at second
order because numerator and denominator share them). Cell click variances use the model-pooled click rate
p_jb = ŵ_j π_b (π_b = Σ_j C_jb / Σ_j ŵ_j N_jb), which is stable in small tail bins where C/N is not.
CI = exp(log ŵ ± z·se), so bounds stay positive; `se` is the SE of ŵ itself (ŵ·se of the log).
Truncation (j > T) is a modelling assumption (η_j = 1): the CI there is the CI at T and does not cover that bias.
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from fair_pipeline.position_bias.aggregates import (
    FINE_BIN_WIDTH,
    PositionBiasInputError,
    coarsen_bins,
    normalize_bins,
    normalize_swaps,
)

METHODS = ("randomized", "adjacent_swap", "adjacent_pairwise", "direct_is", "naive")
METHOD_POLICY = {
    "randomized": "shuffle",
    "adjacent_swap": "adjacent_swap",
    "adjacent_pairwise": "production",
    "direct_is": "production",
    "naive": "production",
}
BINNED_METHODS = ("adjacent_pairwise", "direct_is")
DEFAULT_TRUNCATE = 30
AUTO_BINS_PER_SD = 20  # default width: 1/20 of the within-position score SD
AUTO_MAX_BINS_PER_SD = 5  # never wider than 1/5 SD (bias grows like width^2)
AUTO_MIN_CELL = 10  # widen while occupied (position, bin) cells average fewer impressions
RESULT_COLUMNS = ["position", "weight", "ci_low", "ci_high", "se", "impressions", "clicks", "truncated"]


class PositionBiasWarning(UserWarning):
    """A position whose weight is not estimable (NaN) or a questionable setting; the message says which."""


@dataclasses.dataclass
class _Grid:
    """Impressions N and clicks C per position (rows, position = row + 1) x score bin (columns)."""

    policy: str
    n: np.ndarray
    c: np.ndarray

    @property
    def positions(self) -> int:
        return self.n.shape[0]


def _warn(notes: list[str], message: str) -> None:
    notes.append(message)
    warnings.warn(message, PositionBiasWarning, stacklevel=3)


def _policy_rows(frame: pd.DataFrame, policy: str, what: str) -> pd.DataFrame:
    rows = frame[frame["policy"] == policy]
    if rows.empty or rows["impressions"].sum() == 0:
        present = sorted(frame.loc[frame["impressions"] > 0, "policy"].unique().tolist())
        raise PositionBiasInputError(
            f"no {policy!r} impressions in the {what}; this estimator needs {policy} traffic "
            f"(policies present: {present or 'none'})"
        )
    return rows


def _check_positions(rows: pd.DataFrame, policy: str) -> int:
    by_position = rows.groupby("position")[["impressions", "clicks"]].sum()
    by_position = by_position[by_position["impressions"] > 0]
    if len(by_position) < 2:
        raise PositionBiasInputError(
            f"{policy} traffic shows only position(s) {by_position.index.tolist()}; position bias needs at least two"
        )
    if by_position["clicks"].sum() == 0:
        raise PositionBiasInputError(
            f"{policy} traffic has 0 clicks in {int(by_position['impressions'].sum())} impressions at every position;"
            " no weight is estimable"
        )
    if 1 not in by_position.index:
        raise PositionBiasInputError(f"{policy} traffic has no impressions at position 1, the reference of every weight")
    if by_position.loc[1, "clicks"] == 0:
        raise PositionBiasInputError(
            f"{policy} traffic has 0 clicks at position 1 (the reference; {int(by_position.loc[1, 'impressions'])}"
            " impressions); no weight is estimable"
        )
    return int(by_position.index.max())


def _grid(bins: pd.DataFrame, policy: str, binned: bool, notes: list[str]) -> _Grid:
    rows = _policy_rows(bins, policy, "score-bin aggregates")
    k = _check_positions(rows, policy)
    rows = rows[rows["impressions"] > 0]
    if binned:
        missing_score = rows["score_bin"].isna()
        if missing_score.any():
            _warn(notes, f"{policy}: {int(rows.loc[missing_score, 'impressions'].sum())} impressions without a score"
                         " are left out of the score-binned estimate")
            rows = rows[~missing_score]
            if rows["impressions"].sum() == 0:
                raise PositionBiasInputError(f"{policy} traffic has no scored impressions; score-binned estimators need scores")
        codes, _ = pd.factorize(rows["score_bin"].astype("int64"), sort=True)
    else:
        codes = np.zeros(len(rows), dtype=np.int64)
    n = np.zeros((k, codes.max() + 1))
    c = np.zeros_like(n)
    pos = rows["position"].to_numpy() - 1
    np.add.at(n, (pos, codes), rows["impressions"].to_numpy(dtype=float))
    np.add.at(c, (pos, codes), rows["clicks"].to_numpy(dtype=float))
    return _Grid(policy, n, c)


def _stratified_ratio(grid: _Grid, target: np.ndarray, reference: np.ndarray):
    """log ratio(j; r) for rows j=target, r=reference, with its click gradients (rows j and r) and support."""
    nt, nr, ct, cr = grid.n[target], grid.n[reference], grid.c[target], grid.c[reference]
    support = (nt > 0) & (nr > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        reweight = np.where(support, nr / np.where(nt > 0, nt, 1.0), 0.0)
        numerator = (reweight * ct).sum(axis=1)
        denominator = np.where(support, cr, 0.0).sum(axis=1)
        ok = (numerator > 0) & (denominator > 0)
        log_ratio = np.where(ok, np.log(numerator) - np.log(denominator), np.nan)
        grad_target = reweight / numerator[:, None]
        grad_reference = support / denominator[:, None]
    return log_ratio, np.where(ok[:, None], grad_target, 0.0), np.where(ok[:, None], grad_reference, 0.0), support


def position_ranges(positions: list[int]) -> str:
    """[2, 3, 4, 7] -> '2-4, 7' so that one warning can name many positions."""
    spans: list[list[int]] = []
    for p in positions:
        if spans and p == spans[-1][1] + 1:
            spans[-1][1] = p
        else:
            spans.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _positions(positions: list[int]) -> str:
    return ("positions " if len(positions) > 1 else "position ") + position_ranges(positions)


def _warn_not_estimable(grid: _Grid, rows: np.ndarray, support: np.ndarray, reference: str, notes: list[str], what: str):
    """One warning per reason, naming the policy and the positions (rows are 0-based target rows)."""
    by_reason: dict[str, list[int]] = {}
    for row, shared in zip(rows, support):
        if grid.n[row].sum() == 0:
            reason = "no impressions"
        elif grid.c[row].sum() == 0:
            reason = f"0 clicks (impressions: {int(grid.n[row].sum())})"
        elif shared == 0:
            reason = f"no score bin in common with {reference}"
        else:
            reason = f"no clicks in the score bins shared with {reference} (or none there)"
        by_reason.setdefault(reason.split(" (impressions")[0], []).append(int(row) + 1)
    for reason, positions in by_reason.items():
        _warn(notes, f"{grid.policy}: {_positions(positions)}: {reason}; {what}")


def _cell_variance(grid: _Grid, log_w: np.ndarray) -> np.ndarray:
    """Var of clicks per cell: N p (1-p) with p = ŵ_j π_b pooled over positions (C/N where ŵ_j is NaN)."""
    w = np.exp(log_w)
    usable = np.isfinite(w)
    with np.errstate(divide="ignore", invalid="ignore"):
        pi = grid.c[usable].sum(axis=0) / (w[usable, None] * grid.n[usable]).sum(axis=0)
        p = np.where(usable[:, None], w[:, None] * np.nan_to_num(pi)[None, :], grid.c / grid.n)
    p = np.clip(np.nan_to_num(p), 0.0, 1.0)
    return grid.n * p * (1.0 - p)


def _direct(grid: _Grid, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """ratio(j; 1) for every j: eq. (3) with one bin, direct importance sampling with score bins."""
    k = grid.positions
    target = np.arange(1, k)
    log_ratio, g_t, g_r, support = _stratified_ratio(grid, target, np.zeros_like(target))
    log_w = np.concatenate([[0.0], log_ratio])
    bad = np.flatnonzero(np.isnan(log_ratio))
    if len(bad):
        shared = support[bad].sum(axis=1)
        _warn_not_estimable(grid, target[bad], shared, "position 1", notes, "weight not estimable (NaN)")
    v = _cell_variance(grid, log_w)
    var = np.concatenate([[0.0], (g_t**2 * v[target]).sum(axis=1) + (g_r**2 * v[0][None, :]).sum(axis=1)])
    return log_w, np.where(np.isnan(log_w), np.nan, var)


def _chain(log_eta: np.ndarray, final_var: np.ndarray, partial_var: np.ndarray, truncate: int | None):
    """log ŵ_J = Σ_{j=2}^{min(J,T)} log η_j and its variance Σ_{i<J} final_i + partial_J (NaN after a gap)."""
    k = len(log_eta)
    t = k if truncate is None else min(truncate, k)
    log_w = np.concatenate([[0.0], np.cumsum(log_eta[1:t])])  # NaN propagates down the chain
    var = np.concatenate([[0.0], np.cumsum(final_var[: t - 1])]) + partial_var[:t]
    log_w = np.concatenate([log_w, np.repeat(log_w[-1], k - t)])
    var = np.concatenate([var, np.repeat(var[-1], k - t)])
    return log_w, np.where(np.isnan(log_w), np.nan, var)


def _report_chain_break(first_break: int | None, notes: list[str]) -> None:
    if first_break is not None:
        _warn(notes, f"weights from position {first_break} down are not estimable (NaN): the chain of ratios breaks there")


def _adjacent_pairwise(grid: _Grid, truncate: int | None, notes: list[str]):
    k = grid.positions
    target = np.arange(1, k)
    log_ratio, g_t, g_r, support = _stratified_ratio(grid, target, target - 1)
    log_eta = np.concatenate([[0.0], log_ratio])
    bad = np.flatnonzero(np.isnan(log_ratio))
    if len(bad):
        shared = support[bad].sum(axis=1)
        _warn_not_estimable(grid, target[bad], shared, "the position above", notes, "η_j not estimable")
        _report_chain_break(int(target[bad[0]]) + 1, notes)
    # Rows of the click gradient of log ŵ_J: row i < J holds a_i - d_{i+1}, row J holds a_J.
    a = np.vstack([np.zeros((1, g_t.shape[1])), g_t])  # a_j at row j (pair j-1, j)
    d = np.vstack([g_r, np.zeros((1, g_r.shape[1]))])  # d_{i+1} at row i (reference row of pair i, i+1)
    untruncated, _ = _chain(log_eta, np.zeros(k), np.zeros(k), None)
    v = _cell_variance(grid, untruncated)
    final = ((a - d) ** 2 * v).sum(axis=1)
    partial = (a**2 * v).sum(axis=1)
    return _chain(log_eta, final, partial, truncate)


def _swap_cells(swaps: pd.DataFrame):
    rows = _policy_rows(swaps, "adjacent_swap", "swap-cell aggregates")
    moved = (rows["original_position"] - rows["position"]).abs() > 1
    if moved.any():
        row = rows[moved].iloc[0]
        raise PositionBiasInputError(
            f"adjacent_swap traffic moved an item by more than one slot (position {row['position']}, original_position"
            f" {row['original_position']}, {int(rows.loc[moved, 'impressions'].sum())} impressions)"
        )
    k = _check_positions(rows, "adjacent_swap")
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


def _binomial_var(clicks: np.ndarray, impressions: np.ndarray) -> np.ndarray:
    """Plug-in Var of a click count, N p (1 - p) = C (1 - C/N); the swap cells are large, no pooling needed."""
    return np.where(impressions > 0, clicks * (1 - clicks / np.maximum(impressions, 1)), 0.0)


def _adjacent_swap(swaps: pd.DataFrame, truncate: int | None, notes: list[str]):
    """η_j = (CTR[orig j-1 at j] + CTR[orig j at j]) / (CTR[orig j-1 at j-1] + CTR[orig j at j-1]).

    Both sums weigh the same two items (production ranks j-1 and j), so the ratio is w_j / w_{j-1}."""
    k, cells = _swap_cells(swaps)
    (n_up, c_up), (n_stay, c_stay), (n_down, c_down) = cells[1], cells[0], cells[-1]  # indexed by position
    j = np.arange(2, k + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        num = _ctr(c_down[j], n_down[j]) + _ctr(c_stay[j], n_stay[j])
        den = _ctr(c_stay[j - 1], n_stay[j - 1]) + _ctr(c_up[j - 1], n_up[j - 1])
        ok = (num > 0) & (den > 0)
        log_eta = np.concatenate([[0.0], np.where(ok, np.log(num) - np.log(den), np.nan)])
        # Click gradients of log η_j per cell; stay[i] enters η_i (+, numerator) and η_{i+1} (-, denominator).
        g_down, g_stay_num = _inverse(n_down[j]) / num, _inverse(n_stay[j]) / num
        g_stay_den, g_up = _inverse(n_stay[j - 1]) / den, _inverse(n_up[j - 1]) / den
    by_reason: dict[str, list[int]] = {}
    for pos in j[~ok]:
        swapped = min(n_down[pos], n_up[pos - 1]) > 0
        reason = "no clicks on the items swapped into it" if swapped else "no impressions of items swapped with the slot above"
        by_reason.setdefault(reason, []).append(int(pos))
    for reason, positions in by_reason.items():
        _warn(notes, f"adjacent_swap: {_positions(positions)}: {reason}; η_j not estimable")
    _report_chain_break(int(j[~ok][0]) if (~ok).any() else None, notes)
    zero = np.zeros(1)
    # Gradients of a not-estimable η_j are infinite; zero them (every ŵ from that j down is NaN anyway).
    g_down, g_up, g_stay_num, g_stay_den = (np.where(ok, g, 0.0) for g in (g_down, g_up, g_stay_num, g_stay_den))
    swapped_var = g_down**2 * _binomial_var(c_down[j], n_down[j]) + g_up**2 * _binomial_var(c_up[j - 1], n_up[j - 1])
    own = np.concatenate([zero, swapped_var])
    a = np.concatenate([zero, g_stay_num])  # at stay[J], J = 1..k
    d = np.concatenate([g_stay_den, zero])  # at stay[i] from η_{i+1}
    v_stay = _binomial_var(c_stay[1 : k + 1], n_stay[1 : k + 1])
    final = own + (a - d) ** 2 * v_stay  # row i < J: own terms of η_i, stay[i] in η_i and η_{i+1}
    partial = own + a**2 * v_stay
    # _chain adds final_i for i < J and partial_J; the own terms of η_J sit in partial_J, earlier ones in final.
    log_w, var = _chain(log_eta, final, partial, truncate)
    totals = (n_up + n_stay + n_down)[1 : k + 1], (c_up + c_stay + c_down)[1 : k + 1]
    return log_w, var, totals


def _result(log_w, var, impressions, clicks, truncate, level) -> pd.DataFrame:
    z = stats.norm.ppf(0.5 + level / 2)
    k = len(log_w)
    se_log = np.sqrt(var)
    weight = np.exp(log_w)
    positions = np.arange(1, k + 1)
    return pd.DataFrame(
        {
            "position": positions,
            "weight": weight,
            "ci_low": np.exp(log_w - z * se_log),
            "ci_high": np.exp(log_w + z * se_log),
            "se": weight * se_log,
            "impressions": np.asarray(impressions, dtype=np.int64),
            "clicks": np.asarray(clicks, dtype=np.int64),
            "truncated": positions > truncate if truncate is not None else np.zeros(k, bool),
        }
    )[RESULT_COLUMNS]


def auto_bin_factor(bins: pd.DataFrame, policy: str, fine_width: float = FINE_BIN_WIDTH) -> int:
    """Fine bins per estimation bin for `bin_width="auto"`.

    The binned density ratio has a bias that grows like width² (inside a bin the score mix still differs
    between two positions), while its variance hardly depends on the width until cells hold only a handful
    of impressions (bins seen at one position only are dropped). So: width = 1/AUTO_BINS_PER_SD of the
    median within-position score SD, widened (doubling, up to 1/AUTO_MAX_BINS_PER_SD of an SD) while the
    occupied (position, bin) cells hold fewer than AUTO_MIN_CELL impressions on average."""
    rows = bins[(bins["policy"] == policy) & bins["score_bin"].notna() & (bins["impressions"] > 0)]
    if rows.empty:
        return 1
    centre = (rows["score_bin"].to_numpy(dtype=float) + 0.5) * fine_width
    n = rows["impressions"].to_numpy(dtype=float)
    frame = pd.DataFrame({"position": rows["position"].to_numpy(), "n": n, "x": centre * n, "xx": centre**2 * n})
    sums = frame.groupby("position")[["n", "x", "xx"]].sum()
    sd = float(np.median(np.sqrt(np.maximum(sums["xx"] / sums["n"] - (sums["x"] / sums["n"]) ** 2, 0.0))))
    factor = max(1, int(sd / AUTO_BINS_PER_SD / fine_width))
    widest = max(factor, int(sd / AUTO_MAX_BINS_PER_SD / fine_width))
    fine_bins = rows["score_bin"].to_numpy(dtype=np.int64)
    positions = rows["position"].to_numpy(dtype=np.int64)
    while factor * 2 <= widest:
        cells = len(pd.DataFrame({"position": positions, "bin": fine_bins // factor}).drop_duplicates())
        if n.sum() / cells >= AUTO_MIN_CELL:
            break
        factor *= 2
    return factor


def _bin_factor(bin_width: float, fine_width: float) -> int:
    factor = bin_width / fine_width
    if factor < 1 - 1e-9 or abs(factor - round(factor)) > 1e-6:
        raise PositionBiasInputError(
            f"bin_width={bin_width} must be a positive multiple of the aggregated bin width {fine_width}"
        )
    return int(round(factor))


def _check_bin_width(grid: _Grid, bin_width: float, notes: list[str]) -> None:
    occupied = (grid.n > 0).sum(axis=1)
    per_cell = grid.n.sum() / max((grid.n > 0).sum(), 1)
    if np.median(occupied) < 10:
        _warn(notes, f"bin_width={bin_width} leaves a median of {np.median(occupied):.0f} score bins per position:"
                     " too coarse to resolve the score densities (the density ratio will be biased)")
    if per_cell < AUTO_MIN_CELL / 2:
        _warn(notes, f"bin_width={bin_width} leaves {per_cell:.1f} impressions per occupied (position, bin) cell on"
                     " average: too fine (many bins are seen at one position only and are dropped)")


def estimate_from_aggregates(
    method: str,
    bins: pd.DataFrame | None = None,
    swaps: pd.DataFrame | None = None,
    truncate: int | None = DEFAULT_TRUNCATE,
    bin_width: float | str = "auto",
    fine_width: float = FINE_BIN_WIDTH,
    level: float = 0.95,
) -> pd.DataFrame:
    """Position-bias curve from aggregates (score bins for all methods but adjacent_swap, swap cells for it).

    Returns one row per position 1..K: `position, weight, ci_low, ci_high, se, impressions, clicks, truncated`.
    `bin_width` (binned methods): a multiple of `fine_width`, or "auto" (see `auto_bin_factor`).
    `attrs` carries `method`, `policy`, `truncate`, `bin_width` (the one used), `level` and `warnings` (the
    messages of positions that are not estimable, whose weight is NaN)."""
    if method not in METHODS:
        raise PositionBiasInputError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    if truncate is not None and (int(truncate) != truncate or truncate < 2):
        raise PositionBiasInputError(f"truncate={truncate!r} must be an integer >= 2 (or None for no truncation)")
    if not 0 < level < 1:
        raise PositionBiasInputError(f"level={level!r} must be in (0, 1)")
    chained = method in ("adjacent_pairwise", "adjacent_swap")
    truncate = truncate if chained else None
    notes: list[str] = []
    if method == "adjacent_swap":
        if swaps is None:
            raise PositionBiasInputError("adjacent_swap needs the swap-cell aggregates (swaps=...)")
        log_w, var, (impressions, clicks) = _adjacent_swap(normalize_swaps(swaps), truncate, notes)
    else:
        if bins is None:
            raise PositionBiasInputError(f"{method} needs the score-bin aggregates (bins=...)")
        bins = normalize_bins(bins)
        binned = method in BINNED_METHODS
        if binned:
            factor = (
                auto_bin_factor(bins, METHOD_POLICY[method], fine_width)
                if bin_width == "auto"
                else _bin_factor(float(bin_width), fine_width)
            )
            bin_width = factor * fine_width
            bins = coarsen_bins(bins, factor)
        grid = _grid(bins, METHOD_POLICY[method], binned, notes)
        if binned:
            _check_bin_width(grid, bin_width, notes)
        if method == "adjacent_pairwise":
            log_w, var = _adjacent_pairwise(grid, truncate, notes)
        else:
            log_w, var = _direct(grid, notes)
        impressions, clicks = grid.n.sum(axis=1), grid.c.sum(axis=1)
    result = _result(log_w, var, impressions, clicks, truncate, level)
    result.attrs.update(
        method=method,
        policy=METHOD_POLICY[method],
        truncate=truncate,
        bin_width=bin_width if method in BINNED_METHODS else None,
        level=level,
        warnings=notes,
    )
    return result
