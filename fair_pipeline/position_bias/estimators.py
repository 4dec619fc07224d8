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
from fair_pipeline.position_bias.chain import (  # noqa: F401  (PositionBiasWarning, position_ranges: public here)
    PositionBiasWarning,
    chain_weights,
    check_positions,
    policy_rows,
    position_ranges,
    positions_text,
    report_chain_break,
    warn_note,
)
from fair_pipeline.position_bias.swap import adjacent_swap

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


@dataclasses.dataclass
class _Grid:
    """Impressions N and clicks C per position (rows, position = row + 1) x score bin (columns)."""

    policy: str
    n: np.ndarray
    c: np.ndarray

    @property
    def positions(self) -> int:
        return self.n.shape[0]


def _grid(bins: pd.DataFrame, policy: str, binned: bool, notes: list[str]) -> _Grid:
    rows = policy_rows(bins, policy, "score-bin aggregates")
    k = check_positions(rows, policy)
    rows = rows[rows["impressions"] > 0]
    if binned:
        missing_score = rows["score_bin"].isna()
        if missing_score.any():
            warn_note(notes, f"{policy}: {int(rows.loc[missing_score, 'impressions'].sum())} impressions without a score"
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
        warn_note(notes, f"{grid.policy}: {positions_text(positions)}: {reason}; {what}")


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


def _adjacent_pairwise(grid: _Grid, truncate: int | None, notes: list[str]):
    k = grid.positions
    target = np.arange(1, k)
    log_ratio, g_t, g_r, support = _stratified_ratio(grid, target, target - 1)
    log_eta = np.concatenate([[0.0], log_ratio])
    bad = np.flatnonzero(np.isnan(log_ratio))
    if len(bad):
        shared = support[bad].sum(axis=1)
        _warn_not_estimable(grid, target[bad], shared, "the position above", notes, "η_j not estimable")
        report_chain_break(int(target[bad[0]]) + 1, notes)
    # Rows of the click gradient of log ŵ_J: row i < J holds a_i - d_{i+1}, row J holds a_J.
    a = np.vstack([np.zeros((1, g_t.shape[1])), g_t])  # a_j at row j (pair j-1, j)
    d = np.vstack([g_r, np.zeros((1, g_r.shape[1]))])  # d_{i+1} at row i (reference row of pair i, i+1)
    untruncated, _ = chain_weights(log_eta, np.zeros(k), np.zeros(k), None)
    v = _cell_variance(grid, untruncated)
    final = ((a - d) ** 2 * v).sum(axis=1)
    partial = (a**2 * v).sum(axis=1)
    return chain_weights(log_eta, final, partial, truncate)


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
        warn_note(notes, f"bin_width={bin_width} leaves a median of {np.median(occupied):.0f} score bins per position:"
                     " too coarse to resolve the score densities (the density ratio will be biased)")
    if per_cell < AUTO_MIN_CELL / 2:
        warn_note(notes, f"bin_width={bin_width} leaves {per_cell:.1f} impressions per occupied (position, bin) cell on"
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
        log_w, var, (impressions, clicks) = adjacent_swap(normalize_swaps(swaps), truncate, notes)
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
