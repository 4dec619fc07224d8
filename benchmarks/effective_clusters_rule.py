"""Would a "not estimable: too few effective items" rule per contrast bring every coverage row into 93-97%?

Why: under heavy-tailed popularity the audit's CR2 t interval over-covers I_0 - I_1 at FPR 1 (0.972-0.986), and
the over-coverage sits in the draws with the fewest effective clusters (coverage 0.98-1.00 in the quarter of draws
with the smallest df; docs/audit_inference.md). A rule that calls a contrast "not estimable" when its df is below
k drops exactly those draws. This measures, on cluster_inference_coverage.py's AUC and pairwise rows (the same
draws: same seed, row and replication), for each candidate measure of effective items and each threshold k, the
share of the replications the audit keeps that the rule would drop and the CR2 t coverage over the rest:

* ``df``: the audit's df (the smaller of the totals' effective clusters and the parts' design df);
* ``df_totals``: the totals' effective clusters (ΣŨ²)² / ΣŨ⁴ alone;
* ``df_design``: the parts' Welch-combined design df alone (depends on the items' shares, not on their residuals;
  NaN for the pairwise rows, which then fall back to ``df``).

``in_band``: rows whose kept coverage lies in [0.93, 0.97] (rows with fewer than 100 kept replications are not
counted; ``rows``: the rows counted); ``worst_low`` / ``worst_high``: the lowest and highest kept coverage.

    python benchmarks/effective_clusters_rule.py --rows pareto1.3,minority45_pareto1.3 --reps 100 --seed 3
    python benchmarks/effective_clusters_rule.py --from-json raw.json   # cluster_inference_coverage.py --json output
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fair_pipeline.platform.replications import replication_rows  # noqa: E402

_spec = importlib.util.spec_from_file_location("cic", Path(__file__).with_name("cluster_inference_coverage.py"))
cic = importlib.util.module_from_spec(_spec)  # the sibling benchmark: its draws, intervals and truths
_spec.loader.exec_module(cic)

MEASURES = ("df", "df_totals", "df_design")
THRESHOLDS = (3, 4, 5, 6, 8, 10)
ROWS = ("pareto1.1,pareto1.3,pareto1.5,pareto2.5,minority30,minority45,minority60,minority45_pareto1.3,"
        "query_pareto1.3,pairwise_fresh")
BAND = (0.93, 0.97)
MIN_KEPT = 100


def kept_coverage(raw: pd.DataFrame, measure: str, k: float) -> pd.DataFrame:
    """Per row: of the replications the audit keeps, the share with ``measure`` >= k and their CR2 t coverage."""
    rows = []
    for (config, name), g in raw.groupby(["config", "statistic"], sort=False):
        if name.endswith("queries only"):
            continue
        g = g[g["estimable"].astype(bool) & g["cr2_t"].notna()]
        if g.empty:
            continue
        value = g[measure].where(g[measure].notna(), g["df"]).to_numpy(dtype=float)
        keep = value >= k
        covered = (np.abs(g["estimate"].to_numpy() - cic.truths(config)[name]) <= g["cr2_t"].to_numpy())[keep]
        cov = float(covered.mean()) if keep.any() else np.nan
        rows.append({"config": config, "statistic": name, "estimable": len(g), "dropped": float(1 - keep.mean()),
                     "kept": int(keep.sum()), "coverage": cov,
                     "cov_se": float(np.sqrt(cov * (1 - cov) / keep.sum())) if keep.any() else np.nan})
    return pd.DataFrame(rows)


def summary(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per measure and threshold: rows in band, worst coverages, largest share dropped; the per-row detail)."""
    lines, detail = [], []
    for measure in MEASURES:
        for k in (0, *THRESHOLDS):
            t = kept_coverage(raw, measure, k)
            counted = t[t["kept"] >= MIN_KEPT]
            inside = counted["coverage"].between(*BAND)
            lines.append({"measure": measure, "k": k, "rows": len(counted), "in_band": int(inside.sum()),
                          "worst_low": counted["coverage"].min(), "worst_high": counted["coverage"].max(),
                          "max_dropped": t["dropped"].max(), "out_of_band": "; ".join(
                              f"{r.config} {r.statistic} {r.coverage:.3f}" for r in counted[~inside].itertuples())})
            detail.append(t.assign(measure=measure, k=k))
    return pd.DataFrame(lines), pd.concat(detail, ignore_index=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default=ROWS)
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--from-json", default=None, help="cluster_inference_coverage.py --json output: use its raw rows")
    ap.add_argument("--detail", default=None, help="comma-separated measure:k whose per-row coverage to print")
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as fh:
            raw = pd.DataFrame(json.load(fh)["raw"])
    else:
        tasks = [(c, r, a.seed) for c in a.rows.split(",") for r in range(a.reps)]
        raw = pd.DataFrame(replication_rows(cic.one_replication, tasks, a.jobs, chunks_per_job=16))
    lines, detail = summary(raw)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 200):
        print(lines.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        for spec in filter(None, (a.detail or "").split(",")):
            measure, k = spec.split(":")
            print(f"\n{measure} >= {k}:")
            shown = detail[(detail["measure"] == measure) & (detail["k"] == float(k))].drop(columns=["measure", "k"])
            print(shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
