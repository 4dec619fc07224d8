"""Coverage of `exposure_parity`'s 95% intervals with other per-item totals (the SE) and other df rules, on the same
replications: does a bias-reduced SE, or a df not computed from the same totals, remove the t interval's
over-coverage?

Item clustering. Each item's total on group c's log(E_c / M_c) is own_i - d_c X_i, with a_i and h_i the item's
shares of the group's exposure Σ w and merit Σ click / w, and d_c X_i the exposure it displaces
(`exposure.displacement_coefficients`). Three own parts:

- CR2 (reported): (a_i - h_i) / sqrt(1 - h_i); the benchmark checks its variance and df against `exposure_parity`'s;
- CR2 (exposure share): (a_i - h_i) / sqrt(1 - a_i), the hat value of merit (the clicks) regressed on exposure (the
  design) through the origin instead of the reverse;
- CR3: (a_i - h_i) / (1 - h_i), the leverage-adjusted jackknife of a linear estimator;
- jackknife: log(1 - h_i) - log(1 - a_i), exactly the log ratio minus the log ratio without item i's rows.

(h capped at 0.99, as the estimator caps it.) Each with the df rules of `exposure_df_rules` that do not use the
totals (Bell-McCaffrey with the exposure shares, Kish of the exposure shares, normal), the totals' own effective
number of items with the lone clicks out and bounded by the smallest group's items - 1 ("data", the reported rule,
`exposure_lone_click_df`), twice it ("2 x data"), and (Σ U²)² / Σ U⁴ with the lone clicks left in ("data, whole
Σ U⁴").

    python benchmarks/exposure_variance_rules.py --reps 300 --jobs 1       # the docs' comparison
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import t as student  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.exposure_df_rules import bell_mccaffrey_df, comparison_main, kish_df  # noqa: E402
from benchmarks.exposure_lone_click_df import bounded_df, contrast_dfs, lone_click_fourth  # noqa: E402
from benchmarks.exposure_small_sample_coverage import GROUPS, draw  # noqa: E402
from fair_pipeline.audit.stats.exposure import MAX_LEVERAGE, displacement_coefficients, exposure_parity  # noqa: E402

OWN_PARTS = {  # (a, h) -> own part, h capped in the leverage only, as the estimator does
    "CR2": lambda a, h: (a - h) / np.sqrt(1.0 - np.minimum(h, MAX_LEVERAGE)),
    # the hat value of the ratio as a regression of merit (clicks: the random part) on exposure (the design)
    "CR2 (exposure share)": lambda a, h: (a - h) / np.sqrt(1.0 - np.minimum(a, MAX_LEVERAGE)),
    "CR3": lambda a, h: (a - h) / (1.0 - np.minimum(h, MAX_LEVERAGE)),
    "jackknife": lambda a, h: np.log1p(-np.minimum(h, MAX_LEVERAGE)) - np.log1p(-np.minimum(a, MAX_LEVERAGE)),
}


def item_totals(d: pd.DataFrame, w: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    """(variant -> items × groups totals, items × groups presence, items × groups exposure shares), groups in
    GROUPS' order."""
    g = pd.Index(GROUPS).get_indexer(d["group"])
    item = np.unique(d["item"], return_inverse=True)[1]
    weight = w[d["position"].to_numpy() - 1]
    merit = d["click"].to_numpy() / weight
    shape = (item.max() + 1, GROUPS.size)
    exposure, credit, present = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for target, values in ((exposure, weight), (credit, merit), (present, 1.0)):
        np.add.at(target, (item, g), values)
    a = exposure / np.where(exposure.sum(axis=0) > 0, exposure.sum(axis=0), 1.0)
    h = credit / np.where(credit.sum(axis=0) > 0, credit.sum(axis=0), 1.0)
    n = np.zeros((GROUPS.size, w.size))
    y = np.zeros_like(n)
    np.add.at(n, (g, d["position"].to_numpy() - 1), 1.0)
    np.add.at(y, (g, d["position"].to_numpy() - 1), d["click"].to_numpy(dtype=float))
    coef, mean_w = displacement_coefficients(n, y, w)
    displaced = np.bincount(item, weights=weight - mean_w)[:, None] * coef[None, :]
    return {name: own(a, h) - displaced for name, own in OWN_PARTS.items()}, present > 0, a


def one_replication(seed: int, config) -> list[dict]:
    d = draw(np.random.default_rng(seed), config)
    w = 1.0 / np.log2(1.0 + np.arange(1, config.slots + 1))
    res = exposure_parity(d["position"], d["click"], d["group"], w, clusters=d["item"], reference=GROUPS[0])
    totals, present, shares = item_totals(d, w)
    lone = lone_click_fourth(d, w, GROUPS)
    reported = {f"group {r.group}": (np.log(r.exposure_over_merit), r.se_log, r.df)
                for r in res.per_group.itertuples() if r.estimable}
    reported.update({f"{r.group} / {r.reference}": (r.log_ratio, r.se_log, r.df)
                     for r in res.pairs.itertuples() if np.isfinite(r.log_ratio)})
    contrasts = {f"group {GROUPS[c]}": [(1.0, c)] for c in range(GROUPS.size)}
    contrasts.update({f"{GROUPS[c]} / {GROUPS[0]}": [(1.0, c), (-1.0, 0)] for c in range(1, GROUPS.size)})
    rows = []
    for what, lams in contrasts.items():
        if what not in reported:
            continue
        estimate, se, df = reported[what]
        involved = [c for _, c in lams]
        cap = float(present[:, involved].sum()) - 1.0
        smallest = float(present[:, involved].sum(axis=0).min()) - 1.0
        lam_vector = np.zeros(GROUPS.size)
        for lam, c in lams:
            lam_vector[c] = lam
        design = [(lam, shares[present[:, c], c]) for lam, c in lams]
        row = {"config": config.name, "what": what, "estimate": estimate, "cap": cap,
               "bell_mccaffrey": max(min(bell_mccaffrey_df(design), cap), 1.0),
               "kish": kish_df([s for _, s in design])}
        for name, t in totals.items():
            u = t @ lam_vector
            whole, lone_out = contrast_dfs([t], [cap], lam_vector, lone)
            row[f"se {name}"], row[f"df {name}"] = np.sqrt(float(u @ u)), bounded_df(whole, lone_out, smallest)
            row[f"df whole {name}"] = whole
        # the CR2 totals are the estimator's: same SE and df (a check that the comparison is like for like)
        if not (np.isclose(row["se CR2"], se, rtol=1e-6) and np.isclose(row["df CR2"], df, rtol=1e-6)):
            raise AssertionError(f"{what}: CR2 totals give SE {row['se CR2']}, df {row['df CR2']}; "
                                 f"exposure_parity {se}, {df}")
        rows.append(row)
    return rows


def compare(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(coverage per row and (SE, df) rule with each SE's SE / SD, summary per rule)."""
    error = (raw["estimate"] - raw["truth"]).abs()
    keys = [raw["config"], raw["what"]]
    table = {}
    for name in OWN_PARTS:
        se = raw[f"se {name}"]
        dfs = {"data": raw[f"df {name}"], "2 x data": np.minimum(2 * raw[f"df {name}"], raw["cap"]),
               "data, whole Σ U⁴": raw[f"df whole {name}"], "Bell-McCaffrey": raw["bell_mccaffrey"],
               "Kish": raw["kish"], "normal": np.inf}
        for rule, df in dfs.items():
            table[f"{name} + {rule}"] = (error <= student.ppf(0.975, df) * se).groupby(keys, sort=False).mean()
    table = pd.DataFrame(table)
    summary = pd.DataFrame({"min": table.min(), "max": table.max(), "mean": table.mean(),
                            "rows below 0.93": (table < 0.93).sum(), "rows above 0.97": (table > 0.97).sum()})
    sd = raw.groupby(keys, sort=False)["estimate"].std()
    for name in OWN_PARTS:
        table[f"SE / SD {name}"] = raw.groupby(keys, sort=False)[f"se {name}"].mean() / sd
    table["replications"] = raw.groupby(keys, sort=False).size()
    return table, summary


def main(argv=None) -> None:
    comparison_main(argv, __doc__.splitlines()[0], one_replication, compare, reps=300, jobs=1)


if __name__ == "__main__":
    main()
