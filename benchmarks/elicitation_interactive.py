"""Answers a person needs, and how well the elicited metric then agrees with theirs.

Scripted answerers follow a hidden Definition-4 metric like a person: "about the same" below a 2% relative
cost difference (the yes/no variant guesses there), otherwise the cheaper profile, wrong 5% of the time.
Hidden metrics: random (a, B, lam ~ U(0.1, 0.9)), random group prevalences.  Agreement is measured on 3000
random pairs of feasible profiles whose hidden costs differ by >= 2%, and on pairs with the same overall
rates (only the group gaps differ, so only the fairness term decides).  The paper's QPME (the settings before
`INTERACTIVE_DEFAULTS`) runs on the same yes/no answerers for comparison, side by side.

    python -m benchmarks.elicitation_interactive [--truths 20] [--qpme-truths 5]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from fair_pipeline.selection.elicitation import (
    INTERACTIVE_DEFAULTS,
    InconsistentOracleError,
    ScriptedAnswerer,
    elicit_fair_quadratic_metric,
    random_fair_metric,
    relative_difference,
    sample_sphere_profiles,
)
from fair_pipeline.selection.elicitation.adaptive import equal_overall_partners


def agreement(truth, estimate, r1, r2, resolution=0.02) -> float:
    c1, c2 = truth(r1), truth(r2)
    clear = np.abs(relative_difference(c1, c2)) >= resolution
    return float(np.mean(np.sign(c1 - c2)[clear] == np.sign(estimate(r1) - estimate(r2))[clear])) if clear.any() else np.nan


def run(method: str, n_groups: int, can_say_same: bool, n_truths: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    r1, r2 = sample_sphere_profiles(rng, 3000, n_groups), sample_sphere_profiles(rng, 3000, n_groups)
    answers, agree, gaps, failed = [], [], [], 0
    start = time.process_time()
    for i in range(n_truths):
        truth = random_fair_metric(rng, n_groups, group_weights="random", lam_range=(0.1, 0.9))
        person = ScriptedAnswerer(truth, 0.02, 0.05, seed=seed * 1000 + i, can_say_same=can_say_same)
        options = INTERACTIVE_DEFAULTS if method == "adaptive" else {"tolerance": 1e-2, "on_inconsistency": "ignore"}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = elicit_fair_quadratic_metric(person, n_groups, group_weights=truth.group_weights, **options)
        except InconsistentOracleError:
            failed += 1
            answers.append(person.n_calls)
            continue
        answers.append(est.n_queries)
        agree.append(agreement(truth, est, r1, r2))
        gaps.append(agreement(truth, est, r1, equal_overall_partners(rng, r1, truth.group_weights, 0.2)))
    return {"answers": np.array(answers), "agree": np.array(agree), "gaps": np.array(gaps), "failed": failed,
            "cpu": time.process_time() - start}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truths", type=int, default=20)
    parser.add_argument("--qpme-truths", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    header = (f"{'method':>8} {'m':>2} {'answers':>8} | {'n':>3} {'mean':>6} {'median':>6} {'max':>4} {'<=40':>5} | "
              f"{'agree':>6} {'min':>6} {'>=.9':>5} | {'gaps':>6} {'min':>6} | {'failed':>6} {'cpu s':>6}")
    print(header)
    print("-" * len(header))
    settings = [("adaptive", 2, True), ("adaptive", 2, False), ("adaptive", 3, True), ("adaptive", 3, False),
                ("adaptive", 4, True), ("qpme", 2, False)]
    for method, m, same in settings:
        n = args.qpme_truths if method == "qpme" else args.truths
        r = run(method, m, same, n, args.seed)
        a, g = r["agree"], r["gaps"][~np.isnan(r["gaps"])] if r["gaps"].size else r["gaps"]
        fmt = lambda x, f: f"{f(x):>6.3f}" if x.size else f"{'-':>6}"  # noqa: E731
        print(f"{method:>8} {m:>2} {'A/B/same' if same else 'A/B':>8} | {n:>3} {r['answers'].mean():>6.1f} "
              f"{np.median(r['answers']):>6.1f} {r['answers'].max():>4} {np.mean(r['answers'] <= 40):>5.0%} | "
              f"{fmt(a, np.mean)} {fmt(a, np.min)} {np.mean(a >= 0.9) if a.size else 0:>5.0%} | "
              f"{fmt(g, np.mean)} {fmt(g, np.min)} | {r['failed']:>6} {r['cpu']:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
