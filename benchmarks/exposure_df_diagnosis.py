"""Is a row of `exposure_small_sample_coverage` off because of its SE or its df? And two df rules from a working model.

Same configurations, draws (replication seeds ``seed * 1_000_003 + r``) and estimands as
`exposure_small_sample_coverage` (two-way clustering, the reported SE and df). Per row (configuration, estimate):

- ``se_sd`` (mean SE / SD of the estimates) and ``var_mse`` (mean SE² / mean squared error): is the SE right?
- ``needed``: the critical value the draws needed (95th percentile of |estimate - truth| / SE) against ``t_used``,
  the t critical value at the row's median reported df: with a right SE, needed < t_used means the df is too small;
- ``q1`` .. ``q4``: coverage of the reported interval in the quarters of the replications ranked by their df (the
  df comes from the same cluster totals as the SE, so the wide critical values fall on the draws whose SE is
  already large);
- two rules whose df does not move with the draw's error, from a working model of each item's total on its group's
  log ratio, σ_i² = α_g s_i² + c_i: s_i the item's share of its group's impressions (the between-item part; α_g
  fitted per group by moments, Σ (T_i² - c_i) / Σ s_i², T_i the item's CR2 total without the exposure it displaces),
  c_i the Bernoulli clicks' own variance (CR2-scaled Σ click / w² over the group's merit sum squared), plus the
  displaced exposure's part (X_i λ·d)² for every item. ``satt``: Satterthwaite's df (Σ σ²)² / Σ σ⁴ of the
  contrast, capped at its items - 1; ``exact``: the 97.5% point of the CR2-studentized error under
  U_i ~ N(0, σ_i²) (2,000 fixed normal draws: the self-normalization that a df does not see).

    python benchmarks/exposure_df_diagnosis.py --reps 400 --seed 0 --seed 7 --jobs 1
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

CONTRASTS = {f"group {g}": np.eye(3)[i] for i, g in enumerate(GROUPS)}
CONTRASTS.update({f"{g} / {GROUPS[0]}": np.eye(3)[i] - np.eye(3)[0] for i, g in enumerate(GROUPS) if i})
NORMALS = np.random.default_rng(12345).standard_normal((2000, 600))


def working_model(d: pd.DataFrame, totals: np.ndarray):
    """Per item (the totals' rows, in factorized order): group, σ² of its own total, merit share h, displaced
    exposure X; and the groups' displacement coefficients d (`exposure.displacement_coefficients`)."""
    g_imp = pd.Index(GROUPS).get_indexer(d["group"])
    w, y = d["w"].to_numpy(), d["click"].to_numpy(np.float64)
    codes = pd.factorize(d["item"])[0]
    g = np.zeros(codes.max() + 1, dtype=np.int64)
    g[codes] = g_imp
    per = lambda v: np.bincount(codes, weights=v)  # noqa: E731
    n, sm, sm2, excess = per(np.ones_like(w)), per(y / w), per(y / w**2), per(w - w.mean())
    big_n, big_w = np.bincount(g_imp, minlength=3), np.bincount(g_imp, weights=w, minlength=3)
    big_m = np.bincount(g_imp, weights=y / w, minlength=3)
    disp = np.where(big_w > 0, big_n / big_n.sum() / np.where(big_w > 0, big_w, 1.0), 0.0)
    merit = np.where(big_m[g] > 0, big_m[g], 1.0)
    h = sm / merit
    lev2 = 1.0 / (1.0 - np.minimum(h, MAX_LEVERAGE))
    click_var, share = lev2 * sm2 / merit**2, n / big_n[g]
    own = totals[np.arange(g.size), g] + excess * disp[g]
    sigma2 = np.zeros_like(own)
    for k in range(3):
        m = g == k
        alpha = max(float(np.sum(own[m] ** 2 - click_var[m])), 0.0) / max(float(np.sum(share[m] ** 2)), 1e-300)
        sigma2[m] = alpha * share[m] ** 2 + click_var[m]
    return g, sigma2, h, excess, disp


def satterthwaite_rule(model, lam) -> float:
    g, sigma2, _, excess, disp = model
    v = lam[g] ** 2 * sigma2 + (excess * float(lam @ disp)) ** 2
    cap = np.isin(g, np.flatnonzero(lam)).sum() - 1.0
    return max(min(v.sum() ** 2 / np.sum(v**2), cap), 1.0) if v.sum() > 0 else 1.0


def exact_rule(model, lam) -> float:
    """Critical value: 95th percentile of |e| / CR2 SE with U_i ~ N(0, σ_i²), residuals U_i - h_i e_g."""
    g, sigma2, h, _, _ = model
    keep = np.isin(g, np.flatnonzero(lam))
    g, sigma2, h = g[keep], sigma2[keep], h[keep]
    u = NORMALS[:, : g.size] * np.sqrt(sigma2)[None, :]
    e = np.zeros((u.shape[0], 3))
    for k in np.flatnonzero(lam):
        e[:, k] = u[:, g == k].sum(axis=1)
    resid = (u - h[None, :] * e[:, g]) / np.sqrt(1.0 - np.minimum(h, MAX_LEVERAGE))[None, :] * lam[g][None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.abs(e @ lam) / np.sqrt((resid**2).sum(axis=1))
    return float(np.nanquantile(stat, 0.95))


def one_replication(seed: int, config) -> list[dict]:
    d = draw(np.random.default_rng(seed), config)
    w = 1.0 / np.log2(1.0 + np.arange(1, config.slots + 1))
    res = exposure_parity(d["position"], d["click"], d["group"], w, clusters={"item": d["item"], "request": d["request"]},
                          reference=GROUPS[0], keep_totals=True)
    model = working_model(d, res.cluster_totals["item"].reindex(columns=GROUPS).fillna(0.0).to_numpy())
    found = {f"group {r.group}": (np.log(r.exposure_over_merit), r.se_log, r.df) for r in res.per_group.itertuples()}
    found.update({f"{r.group} / {r.reference}": (r.log_ratio, r.se_log, r.df) for r in res.pairs.itertuples()})
    rows = []
    for what, (est, se, df) in found.items():
        if np.isfinite(est) and np.isfinite(se):
            rows.append({"config": config.name, "what": what, "estimate": est, "se": se, "df": df,
                         "df_satt": satterthwaite_rule(model, CONTRASTS[what]),
                         "crit_exact": exact_rule(model, CONTRASTS[what])})
    return rows


def diagnose(raw: pd.DataFrame) -> pd.DataFrame:
    z = (raw["estimate"] - raw["truth"]).abs() / raw["se"]
    raw = raw.assign(z=z, err=raw["estimate"] - raw["truth"], covered=z <= student.ppf(0.975, raw["df"]),
                     satt=z <= student.ppf(0.975, raw["df_satt"]), exact=z <= raw["crit_exact"])
    keys = ["seed", "config", "what"]
    raw["quarter"] = raw.groupby(keys, sort=False)["df"].transform(
        lambda s: np.ceil(4 * s.rank(method="first") / s.size).astype(int))
    by = raw.groupby(keys, sort=False)
    out = by.agg(reps=("z", "size"), reported=("covered", "mean"), satt=("satt", "mean"), exact=("exact", "mean"),
                 needed=("z", lambda s: np.quantile(s, 0.95)), median_df=("df", "median"),
                 median_df_satt=("df_satt", "median"), se=("se", "mean"), sd=("estimate", "std"))
    out.insert(2, "mc_se", np.sqrt(out["reported"] * (1 - out["reported"]) / out["reps"]))
    out["t_used"] = student.ppf(0.975, out["median_df"])
    out["se_sd"] = out.pop("se") / out.pop("sd")
    out["var_mse"] = by.apply(lambda x: np.mean(x["se"] ** 2) / np.mean(x["err"] ** 2))
    quarters = raw.groupby(keys + ["quarter"], sort=False)["covered"].mean().unstack().add_prefix("q")
    return out.join(quarters).reset_index()


def summary(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for seed, part in list(table.groupby("seed")) + [("all", table)]:
        for rule in ("reported", "satt", "exact"):
            c = part[rule]
            rows.append({"seed": seed, "rule": rule, "low": c.min(), "high": c.max(), "below_0.93": int((c < 0.93).sum()),
                         "above_0.97": int((c > 0.97).sum()), "mean": c.mean()})
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seed", type=int, action="append", help="default: 0; repeat for several seeds")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--truth-reps", type=int, default=1000)
    parser.add_argument("--config", choices=list(CONFIGS), action="append", help="default: every configuration")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    raws = []
    for name in args.config or list(CONFIGS):
        truths = truth(CONFIGS[name], args.truth_reps)
        for seed in args.seed or [0]:
            task = partial(one_replication, config=CONFIGS[name])
            raw = pd.DataFrame(replication_rows(task, [seed * 1_000_003 + r for r in range(args.reps)], args.jobs))
            raws.append(raw.assign(seed=seed, truth=raw["what"].map(truths)))
        print(f"{name}: done at {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    table = diagnose(pd.concat(raws, ignore_index=True))
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 500)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(summary(table).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"{args.reps} replications per configuration and seed, truth from {args.truth_reps} fresh logs each, "
          f"{time.perf_counter() - t0:.0f} s ({time.process_time():.0f} CPU-s)")


if __name__ == "__main__":
    main()
