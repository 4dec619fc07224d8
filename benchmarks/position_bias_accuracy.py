"""Accuracy of the position-bias estimators on the simulator (the figures quoted in the README).

    python benchmarks/position_bias_accuracy.py [--bin-reps 10] [--coverage-reps 20] [--swap-reps 0]
    python benchmarks/position_bias_accuracy.py --only-swap --swap-reps 500   # 4. alone (docs/position_bias.md)

1. Default simulation (K=50, w_j = 1/log2(1+j), 7 days x 25,000 production + 5,000 shuffled + 5,000 swapped
   requests a day) and the power-law curve (1/j)^0.8 with K=20: max |ŵ_j - w_j| per estimator.
2. Bin width of adjacent_pairwise: bias and SD of ŵ_30 over replications of one simulated day.
3. CI coverage at one day x 25,000 requests per replication.
4. adjacent_swap CI coverage with sparse deep clicks, by position band, and the share the rule marks not estimable.
"""
from __future__ import annotations

import argparse
import datetime as dt
import time
import warnings

import numpy as np
import pandas as pd

from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve
from fair_pipeline.position_bias import compare_estimates
from fair_pipeline.position_bias.aggregates import FINE_BIN_WIDTH
from fair_pipeline.position_bias.estimators import auto_bin_factor, estimate_from_aggregates
from fair_pipeline.position_bias.simulated_aggregates import simulated_aggregates

METHODS = ("adjacent_pairwise", "randomized", "adjacent_swap", "direct_is", "naive")
warnings.simplefilter("ignore")


def accuracy(config: SimulationConfig, label: str) -> None:
    started = time.perf_counter()
    bins, swaps = simulated_aggregates(config, 7)
    w = bias_curve(config)
    top = min(30, config.slots)
    print(f"\n{label}: {7 * config.requests_per_day:,} production, {7 * config.shuffle_requests_per_day:,} shuffled,"
          f" {7 * config.adjacent_swap_requests_per_day:,} swapped requests (simulated in {time.perf_counter() - started:.0f}s)")
    print(f"| estimator | max error j<={top} | max error all j | SE of w_{top} | NaN positions |")
    print("|---|---|---|---|---|")
    curves = {}
    for method in METHODS:
        curve = curves[method] = estimate_from_aggregates(method, bins=bins, swaps=swaps)
        err = np.abs(curve["weight"].to_numpy() - w)
        print(f"| {method} | {np.nanmax(err[:top]):.4f} | {np.nanmax(err):.4f} | {curve['se'].iloc[top - 1]:.4f} |"
              f" {int(curve['weight'].isna().sum())} |")
    _, summary = compare_estimates(curves["adjacent_pairwise"], curves["randomized"], max_position=top)
    print(f"adjacent_pairwise vs randomized (j<={top}): {summary}")
    print(f"auto bin width: {curves['adjacent_pairwise'].attrs['bin_width']:.2f}")


def bin_width_study(reps: int) -> None:
    config = SimulationConfig(shuffle_share=0, adjacent_swap_share=0)
    w30 = bias_curve(config)[29]
    widths = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
    estimates = {h: [] for h in widths}
    for rep in range(reps):
        bins, _ = simulated_aggregates(config, 1, start=dt.date(2022, 1, 1) + dt.timedelta(days=rep))
        for h in widths:
            estimates[h].append(estimate_from_aggregates("adjacent_pairwise", bins=bins, bin_width=h)["weight"].iloc[29])
    auto = auto_bin_factor(bins, "production") * FINE_BIN_WIDTH
    print(f"\nadjacent_pairwise, bin width vs w_30 = {w30:.4f}: {reps} replications of 1 day x 25,000 requests"
          f" (auto width here: {auto:.2f})")
    print("| bin width | bias of ŵ_30 | SD of ŵ_30 | RMSE |")
    print("|---|---|---|---|")
    for h in widths:
        e = np.array(estimates[h]) - w30
        print(f"| {h} | {e.mean():+.4f} | {e.std(ddof=1):.4f} | {np.sqrt((e ** 2).mean()):.4f} |")


def coverage(reps: int) -> None:
    config = SimulationConfig(shuffle_share=1.0, adjacent_swap_share=0, seed=5)
    w = bias_curve(config)
    hits = {"randomized": [], "adjacent_pairwise": []}
    for rep in range(reps):
        bins, _ = simulated_aggregates(config, 1, start=dt.date(2021, 1, 1) + dt.timedelta(days=rep))
        for method, top in (("randomized", 50), ("adjacent_pairwise", 30)):
            c = estimate_from_aggregates(method, bins=bins)
            hits[method].append(((c["ci_low"] <= w) & (w <= c["ci_high"])).to_numpy()[1:top])
    print(f"\n95% CI coverage, {reps} replications of 1 day x 25,000 production + 25,000 shuffled requests:")
    for method, h in hits.items():
        print(f"  {method}: {np.mean(h):.3f} of {np.size(h)} intervals")


def swap_cells(rng, requests: int, k: int = 30) -> pd.DataFrame:
    """One day of adjacent-swap traffic: each request swaps one uniformly chosen adjacent pair (j-1, j), clicks
    Binomial(N, w_pos q_orig) with q_o = 0.3 o^-0.7 (sparse deep clicks: at 5,000 requests most swapped cells
    below position 10 have no click)."""
    w = 1 / np.log2(1 + np.arange(1, k + 1))
    q = 0.3 * np.arange(1, k + 1) ** -0.7
    pair = rng.multinomial(requests, np.full(k - 1, 1 / (k - 1)))  # pair[j-2]: requests swapping j-1 and j
    rows = []
    for pos in range(1, k + 1):
        for orig in (pos - 1, pos, pos + 1):
            if not 1 <= orig <= k:
                continue
            swapped = pair[min(pos, orig) - 1] if orig != pos else 0
            n = swapped if orig != pos else requests - sum(pair[i - 2] for i in (pos, pos + 1) if 2 <= i <= k)
            rows.append((pos, orig, n, rng.binomial(n, w[pos - 1] * q[orig - 1])))
    frame = pd.DataFrame(rows, columns=["position", "original_position", "impressions", "clicks"])
    return frame.assign(policy="adjacent_swap")


def swap_coverage(reps: int, requests_list=(1_000, 5_000, 20_000)) -> None:
    from fair_pipeline.position_bias import swap
    k = 30
    w = 1 / np.log2(1 + np.arange(1, k + 1))
    bands = {"2-10": slice(1, 10), "11-20": slice(10, 20), "21-30": slice(20, 30)}
    print(f"\nadjacent_swap, sparse deep clicks (q_o = 0.3 o^-0.7, one adjacent pair swapped per request), {reps}"
          " replications per row: 95% CI coverage among estimable positions ± MC SE | share not estimable")
    print("| requests | rule | " + " | ".join(f"positions {b}" for b in bands) + " |")
    print("|---|---|" + "---|" * len(bands))
    for requests in requests_list:
        zero = np.mean([(f.loc[(f.position != f.original_position) & (f.position > 20), "clicks"] == 0).mean()
                        for f in (swap_cells(np.random.default_rng(i), requests, k) for i in range(20))])
        print(f"| {requests:,} | swapped cells at positions 21-30 without a click: {zero:.0%} | | | |")
        for floor in (0.0, swap.MIN_SWAPPED_CLICKS, 3.0):
            rule = f"pooled rates, >= {floor:g} expected swapped clicks"
            saved, swap.MIN_SWAPPED_CLICKS = swap.MIN_SWAPPED_CLICKS, floor
            rng = np.random.default_rng(requests)
            hit, est = [], []
            try:
                for _ in range(reps):
                    c = estimate_from_aggregates("adjacent_swap", swaps=swap_cells(rng, requests, k), truncate=None)
                    hit.append(((c["ci_low"] <= w) & (w <= c["ci_high"])).to_numpy())
                    est.append(c["weight"].notna().to_numpy())
            finally:
                swap.MIN_SWAPPED_CLICKS = saved
            hit, est = np.array(hit), np.array(est)
            cells = []
            for band in bands.values():
                h, e = hit[:, band], est[:, band]
                per_rep = np.array([hh[ee].mean() for hh, ee in zip(h, e) if ee.any()])  # positions of one draw share it
                cov = per_rep.mean() if per_rep.size else np.nan
                se = per_rep.std(ddof=1) / np.sqrt(per_rep.size) if per_rep.size > 1 else np.nan
                cells.append(f"{cov:.3f} ± {se:.3f} | {1 - e.mean():.2f}")
            print(f"| {requests:,} | {rule} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-reps", type=int, default=10)
    parser.add_argument("--coverage-reps", type=int, default=20)
    parser.add_argument("--swap-reps", type=int, default=0)
    parser.add_argument("--only-swap", action="store_true", help="run only the adjacent-swap coverage study")
    args = parser.parse_args()
    if args.only_swap:
        swap_coverage(args.swap_reps or 1000)
        return
    accuracy(SimulationConfig(), "log2 curve, K=50")
    accuracy(SimulationConfig(slots=20, bias_curve="power", power_eta=0.8, seed=1), "power curve (1/j)^0.8, K=20")
    if args.bin_reps:
        bin_width_study(args.bin_reps)
    if args.coverage_reps:
        coverage(args.coverage_reps)
    if args.swap_reps:
        swap_coverage(args.swap_reps)


if __name__ == "__main__":
    main()
