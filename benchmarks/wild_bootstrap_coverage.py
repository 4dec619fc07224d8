"""The restricted wild cluster bootstrap beside the audit's t interval, on cluster_inference_coverage.py's AUC rows.

Why: under heavy-tailed popularity the audit's CR2 t interval covers I_0 - I_1 at FPR 1 0.972-0.986 while FPR 0.1
and ΔxAUC sit at 0.946-0.970 (docs/audit_inference.md): no degrees-of-freedom rule separates them, because the t
reference describes only how much the variance estimate varies, not how it moves with the error. A wild bootstrap
of the clusters' influence totals keeps that dependence: each draw flips whole clusters, so a draw that moves a
popular item moves its variance too.

Per replication (the same draws as cluster_inference_coverage.py: same seed, row and replication), for each AUC
contrast, from its per-cluster CR2 totals Ũ_c, each cluster's part p (the cell, group x label, holding its rows: the
simulator's items repeat one label, which the script checks) and share h_c of its part's rows:

* raw totals u_c = Ũ_c sqrt(1 - h_c): each part's estimate is a share-weighted mean, u_c = h_c (x_c - θ̂_p) up to
  the contrast's sign;
* ``wcu`` (unrestricted): draws w_c in {-1, 1}; the bootstrap error Σ w_c u_c, residuals w_c u_c - h_c Σ_{d in p}
  w_d u_d (each part re-estimated), their CR2 variance V* = Σ e_c² / (1 - h_c), T* = Σ w_c u_c / sqrt(V*); the
  interval estimate ± q SE with q the 95% quantile of |T*|;
* ``wcr`` (restricted, MacKinnon & Webb 2018): to test θ = θ0 the parts absorb θ0 - θ̂ in proportion to their CR2
  variances V_p (the fit under the null of independent parts), r_c = u_c - h_c (V_p / V) (θ0 - θ̂), and the same
  bootstrap of r gives p(θ0) = P*(|T*| >= |θ̂ - θ0| / SE); the interval is {θ0: p(θ0) > 5%}, found on each side
  by bisection with the same weights (it need not be symmetric).

``cr2_t`` is the audit's interval, ``t_2df`` the same SE with twice its df (for comparison). Coverage is over the
replications the audit's estimability rule keeps; ``miss_below`` / ``miss_above`` the WCR interval lying entirely
below / above the truth; verdict error rates as cluster_inference_coverage.py's, of the WCR interval.

    python benchmarks/wild_bootstrap_coverage.py --rows pareto1.3,minority45_pareto1.3 --reps 150 --seed 3
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

from fair_pipeline.audit.stats.blocks import build_grid  # noqa: E402
from fair_pipeline.audit.stats.clustered import row_clusters  # noqa: E402
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_COUNT, estimability  # noqa: E402
from fair_pipeline.audit.stats.grid_audit import column_df, run_grid_audit  # noqa: E402
from fair_pipeline.audit.stats.small_sample import critical_value  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402

_spec = importlib.util.spec_from_file_location("cic", Path(__file__).with_name("cluster_inference_coverage.py"))
cic = importlib.util.module_from_spec(_spec)  # the sibling benchmark: its draws, truths and verdict error rates
_spec.loader.exec_module(cic)

AUC_ROWS = [name for name, config in cic.CONFIGS.items() if config[4] == "auc"]
BOOTSTRAP_DRAWS = 399
BISECTION_STEPS = 11  # the interval's ends to 8/2^11 of an SE
BRACKET = 8.0


class WildTotals:
    """One contrast's raw per-cluster totals u (C,), shares h of their parts (C,) and part codes (C,), with the
    bootstrap's Rademacher weights (B, C) drawn once (every null value reuses them)."""

    def __init__(self, adjusted, shares, parts, weights):
        adjusted, shares = np.asarray(adjusted, dtype=np.float64), np.asarray(shares, dtype=np.float64)
        if np.any(shares >= 1.0) or np.any(shares <= 0.0):
            raise ValueError("every cluster's share of its part must lie in (0, 1)")
        self.h = shares
        self.u = adjusted * np.sqrt(1.0 - shares)
        self.parts = [np.flatnonzero(parts == p) for p in np.unique(parts)]
        variances = np.array([np.sum(adjusted[i] ** 2) for i in self.parts])
        self.se = float(np.sqrt(variances.sum()))
        self.alloc = np.empty(self.u.size)
        for i, v in zip(self.parts, variances):
            self.alloc[i] = v / variances.sum()
        self.w = np.asarray(weights, dtype=np.float64)

    def bootstrap_t(self, residuals) -> np.ndarray:
        """(B,) T* = Σ w r / sqrt(Σ e² / (1 - h)), e = w r minus each part's re-estimated share."""
        wr = self.w * residuals
        e = wr.copy()
        for i in self.parts:
            e[:, i] -= self.h[i] * wr[:, i].sum(axis=1, keepdims=True)
        return wr.sum(axis=1) / np.sqrt((e * e / (1.0 - self.h)).sum(axis=1))

    def unrestricted_quantile(self, confidence: float = 0.95) -> float:
        return float(np.quantile(np.abs(self.bootstrap_t(self.u)), confidence))

    def p_value(self, distance: float) -> float:
        """p of θ0 = θ̂ + distance x SE (distance in SE units, either sign). Draws as extreme as the sample count,
        up to rounding (all w = ±1 reproduce the sample's own statistic)."""
        restricted = self.u - self.h * self.alloc * distance * self.se
        return float(np.mean(np.abs(self.bootstrap_t(restricted)) >= abs(distance) * (1 - 1e-9)))

    def restricted_interval(self, confidence: float = 0.95, widest: float = 30.0) -> tuple[float, float]:
        """(below, above): the WCR interval is [θ̂ - below SE, θ̂ + above SE] (``widest`` where p stays large)."""
        out = []
        for side in (-1.0, 1.0):
            inside, outside = 0.0, BRACKET
            if self.p_value(side * BRACKET) > 1 - confidence:  # rare: an interval wider than BRACKET SEs
                inside, outside = BRACKET, widest
                if self.p_value(side * widest) > 1 - confidence:
                    out.append(widest)
                    continue
            for _ in range(BISECTION_STEPS):
                mid = (inside + outside) / 2
                inside, outside = (mid, outside) if self.p_value(side * mid) > 1 - confidence else (inside, mid)
            out.append((inside + outside) / 2)
        return out[0], out[1]


def _contrasts(res, with_xauc: bool) -> dict:
    col = {name: i for i, name in enumerate(res["columns"])}
    out = {f"I0-I1({a:g})": (a, {col[("group", 0, 0)]: 1.0, col[("group", 1, 1)]: -1.0}) for a in cic.CUTOFFS}
    if with_xauc:
        out["dxAUC"] = (1.0, {col[("xauc", 0, 1)]: 1.0, col[("xauc", 1, 0)]: -1.0})
    return out


def contrast_totals(config: str, rep: int, seed: int) -> list[tuple[dict, np.ndarray, np.ndarray, np.ndarray]]:
    """Per AUC contrast of one replication (cluster_inference_coverage's draw): its row (estimate, audit SE and
    df, estimability, error) and its live items' CR2 totals Ũ, shares of their parts' rows and part codes."""
    d = cic.draw(config, [seed, rep, list(cic.CONFIGS).index(config)])
    s, y, g = d["score"], d["label"], d["group"]
    codes, levels = np.unique(g, return_inverse=True)[1], np.unique(g)
    grid = build_grid(s, y, codes, levels)
    two_way = "query" in d
    clusters = (d["item"], d["query"]) if two_way else d["item"]
    res = run_grid_audit(grid, list(cic.CUTOFFS), xauc=not two_way, clusters=row_clusters(clusters, s, y, codes))
    cell = codes * 2 + y.astype(np.int64)  # a cluster's part: its rows' group x label cell
    n_items = int(d["item"].max()) + 1
    part = np.full(n_items, -1)
    part[d["item"]] = cell
    if np.any(part[d["item"]] != cell):
        raise ValueError(f"{config}: an item holds rows of two cells; the parts need one cell per cluster")
    rows_of = np.bincount(d["item"], minlength=n_items).astype(np.float64)
    share = rows_of / np.bincount(part, weights=rows_of, minlength=4)[part]
    truth = cic.truths(config)
    ok = [dict(zip(cic.CUTOFFS, estimability(grid.n_pos[k], grid.n_neg[k], np.array(cic.CUTOFFS), DEFAULT_MIN_COUNT,
                                             res["clusters_with"]["pos"][k], res["clusters_with"]["neg"][k])[0]))
          for k in (0, 1)]
    item_totals = res["cluster_totals"][0]  # the item stream's (K, items, S) CR2 totals, in item order
    out = []
    for name, (a, w) in _contrasts(res, not two_way).items():
        k, ka = int(np.searchsorted(res["cov_alphas"], a)), int(np.searchsorted(res["alphas"], a))
        vec = np.zeros(len(res["pairs"]))
        for c, coef in w.items():
            vec[c] = coef
        est, var = float(vec @ res["auc"][:, ka]), float(vec @ res["cov"][k] @ vec)
        df = float(column_df(res, [a], w)[0])
        row = {"config": config, "rep": rep, "statistic": name, "estimate": est, "se": np.sqrt(var), "df": df,
               "estimable": bool(ok[0][a] and ok[1][a]), "error": est - truth[name]}
        u = np.asarray(item_totals[k] @ vec)
        live = u != 0
        out.append((row, u[live], share[live], part[live]))
    return out


def one_replication(args) -> list[dict]:
    config, rep, seed = args
    rng = np.random.default_rng([seed, rep, list(cic.CONFIGS).index(config), 99])
    out = []
    for row, u, share, part in contrast_totals(config, rep, seed):
        if row["estimable"]:
            wild = WildTotals(u, share, part, rng.choice([-1.0, 1.0], (BOOTSTRAP_DRAWS, u.size)))
            row["wcu_q"] = wild.unrestricted_quantile()
            row["wcr_below"], row["wcr_above"] = wild.restricted_interval()
            row["wcr_se"] = wild.se  # the item stream's CR2 SE (two-way: the audit's SE adds the query stream)
        out.append(row)
    return out


def coverage(raw: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (config, name), g in raw[raw["estimable"]].groupby(["config", "statistic"], sort=False):
        t = (g["error"] / g["se"]).to_numpy()
        tw = (g["error"] / g["wcr_se"]).to_numpy()
        below, above = g["wcr_below"].to_numpy(), g["wcr_above"].to_numpy()
        wcr = (tw <= below) & (-tw <= above)
        rows.append({"config": config, "statistic": name, "reps": len(g),
                     "cr2_t": np.mean(np.abs(t) <= critical_value(0.95, g["df"].to_numpy())),
                     "t_2df": np.mean(np.abs(t) <= critical_value(0.95, 2 * g["df"].to_numpy())),
                     "wcu": np.mean(np.abs(tw) <= g["wcu_q"].to_numpy()), "wcr": wcr.mean(),
                     "cov_se": np.sqrt(wcr.mean() * (1 - wcr.mean()) / len(g)),
                     "miss_below": np.mean(-tw > above), "miss_above": np.mean(tw > below),
                     "width_wcr/cr2_t": np.median((below + above) * g["wcr_se"] / (2 * critical_value(0.95, g["df"].to_numpy()) * g["se"]))})
    return pd.DataFrame(rows)


def wcr_verdict_errors(raw: pd.DataFrame) -> pd.DataFrame:
    """cluster_inference_coverage's verdict error rates, of the WCR interval (its distances below / above)."""
    kept = raw[raw["estimable"]].copy()
    kept["cr2_z"] = critical_value(0.95) * kept["se"]
    kept["ci_below"], kept["ci_above"] = kept["wcr_below"] * kept["wcr_se"], kept["wcr_above"] * kept["wcr_se"]
    return cic.verdict_errors(kept).drop(columns=["tost90_eq|δ", "tost90_eq|-δ"])


def run_study(argv, description: str, one_replication, tables, default_reps: int) -> None:
    """Parse --reps/--rows/--seed/--jobs, run ``one_replication`` over the AUC rows' replications and print each
    of ``tables`` (functions of the raw rows) with the run's wall time."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--reps", type=int, default=default_reps)
    ap.add_argument("--rows", default=",".join(AUC_ROWS), help=f"comma-separated, of {AUC_ROWS}")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    names = a.rows.split(",")
    if any(n not in AUC_ROWS for n in names):
        ap.error(f"unknown rows {[n for n in names if n not in AUC_ROWS]}; known: {AUC_ROWS}")
    t0, c0 = time.time(), time.process_time()
    raw = pd.DataFrame(replication_rows(one_replication, [(c, r, a.seed) for c in names for r in range(a.reps)], a.jobs))
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        for k, table in enumerate(tables):
            if k:
                print()
            print(table(raw).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"{len(names) * a.reps} replications in {time.time() - t0:.0f} s wall ({a.jobs} processes; parent CPU "
          f"{time.process_time() - c0:.0f} s)")


def main(argv=None) -> None:
    run_study(argv, __doc__.split("\n")[0], one_replication, [coverage, wcr_verdict_errors], default_reps=150)


if __name__ == "__main__":
    main()
