"""Coverage of the paired difference of two candidates' totals cost(rates) + mu · D when the elicited metric weighs
exposure (`selection.elicitation.paired_exposure`), each replication a fresh item pool.

A replication draws a pool of items (two groups, relevance, two features), the held-out labelled rows of every item
(shown 1 + Poisson(popularity) times, labels Bernoulli(relevance)) and a log of requests that show the same items
(drawn by popularity, ranked by a production score, clicks Bernoulli(w_k · relevance)). Candidate A ranks by the
first feature with a boost for group b, candidate W by both features; each is thresholded at a fixed score for
its rates and re-ranks the logged requests for its exposure D. The estimand is the difference of the two totals at
the configuration's population values (the pooled sums of `--truth-reps` fresh replications). Printed: coverage
of the paired t interval (two-way on the logs' items and requests, joined by item with the held-out rows),
of the same with the two parts' variances added as if independent, and of the rates-only paired interval; and
for candidate A's own total (its cost CI in the ranking) against A's population total: the reported interval (on
D's root scale), the same SE with the parts' variances added, and the delta method's symmetric interval.

    python benchmarks/exposure_paired_coverage.py --reps 400
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fair_pipeline.audit.exposure_offpolicy import reranked_positions  # noqa: E402
from fair_pipeline.audit.stats.exposure import exposure_parity  # noqa: E402
from fair_pipeline.audit.stats.small_sample import critical_value  # noqa: E402
from fair_pipeline.platform.replications import replication_rows  # noqa: E402
from fair_pipeline.selection.elicitation import FairQuadraticMetric  # noqa: E402
from fair_pipeline.selection.elicitation.paired import (  # noqa: E402
    candidate_parts,
    clustered_interval,
    paired_summary,
)
from fair_pipeline.selection.elicitation.paired_exposure import (  # noqa: E402
    disparity_totals,
    exposure_weighted_cost,
    exposure_weighted_difference,
)

METRIC = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], lam=0.5)
LABELS = ["a", "b"]
THRESHOLDS = {"A": 0.3, "W": 0.25}
WEIGHT = 2.0  # mu: D of these rankings is ~0.01-0.05, so mu · D is of the order of the cost differences
SLOTS = 5


def draw(rng, n_items: int = 150, requests: int = 400, offset: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(held-out rows: item_id, group, n_pos, n_neg, score_A, score_W; logged rows: request_id, item_id, group,
    position, click, score_A, score_W) of a fresh pool; item ids start at ``offset``."""
    b = rng.random(n_items) < 0.4
    x = rng.standard_normal((n_items, 2))
    rel = 1.0 / (1.0 + np.exp(-(1.5 * x[:, 0] + 0.8 * x[:, 1] - 0.8 + 0.4 * b)))
    popularity = rng.lognormal(0.0, 1.0, n_items)
    scores = {"A": x[:, 0] + 2.5 * b, "W": 0.9 * x[:, 0] + 0.5 * x[:, 1] - 0.6 * b}
    group = np.where(b, "b", "a")
    shows = 1 + rng.poisson(3 * popularity)
    item = np.repeat(np.arange(n_items), shows)
    label = rng.random(item.size) < rel[item]
    held = pd.DataFrame({"item_id": item + offset, "group": group[item], "n_pos": label.astype(int),
                         "n_neg": (~label).astype(int), **{f"score_{k}": v[item] for k, v in scores.items()}})
    keys = np.log(popularity)[None, :] + rng.gumbel(size=(requests, n_items))
    shown = np.argpartition(-keys, SLOTS - 1, axis=1)[:, :SLOTS]
    production = x[:, 0][shown] + rng.normal(0, 1.0, shown.shape)
    position = np.empty_like(shown)
    np.put_along_axis(position, np.argsort(-production, axis=1), np.arange(1, SLOTS + 1)[None, :], axis=1)
    w = examination()
    click = rng.random(shown.shape) < w[position - 1] * rel[shown]
    logged = pd.DataFrame({"request_id": np.repeat(np.arange(requests), SLOTS), "item_id": shown.ravel() + offset,
                           "group": group[shown.ravel()], "position": position.ravel(),
                           "click": click.ravel().astype(int),
                           **{f"score_{k}": v[shown.ravel()] for k, v in scores.items()}})
    return held, logged


def examination() -> np.ndarray:
    return 1.0 / np.log2(1.0 + np.arange(1, SLOTS + 1))


def exposure_of(logged: pd.DataFrame, name: str, keep_totals: bool = True):
    ranked = reranked_positions(logged["request_id"], logged["position"], logged[f"score_{name}"])
    clusters = {"item_id": logged["item_id"], "request_id": logged["request_id"]} if keep_totals else None
    return exposure_parity(logged["position"], logged["click"], logged["group"], examination(), clusters=clusters,
                           ranked_positions=ranked, reference="a", keep_totals=keep_totals)


def totals(held: pd.DataFrame, logged: pd.DataFrame, weight: float = WEIGHT) -> dict:
    """name -> (cost, parts, DisparityTotals) of both candidates on one replication's rows."""
    out = {}
    for name, threshold in THRESHOLDS.items():
        cost, parts, _ = candidate_parts(METRIC, held, held[f"score_{name}"], LABELS, threshold=threshold)
        out[name] = (cost, parts, disparity_totals(exposure_of(logged, name)))
    return out


def one_replication(seed: int, weight: float = WEIGHT) -> list[dict]:
    held, logged = draw(np.random.default_rng(seed))
    found = totals(held, logged, weight)
    (ca, pa, da), (cw, pw, dw) = found["A"], found["W"]
    if da is None or dw is None:
        return []
    joined = exposure_weighted_difference(ca, pa, da, cw, pw, dw, held, LABELS, weight, clusters=held["item_id"])
    rates = paired_summary(ca, pa, cw, pw, held, LABELS, held["item_id"])
    zero = np.zeros_like(pa)  # the exposure part alone: its variance added to the rates' as if independent
    alone = exposure_weighted_difference(0.0, zero, da, 0.0, zero, dw, held, LABELS, weight, clusters=held["item_id"])
    own = exposure_weighted_cost(ca, pa, da, held, LABELS, weight, clusters=held["item_id"])
    own_rates = clustered_interval(ca, pa, held, LABELS, held["item_id"])
    own_alone = exposure_weighted_difference(0.0, zero, da, 0.0, zero, None, held, LABELS, weight,
                                             clusters=held["item_id"])
    return [{"estimate": joined.estimate, "se": joined.se, "df": joined.df, "low": joined.ci_low, "high": joined.ci_high,
             "rates_estimate": rates.estimate, "rates_se": rates.se, "rates_low": rates.ci_low,
             "rates_high": rates.ci_high, "separate_se": float(np.hypot(rates.se, alone.se)),
             "own_estimate": own.estimate, "own_se": own.se, "own_df": own.df, "own_low": own.ci_low,
             "own_high": own.ci_high, "own_separate_se": float(np.hypot(own_rates.se, own_alone.se))}]


def truth(reps: int, weight: float = WEIGHT) -> tuple[float, float, float]:
    """(total difference, rates-only difference, candidate A's own total) at the population values: the estimators on `reps` pooled pools."""
    held, logged = zip(*(draw(np.random.default_rng([999, r]), offset=r * 10_000) for r in range(reps)))
    held = pd.concat(held, ignore_index=True)
    logged = pd.concat(logged, ignore_index=True).assign(
        request_id=lambda f: f["request_id"] + 10_000 * (f["item_id"] // 10_000))
    costs, ds = {}, {}
    for name, threshold in THRESHOLDS.items():
        costs[name] = candidate_parts(METRIC, held, held[f"score_{name}"], LABELS, threshold=threshold)[0]
        l = np.log(exposure_of(logged, name, keep_totals=False).per_group.set_index("group")["exposure_over_merit"])
        ds[name] = 0.5 * float((l["b"] - l["a"]) ** 2)
    rates = costs["A"] - costs["W"]
    return rates + weight * (ds["A"] - ds["W"]), rates, costs["A"] + weight * ds["A"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--truth-reps", type=int, default=300)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    raw = pd.DataFrame(replication_rows(one_replication, [args.seed * 1_000_003 + r for r in range(args.reps)],
                                        args.jobs))
    total, rates, own = truth(args.truth_reps)
    print(summary(raw, total, rates, own).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"{len(raw)} of {args.reps} replications estimable; truth {total:.5f} (rates part {rates:.5f}) from "
          f"{args.truth_reps} pooled pools; {time.perf_counter() - t0:.0f} s")


def summary(raw: pd.DataFrame, total: float, rates: float, own: float) -> pd.DataFrame:
    covered = (raw["low"] <= total) & (total <= raw["high"])
    rows = [("paired total, joined by item (reported)", covered.mean(), raw["se"].mean() / raw["estimate"].std(),
             raw["df"].median(), raw["estimate"].mean() - total)]
    rows.append(("paired rates part only, against its own truth",
                 ((raw["rates_low"] <= rates) & (rates <= raw["rates_high"])).mean(),
                 raw["rates_se"].mean() / raw["rates_estimate"].std(), np.nan, raw["rates_estimate"].mean() - rates))
    crit = (raw["high"] - raw["estimate"]) / raw["se"]
    separate = (raw["estimate"] - crit * raw["separate_se"] <= total) & (total <= raw["estimate"] + crit * raw["separate_se"])
    rows.append(("paired total, parts' variances added as if independent", separate.mean(),
                 raw["separate_se"].mean() / raw["estimate"].std(), raw["df"].median(), raw["estimate"].mean() - total))
    own_covered = (raw["own_low"] <= own) & (own <= raw["own_high"])
    rows.append(("A's own total, joined by item (reported)", own_covered.mean(),
                 raw["own_se"].mean() / raw["own_estimate"].std(), raw["own_df"].median(), raw["own_estimate"].mean() - own))
    crit = critical_value(0.95, raw["own_df"])  # the own interval is not symmetric (D's root scale)
    delta = (raw["own_estimate"] - crit * raw["own_se"] <= own) & (own <= raw["own_estimate"] + crit * raw["own_se"])
    rows.append(("A's own total, the delta method's symmetric interval", delta.mean(),
                 raw["own_se"].mean() / raw["own_estimate"].std(), raw["own_df"].median(),
                 raw["own_estimate"].mean() - own))
    separate = ((raw["own_estimate"] - crit * raw["own_separate_se"] <= own)
                & (own <= raw["own_estimate"] + crit * raw["own_separate_se"]))
    rows.append(("A's own total, parts' variances added as if independent", separate.mean(),
                 raw["own_separate_se"].mean() / raw["own_estimate"].std(), raw["own_df"].median(),
                 raw["own_estimate"].mean() - own))
    n = len(raw)
    out = pd.DataFrame(rows, columns=["interval", "coverage", "SE / SD", "median df", "bias"])
    out.insert(2, "MC SE", np.sqrt(out["coverage"] * (1 - out["coverage"]) / n))
    return out


if __name__ == "__main__":
    main()
