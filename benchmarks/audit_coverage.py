"""Monte Carlo coverage of the audit's 95% CIs: item-clustered vs iid (Lemma 3) variances (issue item 7).

Each replication draws a FRESH item population with the simulator's item generator
(``simulate_items(SimulationConfig(n_items=..., seed=...))``: group, relevance Y(1), merit R), then
impressions: every item is shown ``1 + Poisson(mean_shows - 1)`` times (default 10 on average), at a
uniformly random display slot 1..``slots``. Two score variants

* ``fixed``:          score = the item's merit on every impression (ties within an item),
* ``per_impression``: score = merit + N(0, 0.2) per impression (the simulator's score noise),

and two label sources

* ``relevance``:         label = the item's true relevance on every impression,
* ``randomized_clicks``: label = click ~ Bernoulli(w_position * relevance), w = the simulator's
                         ``bias_curve`` (position random, i.e. a shuffled log),

are all computed on the same draw. Statistics: the smaller group's ("0", p = 0.3) I(0.1) and I(1), and
the group difference I_0 - I_1 at 0.1 and 1 (``compare_groups(...).pairs``), each with the
item-clustered CI (``clusters=item ids``) and the iid CI (Lemma 3, rows independent).

Estimand: the population (superpopulation of items and impressions) value. Because the number of
impressions of an item is independent of the item and the display position is random, the limit of the
estimator is the partial AUC of the MARGINAL score distributions of a group's positive and negative
impressions, which are known in closed form (``true_values``): given group and relevance the merit is
N(mu, 0.5) (+ (1 + Y) U[0, 1] in group 0), plus N(0, 0.2) in the per-impression variant; a click's score
is distributed like a relevant item's score, a non-click's like the mixture of relevant (weight
p (1 - mean w)) and irrelevant (weight 1 - p) items. ``truth_check`` re-estimates the same quantities on
one very large population (default 100 x a replication's items) and reports the difference from the
closed form in units of the large population's own clustered SE (its Monte Carlo error) and of the
replication SD.

    python benchmarks/audit_coverage.py                       # 1000 replications of 2000 items, 2 processes
    python benchmarks/audit_coverage.py --reps 200 --jobs 1   # quick
    python benchmarks/audit_coverage.py --json out.json       # also write the table and raw numbers
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the thread limits above: BLAS reads them when it loads)
import pandas as pd  # noqa: E402
from scipy import integrate, optimize, stats  # noqa: E402

from fair_pipeline.audit import compare_groups  # noqa: E402
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_items  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402

CUTOFFS = (0.1, 1.0)
GROUP, OTHER = "0", "1"  # group "0" is the smaller one (p_group = 0.7 for "1")
SCORES = ("fixed", "per_impression")
LABELS = ("relevance", "randomized_clicks")
STATISTICS = [f"I_{GROUP}({a:g})" for a in CUTOFFS] + [f"I_{GROUP}-I_{OTHER}({a:g})" for a in CUTOFFS]
Z95 = stats.norm.ppf(0.975)


def sim_config(n_items: int, seed: int, slots: int = 10) -> SimulationConfig:
    return SimulationConfig(n_items=n_items, slots=slots, seed=seed)


# ----------------------------------------------------------------------------- data

def draw_impressions(n_items: int, seed: int, mean_shows: float = 10.0, slots: int = 10) -> dict:
    """A fresh item population and its impressions: arrays per impression, for every score x label variant."""
    cfg = sim_config(n_items, seed, slots)
    items = simulate_items(cfg)
    rng = np.random.default_rng([seed, 1])
    shows = 1 + rng.poisson(mean_shows - 1.0, len(items))
    item = np.repeat(np.arange(len(items)), shows)
    merit = items["merit_score"].to_numpy()[item]
    relevance = items["relevance"].to_numpy()[item].astype(bool)
    position = rng.integers(0, slots, item.size)
    click = relevance & (rng.random(item.size) < bias_curve(cfg)[position])
    return {
        "item": item,
        "group": items["group_id"].to_numpy().astype(str)[item],  # fixed-width str: fast np.unique
        "scores": {"fixed": merit, "per_impression": merit + cfg.score_noise_sd * rng.standard_normal(item.size)},
        "labels": {"relevance": relevance, "randomized_clicks": click},
    }


def statistics_of(result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, estimable) of the STATISTICS from one compare_groups result."""
    g = result.groups[result.groups["group"] == GROUP].set_index("cutoff")
    p = result.pairs
    sign = 1.0
    if (p["group_a"] == OTHER).all():  # orient as GROUP - OTHER whatever the level order
        sign = -1.0
    p = p.set_index("cutoff")
    est = np.r_[[g.loc[a, "auc"] for a in CUTOFFS], [sign * p.loc[a, "diff"] for a in CUTOFFS]]
    se = np.r_[[g.loc[a, "se"] for a in CUTOFFS], [p.loc[a, "se"] for a in CUTOFFS]]
    ok = np.r_[[g.loc[a, "estimable"] for a in CUTOFFS], [p.loc[a, "estimable"] for a in CUTOFFS]]
    return est.astype(float), se.astype(float), ok.astype(bool)


def one_replication(rep: int, n_items: int, seed: int = 0, mean_shows: float = 10.0, slots: int = 10) -> list[dict]:
    """Estimates and both SEs of every statistic for every variant, on replication ``rep``'s fresh draw."""
    d = draw_impressions(n_items, 1_000_000 * seed + rep, mean_shows, slots)
    rows = []
    for sv in SCORES:
        for lv in LABELS:
            s, y = d["scores"][sv], d["labels"][lv]
            clu = statistics_of(compare_groups(s, y, d["group"], CUTOFFS, clusters=d["item"]))
            iid = statistics_of(compare_groups(s, y, d["group"], CUTOFFS))
            for k, name in enumerate(STATISTICS):
                rows.append({"rep": rep, "scores": sv, "labels": lv, "statistic": name,
                             "estimate": clu[0][k], "se_clustered": clu[1][k], "se_iid": iid[1][k],
                             "estimable": bool(clu[2][k])})
    return rows


def _replication_star(args):
    return one_replication(*args)


def run_replications(reps: int, n_items: int, seed: int = 0, jobs: int = 1, mean_shows: float = 10.0,
                     slots: int = 10) -> pd.DataFrame:
    """One row per replication x variant x statistic (deterministic for a given seed, whatever ``jobs``)."""
    tasks = [(r, n_items, seed, mean_shows, slots) for r in range(reps)]
    return pd.DataFrame(replication_rows(_replication_star, tasks, jobs, chunks_per_job=8))


# ----------------------------------------------------------------------------- truth

class _Component:
    """Score distribution N(mu, sd) + b U[0, 1] (b >= 0): survival function and density."""

    def __init__(self, mu: float, sd: float, b: float):
        self.mu, self.sd, self.b = mu, sd, b

    def cdf(self, x):
        z = (np.asarray(x, dtype=float) - self.mu) / self.sd
        if self.b == 0:
            return stats.norm.cdf(z)
        g = lambda t: t * stats.norm.cdf(t) + stats.norm.pdf(t)  # antiderivative of Phi  # noqa: E731
        return self.sd / self.b * (g(z) - g(z - self.b / self.sd))

    def pdf(self, x):
        z = (np.asarray(x, dtype=float) - self.mu) / self.sd
        if self.b == 0:
            return stats.norm.pdf(z) / self.sd
        return (stats.norm.cdf(z) - stats.norm.cdf(z - self.b / self.sd)) / self.b

    @property
    def support(self):
        return self.mu - 10 * self.sd, self.mu + self.b + 10 * self.sd


class _Mixture:
    def __init__(self, parts, weights):
        w = np.asarray(weights, dtype=float)
        self.parts, self.w = parts, w / w.sum()

    def cdf(self, x):
        return sum(w * p.cdf(x) for p, w in zip(self.parts, self.w))

    def pdf(self, x):
        return sum(w * p.pdf(x) for p, w in zip(self.parts, self.w))

    @property
    def support(self):
        lo, hi = zip(*(p.support for p in self.parts))
        return min(lo), max(hi)


def _partial_auc(pos, neg, alpha: float) -> float:
    """I(alpha) = int_0^alpha ROC(t) dt = int_{x_alpha}^inf S_pos(x) f_neg(x) dx, S_neg(x_alpha) = alpha."""
    lo, hi = neg.support
    lo = min(lo, pos.support[0])
    hi = max(hi, pos.support[1])
    x_a = lo if alpha >= 1 else optimize.brentq(lambda x: 1 - neg.cdf(x) - alpha, lo, hi, xtol=1e-13)
    val, _ = integrate.quad(lambda x: (1 - pos.cdf(x)) * neg.pdf(x), x_a, hi, limit=400, epsabs=1e-12, epsrel=1e-10)
    return float(val)


def true_values(scores: str, labels: str, slots: int = 10) -> np.ndarray:
    """Closed-form population values of STATISTICS for one variant (see the module docstring)."""
    cfg = sim_config(max(slots, 2), 0, slots)
    noise = cfg.score_noise_sd if scores == "per_impression" else 0.0
    sd = np.hypot(cfg.relevance_sd, noise)
    w_bar = bias_curve(cfg).mean()  # display slot uniform on 1..slots
    out = {}
    for g, c in (("0", 0), ("1", 1)):
        p = cfg.p_relevant_group1 if c else cfg.p_relevant_group0
        rel = _Component(cfg.relevance_effect + cfg.group_effect * c, sd, 2.0 * (1 - c))
        irr = _Component(cfg.group_effect * c, sd, 1.0 * (1 - c))
        neg = irr if labels == "relevance" else _Mixture([rel, irr], [p * (1 - w_bar), 1 - p])
        out[g] = np.array([_partial_auc(rel, neg, a) for a in CUTOFFS])
    return np.r_[out[GROUP], out[GROUP] - out[OTHER]]


def truth_table(slots: int = 10) -> pd.DataFrame:
    rows = []
    for sv in SCORES:
        for lv in LABELS:
            for name, v in zip(STATISTICS, true_values(sv, lv, slots)):
                rows.append({"scores": sv, "labels": lv, "statistic": name, "truth": v})
    return pd.DataFrame(rows)


def truth_check(n_items: int, seed: int = 0, mean_shows: float = 10.0, slots: int = 10) -> pd.DataFrame:
    """The statistics on one very large population vs the closed form; ``se_big`` is its MC error."""
    d = draw_impressions(n_items, 10**9 + seed, mean_shows, slots)
    rows = []
    for sv in SCORES:
        for lv in LABELS:
            s, y = d["scores"][sv], d["labels"][lv]
            est, se, _ = statistics_of(compare_groups(s, y, d["group"], CUTOFFS, clusters=d["item"]))
            for name, e, q in zip(STATISTICS, est, se):
                rows.append({"scores": sv, "labels": lv, "statistic": name, "big_estimate": e, "se_big": q})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- summary

def coverage_table(raw: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Coverage and SE calibration per variant x statistic (non-estimable replications dropped, counted)."""
    df = raw[raw["estimable"]].merge(truth, on=["scores", "labels", "statistic"])
    rows = []
    for (sv, lv, name), g in df.groupby(["scores", "labels", "statistic"], sort=False):
        err = g["estimate"] - g["truth"]
        sd = g["estimate"].std(ddof=1)
        cov_c = float((np.abs(err) <= Z95 * g["se_clustered"]).mean())
        cov_i = float((np.abs(err) <= Z95 * g["se_iid"]).mean())
        n = len(g)
        rows.append({"scores": sv, "labels": lv, "statistic": name, "truth": g["truth"].iloc[0],
                     "bias/sd": err.mean() / sd, "sd": sd,
                     "cov_clustered": cov_c, "cov_iid": cov_i,
                     "se/sd_clustered": g["se_clustered"].mean() / sd, "se/sd_iid": g["se_iid"].mean() / sd,
                     "reps": n, "cov_se": np.sqrt(cov_c * (1 - cov_c) / n)})
    out = pd.DataFrame(rows)
    order = {s: i for i, s in enumerate(STATISTICS)}
    return out.sort_values(["scores", "labels", "statistic"], key=lambda c: c.map(order) if c.name == "statistic"
                           else c.map({v: i for i, v in enumerate(SCORES + LABELS)})).reset_index(drop=True)


def format_table(table: pd.DataFrame) -> str:
    fmt = {"truth": "{:.4f}".format, "bias/sd": "{:+.3f}".format, "sd": "{:.4f}".format,
           "cov_clustered": "{:.3f}".format, "cov_iid": "{:.3f}".format, "se/sd_clustered": "{:.3f}".format,
           "se/sd_iid": "{:.3f}".format, "cov_se": "{:.4f}".format}
    return table.to_string(index=False, formatters=fmt)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--items", type=int, default=2000, help="items per replication")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (results do not depend on it)")
    ap.add_argument("--mean-shows", type=float, default=10.0, help="mean impressions per item (1 + Poisson)")
    ap.add_argument("--slots", type=int, default=10, help="display slots (position uniform on 1..slots)")
    ap.add_argument("--truth-factor", type=int, default=100,
                    help="large-population check with factor x items (0 skips it)")
    ap.add_argument("--json", metavar="PATH", help="also write the table, truth check and settings as JSON")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    truth = truth_table(args.slots)
    raw = run_replications(args.reps, args.items, args.seed, args.jobs, args.mean_shows, args.slots)
    t_reps = time.perf_counter() - t0
    table = coverage_table(raw, truth)
    print(f"Coverage of 95% CIs: {args.reps} replications x {args.items} fresh items, "
          f"impressions per item 1 + Poisson({args.mean_shows - 1:g}), slots 1..{args.slots}, seed {args.seed}")
    print("truth = closed-form population value; cov_* = share of CIs covering it; se/sd = mean reported SE / "
          "empirical SD of the estimates; cov_se = binomial SE of cov_clustered")
    print(format_table(table))
    check = None
    if args.truth_factor > 0:
        t1 = time.perf_counter()
        check = truth_check(args.truth_factor * args.items, args.seed, args.mean_shows, args.slots)
        check = check.merge(truth, on=["scores", "labels", "statistic"]).merge(
            table[["scores", "labels", "statistic", "sd"]], on=["scores", "labels", "statistic"])
        check["(big-truth)/se_big"] = (check["big_estimate"] - check["truth"]) / check["se_big"]
        check["se_big/sd"] = check["se_big"] / check["sd"]
        check["|big-truth|/sd"] = (check["big_estimate"] - check["truth"]).abs() / check["sd"]
        print(f"\nTruth check: one population of {args.truth_factor * args.items} items "
              f"({time.perf_counter() - t1:.0f} s); se_big = its clustered SE (Monte Carlo error); "
              "sd = replication SD")
        cols = ["scores", "labels", "statistic", "truth", "big_estimate", "se_big", "(big-truth)/se_big",
                "se_big/sd", "|big-truth|/sd"]
        print(check[cols].to_string(index=False, float_format=lambda v: f"{v:.5f}"))
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    print(f"\nreplications: {t_reps:.0f} s wall with {args.jobs} process(es); "
          f"total {time.perf_counter() - t0:.0f} s wall, {cpu:.0f} s CPU "
          "(all processes; wall time on a shared machine depends on its load)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "settings": vars(args), "table": table.to_dict(orient="records"),
            "truth_check": None if check is None else check.to_dict(orient="records"),
            "seconds": time.perf_counter() - t0}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
