"""Monte Carlo coverage of model selection's paired cost difference for candidates at the pipeline's DEFAULT threshold
rule, a selection rate (each candidate selects the top share q = 0.4 of the held-out examples, its threshold chosen
from the same rows), clustered by item.

Every replication draws fresh items and heavy-tailed impressions exactly as the ``selection_*`` rows of
`cluster_inference_coverage.py` (its `draw`: Pareto(1.3) popularity, one row per impression), and compares the same
two candidates (the merit, and the merit + W_SHIFT in group "1") by the same metric, but each at its own 40%
selection-rate threshold. The truth is in closed form: each candidate's population threshold solves
Σ_{g,y} P(g) P(y | g) S_{g,y}(t) = q over the simulator's normal-plus-uniform score components (impressions are
independent of the item, so the impression-weighted population is the item population), and the cost difference
is the metric's at the rates there.

Intervals per replication, over the replications the pipeline calls estimable (>= MIN_DISAGREEING items decide
differently): ``reported`` (what `paired_cost_difference` reports: the cells' weighted-binomial intervals at the
estimated thresholds, half-widths scaled by the thresholds' share of the SE, `paired_binomial`), ``floor_t`` (CR2
of the influence with the threshold term, floored by the exchangeable-items variance, t at its df: the t interval
the pipeline falls back on where the binomial one does not apply), ``cr2_t`` (CR2 alone, t at its df) and, with
``--resample``, ``resampled`` (`benchmarks/selection_resample.py`: items resampled into the observed sizes,
thresholds re-chosen, the basic bootstrap interval). ``above`` / ``below``: intervals entirely above / below the
truth; ``width`` the median width beside ``sd_estimate``; ``cov_se`` the binomial MC SE of the reported coverage.
A second table gives the verdict error rates of the reported interval (`cluster_inference_coverage.verdict_errors`'
shifts: each draw's error placed at a true difference of 0 and ±δ, δ = 3 x the median reported half-width / 1.96).

    python benchmarks/selection_rate_coverage.py --reps 500 --seed 0
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

from fair_pipeline.audit.stats.small_sample import cluster_robust_interval  # noqa: E402
from fair_pipeline.ingestion.simulation_config import SimulationConfig  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402
from fair_pipeline.selection.elicitation.paired import (candidate_parts, clustered_interval, clustered_parts,  # noqa: E402
                                                        group_codes, paired_cost_difference)
from selection_resample import resampled_costs  # noqa: E402  (beside this script)

_spec = importlib.util.spec_from_file_location("cic", Path(__file__).with_name("cluster_inference_coverage.py"))
cic = importlib.util.module_from_spec(_spec)  # the sibling benchmark: its draws, metric and score components
_spec.loader.exec_module(cic)

SELECTION_RATE = 0.4  # the pipeline's default (selection.assets)
ROWS = ("selection_pareto1.3_2000", "selection_pareto1.3_4000")
LABELS = ["0", "1"]


def true_difference(rate: float = SELECTION_RATE) -> float:
    """cost(A) - cost(W) at the population's selection-rate thresholds (module doc)."""
    cfg = SimulationConfig()
    comp = {c: (cic.ac._Component(cfg.relevance_effect + cfg.group_effect * c, cfg.relevance_sd, 2.0 * (1 - c)),
                cic.ac._Component(cfg.group_effect * c, cfg.relevance_sd, 1.0 * (1 - c))) for c in (0, 1)}
    share = {0: 1 - cfg.p_group, 1: cfg.p_group}
    relevant = {0: cfg.p_relevant_group0, 1: cfg.p_relevant_group1}

    def rates(shift: float) -> np.ndarray:
        def selected(t):
            return sum(share[c] * (relevant[c] * (1 - comp[c][0].cdf(t - shift * c))
                                   + (1 - relevant[c]) * (1 - comp[c][1].cdf(t - shift * c))) for c in (0, 1))
        t = brentq(lambda t: selected(t) - rate, -5.0, 10.0)
        return np.array([[1 - comp[c][0].cdf(t - shift * c), comp[c][1].cdf(t - shift * c)] for c in (0, 1)])

    return float(cic.SELECTION_METRIC(rates(0.0)) - cic.SELECTION_METRIC(rates(cic.W_SHIFT)))


def one_replication(args) -> dict:
    config, rep, seed, resample = args
    d = cic.draw(config, [seed, rep, list(cic.CONFIGS).index(config)])
    g = np.where(d["group"] == "0", "0", "1")
    held = pd.DataFrame({"group": g, "n_pos": d["label"].astype(int), "n_neg": (~d["label"]).astype(int)})
    a, w = d["score"], d["score"] + cic.W_SHIFT * (g == "1")
    out = paired_cost_difference(cic.SELECTION_METRIC, held, a, w, LABELS, selection_rate=SELECTION_RATE,
                                 clusters=d["item"])
    n_items = int(np.unique(d["item"]).size)
    parts = [candidate_parts(cic.SELECTION_METRIC, held, s, LABELS, selection_rate=SELECTION_RATE, n_clusters=n_items)[1]
             for s in (a, w)]
    totals, shares = clustered_parts(parts[0] - parts[1], held, LABELS, d["item"])
    cr2 = cluster_robust_interval(out.estimate, totals, shares)
    floor = clustered_interval(out.estimate, parts[0] - parts[1], held, LABELS, d["item"])
    low = high = np.nan
    if resample:
        resampled = resampled_costs(cic.SELECTION_METRIC, held, group_codes(held["group"], LABELS), {"a": a, "w": w},
                                    selection_rate=SELECTION_RATE, clusters=d["item"], seed=rep)
        low, high, _, _ = resampled.difference("a", "w", out.estimate)
    return {"config": config, "rep": rep, "estimate": out.estimate, "estimable": bool(np.isfinite(out.se)),
            "disagreeing": out.disagreeing, "reported": (out.ci_low, out.ci_high), "se": out.se,
            "floor_t": (floor.ci_low, floor.ci_high), "cr2_t": (cr2.ci_low, cr2.ci_high), "resampled": (low, high)}


def coverage(raw: pd.DataFrame, truth: float) -> pd.DataFrame:
    rows = []
    for config, g in raw.groupby("config", sort=False):
        kept = g[g["estimable"]]
        row = {"config": config, "truth": truth, "reps": len(kept), "not_estimable": 1 - len(kept) / len(g),
               "sd_estimate": kept["estimate"].std(ddof=1)}
        for method in ("reported", "floor_t", "cr2_t", "resampled"):
            low, high = _ends(kept, method)
            if np.isnan(low).all():  # not computed (resampling off)
                continue
            row[method] = float(np.mean((low <= truth) & (truth <= high)))
            row[f"{method}_above"] = float(np.mean(low > truth))
            row[f"{method}_below"] = float(np.mean(high < truth))
            row[f"{method}_width"] = float(np.median(high - low))
        row["cov_se"] = float(np.sqrt(row["reported"] * (1 - row["reported"]) / max(len(kept), 1)))
        rows.append(row)
    return pd.DataFrame(rows)


def _ends(kept: pd.DataFrame, method: str) -> tuple[np.ndarray, np.ndarray]:
    return (kept[method].map(lambda x: x[0]).to_numpy(dtype=float), kept[method].map(lambda x: x[1]).to_numpy(dtype=float))


def verdict_errors(raw: pd.DataFrame, truth: float) -> pd.DataFrame:
    """The reported interval's verdict errors (module doc) with ``max_err`` and its binomial MC SE."""
    rows = []
    for config, g in raw.groupby("config", sort=False):
        kept = g[g["estimable"]]
        low, high = _ends(kept, "reported")
        estimate = kept["estimate"].to_numpy()
        below, above, err = estimate - low, high - estimate, estimate - truth
        delta = 3.0 * float(np.median(high - low)) / 2 / 1.96
        out = {"config": config, "reps": len(kept), "δ": delta}
        for label, theta in (("0", 0.0), ("δ", delta), ("-δ", -delta)):
            verdict, _ = cic._interval_verdicts(theta + err, below, above, delta)
            if label == "0":
                out["larger|gap=0"] = float(np.mean(verdict == cic.LARGER))
            else:
                out[f"equivalent|gap={label}"] = float(np.mean(verdict == cic.EQUIVALENT))
                out[f"larger|gap={label}"] = float(np.mean(verdict == cic.LARGER))
        worst = max(v for k, v in out.items() if "|gap=" in k)
        out["max_err"], out["err_se"] = worst, float(np.sqrt(max(worst, 1e-9) * (1 - worst) / max(len(kept), 1)))
        rows.append(out)
    return pd.DataFrame(rows)


def _as_rows(task) -> list[dict]:
    return [one_replication(task)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--resample", action="store_true", help="also the resampled interval (1,000 resamples a draw)")
    a = ap.parse_args(argv)
    tasks = [(c, r, a.seed, a.resample) for c in a.rows.split(",") for r in range(a.reps)]
    t0, c0 = time.time(), time.process_time()
    found = replication_rows(_as_rows, tasks, a.jobs, chunks_per_job=16)
    raw, truth = pd.DataFrame(found), true_difference()
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        for table in (coverage(raw, truth), verdict_errors(raw, truth)):
            print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"), end="\n\n")
    print(f"{len(tasks)} replications in {time.time() - t0:.0f} s wall ({a.jobs} processes; parent CPU "
          f"{time.process_time() - c0:.0f} s)")


if __name__ == "__main__":
    main()
