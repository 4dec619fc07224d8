"""Skewness-aware studentized intervals beside the audit's t interval, on cluster_inference_coverage.py's AUC rows.

Why: under heavy-tailed popularity the audit's CR2 t interval over-covers I_0 - I_1 at FPR 1 (0.972-0.986) while
FPR 0.1 and ΔxAUC sit at 0.946-0.970 (docs/audit_inference.md). A t ratio whose cluster totals are symmetric is
lighter-tailed than t at few df; one whose totals are skewed has one heavy tail. An interval that reads the skew
from the data could be narrow for the first and asymmetric for the second. Candidates, per replication and
contrast (the same draws as cluster_inference_coverage.py: same seed, row and replication), from the contrast's
per-item CR2 totals Ũ_c, each item's part p (its group x label cell: the simulator's items repeat one label) and
its share h_c of the part's rows:

* ``hall_own``: Hall's (1992) monotone skewness correction of the t ratio, T -> T + γT²/3 + γ²T³/27 + γ/6 compared
  with t at the audit's df, with the totals' own skewness γ = ΣŨ³ / (ΣŨ²)^(3/2) (the Edgeworth term of a
  self-normalized sum: P(T <= x) ~ Φ(x) + γ (2x² + 1) φ(x) / 6);
* ``hall_design``: the same with the design's skewness: each part's residuals per unit share r_c = Ũ_c / h_c, their
  moments unweighted over the part's items (every item counts once, so the few popular items do not decide them),
  γ = Σ_p m3_p Σ_{c in p} h_c³ / (Σ_p m2_p Σ_{c in p} h_c²)^(3/2); ``hall_design_2df``: that at twice the df;
* ``resid_boot``: the exchangeable-residual bootstrap with the shares fixed: in each of 399 draws every item of a
  part takes a residual drawn with replacement from the part's r (centred), the part is re-estimated
  (e_c = h_c (r*_c - Σ_{d in p} h_d r*_d)) and T* = Σ_c h_c r*_c / sqrt(Σ e_c² / (1 - h_c)); the interval is
  equal-tailed percentile-t, T within the 2.5% and 97.5% quantiles of T*. A draw whose popular items happened to
  fall near their part's mean keeps its shares, so the reference still knows how far such items can move it.

The query row's totals are the item stream's (its audit SE adds the query stream). Coverage is over the
replications the audit's estimability rule keeps; ``miss_below`` / ``miss_above`` and the verdict error rates are
``resid_boot``'s.

    python benchmarks/skewness_corrected_coverage.py --rows pareto1.3,minority45_pareto1.3 --reps 300 --seed 3
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

_spec = importlib.util.spec_from_file_location("wild", Path(__file__).with_name("wild_bootstrap_coverage.py"))
wild = importlib.util.module_from_spec(_spec)  # the sibling benchmark: each contrast's per-item totals and parts
_spec.loader.exec_module(wild)
cic = wild.cic

BOOTSTRAP_DRAWS = 399
RULES = ("cr2_t", "hall_own", "hall_design", "hall_design_2df", "resid_boot")


def own_skewness(adjusted) -> float:
    """ΣŨ³ / (ΣŨ²)^(3/2): the skewness term of the self-normalized sum of the totals."""
    u = np.asarray(adjusted, dtype=np.float64)
    return float(np.sum(u ** 3) / np.sum(u * u) ** 1.5)


def design_skewness(adjusted, shares, parts) -> float:
    """Skewness of Σ_c h_c r_c with each part's r iid: Σ_p m3_p Σh³ / (Σ_p m2_p Σh²)^(3/2), m_k the part's
    unweighted k-th moment of r = Ũ / h."""
    u, h, parts = (np.asarray(a) for a in (adjusted, shares, parts))
    third = second = 0.0
    for p in np.unique(parts):
        i = parts == p
        r = u[i] / h[i]
        third += np.mean(r ** 3) * np.sum(h[i] ** 3)
        second += np.mean(r * r) * np.sum(h[i] ** 2)
    return float(third / second ** 1.5)


def hall_bounds(crit, gamma) -> tuple[np.ndarray, np.ndarray]:
    """(low, high): the t ratios T with |g(T)| <= crit, g(T) = T + γT²/3 + γ²T³/27 + γ/6 (Hall 1992; increasing,
    g(T) = ((1 + aT)³ - 1) / (3a) + γ/6 with a = γ/3, so it inverts in closed form)."""
    crit, gamma = np.broadcast_arrays(np.asarray(crit, dtype=np.float64), np.asarray(gamma, dtype=np.float64))
    a = gamma / 3.0
    tiny = np.abs(a) < 1e-12
    safe = np.where(tiny, 1.0, a)
    out = []
    for z in (-crit, crit):
        shifted = z - gamma / 6.0
        out.append(np.where(tiny, shifted, (np.cbrt(1.0 + 3.0 * safe * shifted) - 1.0) / safe))
    return out[0], out[1]


def residual_bootstrap_t(adjusted, shares, parts, rng, draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
    """(draws,) T* of the exchangeable-residual bootstrap with the shares fixed (module docstring)."""
    u, h, parts = (np.asarray(a) for a in (adjusted, shares, parts))
    error, variance = np.zeros(draws), np.zeros(draws)
    for p in np.unique(parts):
        i = np.flatnonzero(parts == p)
        r = u[i] / h[i]
        r = r - r.mean()
        star = r[rng.integers(0, i.size, (draws, i.size))]
        part_error = star @ h[i]
        e = h[i] * (star - part_error[:, None])
        error += part_error
        variance += (e * e / (1.0 - h[i])).sum(axis=1)
    return error / np.sqrt(variance)


def one_replication(args) -> list[dict]:
    config, rep, seed = args
    rng = np.random.default_rng([seed, rep, list(cic.CONFIGS).index(config), 77])
    out = []
    for row, u, share, part in wild.contrast_totals(config, rep, seed):
        if row["estimable"]:
            row["gamma_own"] = own_skewness(u)
            row["gamma_design"] = design_skewness(u, share, part)
            star = residual_bootstrap_t(u, share, part, rng)
            row["boot_low"], row["boot_high"] = np.quantile(star, [0.025, 0.975])
        out.append(row)
    return out


def rule_bounds(g: pd.DataFrame) -> dict:
    """Per rule, (low, high) bounds on the t ratio (estimate - truth) / SE of the kept replications."""
    crit, crit2 = critical_value(0.95, g["df"].to_numpy()), critical_value(0.95, 2 * g["df"].to_numpy())
    return {"cr2_t": (-crit, crit), "hall_own": hall_bounds(crit, g["gamma_own"].to_numpy()),
            "hall_design": hall_bounds(crit, g["gamma_design"].to_numpy()),
            "hall_design_2df": hall_bounds(crit2, g["gamma_design"].to_numpy()),
            "resid_boot": (g["boot_low"].to_numpy(), g["boot_high"].to_numpy())}


def coverage(raw: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (config, name), g in raw[raw["estimable"]].groupby(["config", "statistic"], sort=False):
        t = (g["error"] / g["se"]).to_numpy()
        row = {"config": config, "statistic": name, "reps": len(g)}
        for rule, (low, high) in rule_bounds(g).items():
            row[rule] = np.mean((t >= low) & (t <= high))
        low, high = rule_bounds(g)["resid_boot"]
        row["boot_se"] = np.sqrt(row["resid_boot"] * (1 - row["resid_boot"]) / len(g))
        # the interval is [estimate - high SE, estimate - low SE]: it lies below the truth when t < low
        row["miss_below"], row["miss_above"] = np.mean(t < low), np.mean(t > high)
        row["median_gamma_design"] = g["gamma_design"].median()
        varies = len(g) > 2 and np.std(t) > 0 and g["gamma_own"].std() > 0
        row["corr_t_gamma_own"] = np.corrcoef(t, g["gamma_own"])[0, 1] if varies else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def boot_verdict_errors(raw: pd.DataFrame) -> pd.DataFrame:
    """cluster_inference_coverage's verdict error rates, of the residual bootstrap's interval."""
    kept = raw[raw["estimable"]].copy()
    kept["cr2_z"] = critical_value(0.95) * kept["se"]
    kept["ci_below"], kept["ci_above"] = kept["boot_high"] * kept["se"], -kept["boot_low"] * kept["se"]
    return cic.verdict_errors(kept).drop(columns=["tost90_eq|δ", "tost90_eq|-δ"])


def main(argv=None) -> None:
    wild.run_study(argv, __doc__.split("\n")[0], one_replication, [coverage, boot_verdict_errors], default_reps=300)


if __name__ == "__main__":
    main()
