"""Would the popularity's tail index tell which AUC contrasts the audit's t interval over-covers?

Why: under Pareto(a < 2) popularity an item's influence total (its share of the rows times its residual) has
infinite variance, and the self-normalised sum of such totals tends to a non-normal limit (Logan, Mallows, Rice &
Shepp 1973): lighter-tailed than the normal when the totals are symmetric (I_0 - I_1 at FPR 1, where the audit's
t interval covers 0.97-0.99), heavier on one side when they are skewed (FPR 0.1, ΔxAUC). The tail index is the
design's: it is estimable from every item's impressions, which do not move with the draw's error. This measures,
on cluster_inference_coverage.py's AUC rows (the same draws: same seed, row and replication), per contrast:

* ``hill``: Hill's estimate of the tail index of the impressions per item (all items of the draw, the largest
  ``HILL_SHARE`` of them), 1 / mean(log(x_(i) / x_(k+1)), i <= k);
* ``covered``: whether the audit's CR2 t interval covers the truth;
* ``rep_ratio``: the SE with each cluster's leverage factor for an item whose rows repeat one label,
  1 / sqrt(1 - 2 h + Σ_p h²) in place of CR2's 1 / sqrt(1 - h) (h: the item's share of its part's rows, Σ_p h²
  over the part), over the CR2 SE (the item stream's; the query row's audit SE is scaled by it);

and the coverage of four rules on the replications the audit keeps: ``not_est_fpr1`` (I_0 - I_1 at FPR 1 is not
estimable when hill < ``TAIL_THRESHOLD``: its ``fpr1_dropped`` share and the kept coverage), ``rep_z`` / ``rep_t``
(the repeated-label SE with a normal / the audit's t critical value, for FPR 1 where hill < ``TAIL_THRESHOLD``; the
audit's interval elsewhere), ``t_2df`` (the audit's SE with t at twice its df, for the same contrasts), with
``rep_z``'s intervals lying entirely below / above the truth (``miss_above``: the audit's above it, ``t_2df_miss_above``: ``t_2df``'s, the side
of the verdict "larger than δ" at a true gap of +δ).

    python benchmarks/tail_index_rule.py --rows pareto1.3,minority45_pareto1.3 --reps 100 --seed 3
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fair_pipeline.audit.stats.small_sample import critical_value  # noqa: E402

_spec = importlib.util.spec_from_file_location("wbc", Path(__file__).with_name("wild_bootstrap_coverage.py"))
wbc = importlib.util.module_from_spec(_spec)  # the sibling benchmark: per-item totals of the coverage draws
_spec.loader.exec_module(wbc)
cic = wbc.cic

HILL_SHARE = 0.1
TAIL_THRESHOLD = 2.0  # below: an item's total has infinite variance
FPR1 = "I0-I1(1)"


def hill_tail_index(sizes, share: float = HILL_SHARE) -> float:
    """Hill's estimate of a Pareto tail index from the largest ``share`` of ``sizes`` (at least 10 of them)."""
    x = np.sort(np.asarray(sizes, dtype=np.float64))[::-1]
    k = max(10, int(share * x.size))
    if x.size <= k:
        raise ValueError(f"Hill's estimate needs more than {k} sizes, got {x.size}")
    mean_log = float(np.mean(np.log(x[:k] / x[k])))
    return np.inf if mean_log == 0.0 else 1.0 / mean_log


def repeated_label_variance(adjusted, shares, parts) -> float:
    """Σ u² / (1 - 2h + Σ_p h²) with u = Ũ sqrt(1 - h) the raw totals: the leverage of an item whose rows share one
    label (its residual shrinks by 1 - 2h + Σ_p h², not 1 - h, when its part's mean is estimated)."""
    adjusted, h = np.asarray(adjusted, dtype=np.float64), np.asarray(shares, dtype=np.float64)
    raw = adjusted ** 2 * (1.0 - h)
    s2 = np.zeros(h.size)
    for p in np.unique(parts):
        s2[parts == p] = np.sum(h[parts == p] ** 2)
    return float(np.sum(raw / (1.0 - 2.0 * h + s2)))


def one_replication(args) -> list[dict]:
    config, rep, seed = args
    d = cic.draw(config, [seed, rep, list(cic.CONFIGS).index(config)])
    hill = hill_tail_index(np.bincount(d["item"]))
    out = []
    for row, u, share, part in wbc.contrast_totals(config, rep, seed):
        item_var = float(np.sum(u ** 2))
        row["hill"] = hill
        row["rep_ratio"] = np.sqrt(repeated_label_variance(u, share, part) / item_var) if item_var > 0 else np.nan
        out.append(row)
    return out


def rule_coverage(raw: pd.DataFrame, threshold: float = TAIL_THRESHOLD) -> pd.DataFrame:
    rows = []
    for (config, name), g in raw[raw["estimable"].astype(bool)].groupby(["config", "statistic"], sort=False):
        t = (g["error"] / g["se"]).to_numpy()
        df = g["df"].to_numpy()
        covered = np.abs(t) <= critical_value(0.95, df)
        heavy = (g["hill"].to_numpy() < threshold) & (name == FPR1)
        t_rep = t / g["rep_ratio"].to_numpy()
        rep_z = np.where(heavy, np.abs(t_rep) <= critical_value(0.95), covered)
        rep_t = np.where(heavy, np.abs(t_rep) <= critical_value(0.95, df), covered)
        t_2df = np.where(heavy, np.abs(t) <= critical_value(0.95, 2 * df), covered)
        kept = covered[~heavy]
        rows.append({"config": config, "statistic": name, "reps": len(g), "median_hill": g["hill"].median(),
                     "hill_below": float(np.mean(g["hill"] < threshold)), "cr2_t": covered.mean(),
                     "cov_se": np.sqrt(covered.mean() * (1 - covered.mean()) / len(g)),
                     "miss_above": float(np.mean(t > critical_value(0.95, df))),
                     "fpr1_dropped": heavy.mean(), "not_est_fpr1": kept.mean() if kept.size else np.nan,
                     "median_rep_ratio": g["rep_ratio"].median(), "rep_z": rep_z.mean(), "rep_t": rep_t.mean(),
                     "t_2df": t_2df.mean(), "t_2df_miss_above": float(np.mean(heavy & (t > critical_value(0.95, 2 * df)))),
                     "rep_z_miss_below": float(np.mean(heavy & (-t_rep > critical_value(0.95)))),
                     "rep_z_miss_above": float(np.mean(heavy & (t_rep > critical_value(0.95))))})
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    wbc.run_study(argv, __doc__.split("\n")[0], one_replication, [rule_coverage], default_reps=300)


if __name__ == "__main__":
    main()
