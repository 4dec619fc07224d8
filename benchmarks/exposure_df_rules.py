"""Coverage of `exposure_parity`'s 95% t intervals under other degrees-of-freedom rules, on the same replications.

The reported df of a contrast is the effective number of clusters of its totals U, (Σ U²)² / Σ U⁴ with the lone
clicks' part of Σ U⁴ taken out, at most the clusters of the groups involved − 1 and above the whole-Σ U⁴ df only
up to the smallest group's clusters − 1 ("reported"; `exposure_df`). This benchmark keeps each replication's estimate and SE (item
clustering) and swaps only the critical value: 1.5, 2 and 3 times the reported df (3: normal-theory
Satterthwaite; 2: Satterthwaite with Var(U²) bounded by E U⁴ for any kurtosis), each still at most clusters − 1;
a Bell–McCaffrey df from the design (working model: a cluster's total varies in proportion to its share of the
group's exposure, CR2's projection and leverage); the Kish effective number of items of the exposure shares
(Welch-combined over the two groups of a ratio); and the normal critical value. Data: the development
configurations of `exposure_small_sample_coverage` (fresh pools and requests per replication, other seeds).

    python benchmarks/exposure_df_rules.py --reps 400              # the docs' comparison (2 processes)
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import t as student  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.exposure_small_sample_coverage import CONFIGS, GROUPS, draw, truth  # noqa: E402
from fair_pipeline.audit.stats.exposure import MAX_LEVERAGE, exposure_parity  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402

DEVELOPMENT = [name for name in CONFIGS if not name.startswith("hidden")]
SEED = 99_000


def bell_mccaffrey_df(blocks) -> float:
    """(tr B)² / tr B² of the CR2 variance's quadratic form under the working model Var(total_g) ∝ s_g², one block
    (lam, exposure shares s) per group of the contrast (an item belongs to one group)."""
    tr_b = tr_b2 = 0.0
    for lam, s in blocks:
        h = np.minimum(s, MAX_LEVERAGE)
        c = lam / np.sqrt(1.0 - h)
        om = s**2
        b = np.outer(c, c) * (np.diag(om) - np.outer(om, h) - np.outer(h, om) + om.sum() * np.outer(h, h))
        tr_b += np.trace(b)
        tr_b2 += (b**2).sum()
    return tr_b**2 / tr_b2


def kish_df(shares) -> float:
    """Welch combination over the contrast's groups of each group's Kish effective items − 1."""
    v = [float((s**2).sum()) for s in shares]
    k = [1.0 / x for x in v]
    return sum(v) ** 2 / sum(x * x / max(n - 1.0, 1.0) for x, n in zip(v, k))


def one_replication(seed: int, config) -> list[dict]:
    d = draw(np.random.default_rng(seed), config)
    w = 1.0 / np.log2(1.0 + np.arange(1, config.slots + 1))
    res = exposure_parity(d["position"], d["click"], d["group"], w, clusters=d["item"], reference=GROUPS[0])
    exposure = pd.Series(w[d["position"] - 1]).groupby([d["group"], d["item"]]).sum()
    shares = {g: (s / s.sum()).to_numpy() for g, s in exposure.groupby(level=0)}
    rows = []

    def add(what, est, se, df, groups):
        clusters = sum(shares[g].size for _, g in groups)
        rows.append({"config": config.name, "what": what, "estimate": est, "se": se, "reported": df,
                     "clusters": clusters,
                     "bell_mccaffrey": max(min(bell_mccaffrey_df([(lam, shares[g]) for lam, g in groups]),
                                               clusters - 1.0), 1.0),
                     "kish": kish_df([shares[g] for _, g in groups])})

    for r in res.per_group.itertuples():
        if r.estimable:
            add(f"group {r.group}", np.log(r.exposure_over_merit), r.se_log, r.df, [(1.0, r.group)])
    for r in res.pairs.itertuples():
        if np.isfinite(r.log_ratio):
            add(f"{r.group} / {r.reference}", r.log_ratio, r.se_log, r.df, [(1.0, r.group), (-1.0, r.reference)])
    return rows


def rule_dfs(raw: pd.DataFrame) -> dict[str, np.ndarray]:
    cap = raw["clusters"].to_numpy() - 1.0
    reported = raw["reported"].to_numpy()
    below_cap = reported < cap - 1e-9  # a capped df stays at the cap
    scaled = {f"{m:g} x reported": np.where(below_cap, np.minimum(m * reported, cap), reported) for m in (1.5, 2, 3)}
    return {"reported": reported, **scaled, "Bell-McCaffrey (design)": raw["bell_mccaffrey"].to_numpy(),
            "Kish (design)": raw["kish"].to_numpy(), "normal": np.full(len(raw), np.inf)}


def compare(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(coverage per row and rule, summary per rule: range, rows below 0.93 and above 0.97)."""
    z = (raw["estimate"] - raw["truth"]).abs() / raw["se"]
    rows = {}
    for rule, df in rule_dfs(raw).items():
        rows[rule] = (z <= student.ppf(0.975, df)).groupby([raw["config"], raw["what"]], sort=False).mean()
    table = pd.DataFrame(rows)
    summary = pd.DataFrame({"min": table.min(), "max": table.max(), "rows below 0.93": (table < 0.93).sum(),
                            "rows above 0.97": (table > 0.97).sum()})
    return table, summary


def development_rows(task, names, reps: int, jobs: int, truth_reps: int) -> pd.DataFrame:
    """``task(seed, config)``'s rows over ``reps`` replications (seeds SEED + r) of each configuration, with each
    row's estimand (``truth``)."""
    frames = []
    for name in names:
        config = CONFIGS[name]
        raw = pd.DataFrame(replication_rows(partial(task, config=config), [SEED + r for r in range(reps)], jobs))
        frames.append(raw.assign(truth=raw["what"].map(truth(config, truth_reps))))
    return pd.concat(frames, ignore_index=True)


def comparison_main(argv, description: str, task, compare_rows, reps: int, jobs: int) -> None:
    """Parse the arguments, run ``task`` on the development configurations and print ``compare_rows``' tables."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--jobs", type=int, default=jobs)
    parser.add_argument("--truth-reps", type=int, default=400, help="fresh logs pooled for each estimand")
    parser.add_argument("--config", choices=DEVELOPMENT, action="append", help="default: every development one")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    table, summary = compare_rows(development_rows(task, args.config or DEVELOPMENT, args.reps, args.jobs,
                                                   args.truth_reps))
    pd.set_option("display.width", 300)
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    print(summary.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"{args.reps} replications per configuration, item clustering, {time.perf_counter() - t0:.0f} s")


def main(argv=None) -> None:
    comparison_main(argv, __doc__.splitlines()[0], one_replication, compare, reps=400, jobs=2)


if __name__ == "__main__":
    main()
