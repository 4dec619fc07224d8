"""Monte Carlo coverage and bias of `exposure_parity`'s 95% CIs, each replication a fresh item pool.

Data-generating process (three groups, shares 0.5 / 0.3 / 0.2, labels with spaces and non-Latin text):
items have relevance r = 0.6 · sigmoid(μ_group + N(0, 1)) (μ = -1.0, -1.3, -0.8) and a production score
logit(r / 0.6) + bonus_group + N(0, 0.5) (bonus = +0.5, 0, -0.4: the ranker favours the first group);
each request shows L = 8 distinct items drawn from the pool, ranked by score + N(0, 0.3), and has a factor
u ~ U(0.5, 1.5); a click is Bernoulli(w_position · r · u), w_k = 1 / log2(1 + k). Items repeat across
requests (one relevance) and requests share u: both are clusters. The estimand is the population value
log(E[w_position | group] / E[r u | group]) and its differences between groups; since the L items of a request
are L independent draws from the item population, `truth` computes it on 10 x 10^6 fresh draws (its Monte
Carlo error is about 1/30 of a replication's SD).

Variants, all on the same draws: the variance clustered two ways (items and requests), by items only, by
requests only, and not at all (impressions independent); and with an estimated examination curve
ŵ_k = w_k · exp(e_k), e a random walk with steps N(0, 0.04²) (like a chained adjacent-pairwise estimate,
drawn afresh per replication), its uncertainty entered by the delta method with the covariance, with
marginal SEs only (worst-case bound), or ignored.

    python benchmarks/exposure_coverage.py                   # 1000 replications, 2 processes
    python benchmarks/exposure_coverage.py --reps 200 --jobs 1
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fair_pipeline.audit.stats.exposure import exposure_parity  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402

GROUPS = np.array(["women", "men", "non-binary «other»"], dtype=object)
SHARES = np.array([0.5, 0.3, 0.2])
MU = np.array([-1.0, -1.3, -0.8])
BONUS = np.array([0.5, 0.0, -0.4])
L, ITEMS, REQUESTS = 8, 600, 2500
W = 1.0 / np.log2(1.0 + np.arange(1, L + 1))
STEP_SD = 0.04
LOG_COV = STEP_SD**2 * np.minimum.outer(np.arange(L), np.arange(L)).astype(float)  # random walk from position 1
VARIANTS = {  # name: (clusters, examination kind)
    "two-way (item, request)": ("both", "true"),
    "item only": ("item", "true"),
    "request only": ("request", "true"),
    "none (impressions independent)": (None, "true"),
    "two-way, ŵ with covariance": ("both", "covariance"),
    "two-way, ŵ with SEs (bound)": ("both", "bound"),
    "two-way, ŵ ignored": ("both", "ignored"),
}


def draw(rng, items: int = ITEMS, requests: int = REQUESTS, fresh: bool = False) -> pd.DataFrame:
    """One log: impressions with group, item, request, position and click (fresh=True: new items per slot)."""
    n_pool = requests * L if fresh else items
    group = rng.choice(3, size=n_pool, p=SHARES)
    rel = 0.6 / (1.0 + np.exp(-(MU[group] + rng.normal(size=n_pool))))
    score = np.log(rel / (0.6 - rel)) + BONUS[group] + rng.normal(0, 0.5, n_pool)
    if fresh:
        shown = np.arange(n_pool).reshape(requests, L)
    else:
        shown = np.argsort(rng.random((requests, items)), axis=1)[:, :L]
    noisy = score[shown] + rng.normal(0, 0.3, shown.shape)
    order = np.argsort(-noisy, axis=1)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(1, L + 1)[None, :], axis=1)
    u = rng.uniform(0.5, 1.5, size=(requests, 1))
    p_click = W[position - 1] * rel[shown] * u
    return pd.DataFrame({
        "request": np.repeat(np.arange(requests), L), "item": shown.ravel(), "group": GROUPS[group[shown.ravel()]],
        "position": position.ravel(), "click": (rng.random(shown.shape) < p_click).ravel().astype(np.int8),
        "expected_merit": (rel[shown] * u).ravel()})


def truth(seed: int = 12345, chunks: int = 10, requests: int = 125_000) -> pd.Series:
    """Population log(E[w | g] / E[r u | g]) per group from `chunks` x `requests` x L fresh draws."""
    rng = np.random.default_rng(seed)
    sums = pd.DataFrame(0.0, index=GROUPS, columns=["w", "m"])
    for _ in range(chunks):
        d = draw(rng, requests=requests, fresh=True)
        agg = d.assign(w=W[d["position"] - 1]).groupby("group")[["w", "expected_merit"]].sum()
        sums["w"] += agg["w"]
        sums["m"] += agg["expected_merit"]
    return np.log(sums["w"] / sums["m"])


def _examination(rng, kind: str):
    if kind == "true":
        return W, None
    walk = np.concatenate([[0.0], np.cumsum(rng.normal(0, STEP_SD, L - 1))])
    w_hat = W * np.exp(walk)
    if kind == "covariance":
        return w_hat, LOG_COV
    if kind == "bound":
        return pd.DataFrame({"position": np.arange(1, L + 1), "weight": w_hat,
                             "se": w_hat * np.sqrt(np.diag(LOG_COV))}), None
    return w_hat, None


def one_replication(seed: int, variants: tuple[str, ...] = tuple(VARIANTS)) -> list[dict]:
    rng = np.random.default_rng(seed)
    d = draw(rng)
    rows = []
    for name in variants:
        clusters, kind = VARIANTS[name]
        cl = {"both": {"item": d["item"], "request": d["request"]}, "item": {"item": d["item"]},
              "request": {"request": d["request"]}, None: None}[clusters]
        exam, cov = _examination(np.random.default_rng([seed, 1]), kind)
        res = exposure_parity(d["position"], d["click"], d["group"], exam, clusters=cl, reference=GROUPS[0],
                              examination_covariance=cov)
        for r in res.per_group.itertuples():
            rows.append({"variant": name, "what": f"log ratio {r.group}", "estimate": np.log(r.exposure_over_merit),
                         "se": r.se_log, "low": np.log(r.ci_low), "high": np.log(r.ci_high)})
        for r in res.pairs.itertuples():
            rows.append({"variant": name, "what": f"{r.group} / {r.reference}", "estimate": r.log_ratio,
                         "se": r.se_log, "low": np.log(r.ci_low), "high": np.log(r.ci_high)})
    return rows


def run(reps: int, seed: int = 0, jobs: int = 2, variants: tuple[str, ...] = tuple(VARIANTS)) -> pd.DataFrame:
    seeds = [seed * 1_000_003 + r for r in range(reps)]
    return pd.DataFrame(replication_rows(partial(one_replication, variants=variants), seeds, jobs))


def true_values(population: pd.Series) -> dict:
    out = {f"log ratio {g}": population[g] for g in GROUPS}
    out.update({f"{g} / {GROUPS[0]}": population[g] - population[GROUPS[0]] for g in GROUPS[1:]})
    return out


def coverage_table(raw: pd.DataFrame, truths: dict) -> pd.DataFrame:
    raw = raw.assign(truth=raw["what"].map(truths))
    raw["covered"] = (raw["low"] <= raw["truth"]) & (raw["truth"] <= raw["high"])
    out = raw.groupby(["variant", "what"], sort=False).agg(
        coverage=("covered", "mean"), mean_se=("se", "mean"), sd=("estimate", "std"),
        mean_estimate=("estimate", "mean"), truth=("truth", "first"), reps=("covered", "size"))
    out["se_over_sd"] = out["mean_se"] / out["sd"]
    out["bias_in_mc_se"] = (out["mean_estimate"] - out["truth"]) / (out["sd"] / np.sqrt(out["reps"]))
    return out.reset_index()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--truth-chunks", type=int, default=10, help="truth from this many x 10^6 fresh draws")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    population = truth(chunks=args.truth_chunks)
    table = coverage_table(run(args.reps, args.seed, args.jobs), true_values(population))
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"{args.reps} replications of {ITEMS} items x {REQUESTS} requests x {L} slots, "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
