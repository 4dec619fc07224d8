"""Red-team run: kill -9 `fair-pipeline run` at N points, recover each with `run --no-simulate`,
and check that the recovered home equals a clean run's (benchmarks/kill_harness.py does one point).

The landing files are simulated once and copied into each point's fresh home; one clean run gives the
reference fingerprint and the time scale for the random points. The first points are the fixed ones (one or
more per stage: ingestion, SQL models, benchmark models, position bias, EO, MLflow logging, rankers, audit,
selection, report); the rest alternate between a random step plus a random delay and a random moment of the
whole run. Prints one row per point and the totals; exits 1 if any point failed.

    python -m benchmarks.kill_points --points 20
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.kill_harness import ALL_STEPS, FIXED_POINTS, KillPoint, Sizes, clean_run, run_point, simulate


def choose_points(count: int, rng: random.Random, clean_s: float) -> list[KillPoint]:
    points = list(FIXED_POINTS[:count])
    for index in range(count - len(points)):
        if index % 2 == 0:
            step = rng.choice(ALL_STEPS)
            delay = round(rng.uniform(0.0, 1.5), 2)
            points.append(KillPoint(f"random_step_{step}+{delay}s", frozenset({step}), delay_s=delay))
        else:
            delay = round(rng.uniform(2.0, 0.9 * clean_s), 1)  # the killed run is about as long as the clean one
            points.append(KillPoint(f"random_time_{delay}s", delay_s=delay))
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20, help="kill points to try (default 20)")
    parser.add_argument("--seed", type=int, default=19, help="seed of the random points (default 19)")
    parser.add_argument("--days", type=int, default=Sizes.days)
    parser.add_argument("--requests-per-day", type=int, default=Sizes.requests_per_day)
    parser.add_argument("--items", type=int, default=Sizes.items)
    parser.add_argument("--slots", type=int, default=Sizes.slots)
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per killed run and per recovery run")
    parser.add_argument("--home-root", type=Path, help="where the temporary homes go (default: a new temp dir)")
    args = parser.parse_args(argv)
    sizes = Sizes(days=args.days, requests_per_day=args.requests_per_day, items=args.items, slots=args.slots)
    root = Path(tempfile.mkdtemp(prefix="kill_points_", dir=args.home_root))
    print(f"homes under {root}; sizes {sizes}", flush=True)

    began = time.monotonic()
    landing = simulate(root / "landing_home", sizes)
    clean, clean_s = clean_run(root / "clean", landing, args.timeout)
    print(f"clean run: {clean_s:.0f}s", flush=True)
    outcomes = []
    for number, point in enumerate(choose_points(args.points, random.Random(args.seed), clean_s), 1):
        point_began = time.monotonic()
        # A new directory per point: this process reads each home's MLflow store, and MLflow keeps one engine
        # (and its open SQLite connection) per store URI, which would keep reading a deleted file at a reused path.
        home = root / f"point_{number}"
        outcome = run_point(point, home, landing, clean, args.timeout)
        outcomes.append(outcome)
        if outcome.recovered:
            shutil.rmtree(home, ignore_errors=True)
        verdict = "recovered" if outcome.recovered else "FAILED: " + "; ".join(outcome.problems)[:2000]
        print(f"[{number}/{args.points}] {point.name}: killed in {outcome.killed_in or '?'}; "
              f"{time.monotonic() - point_began:.0f}s for the point; {verdict}", flush=True)

    print("\n| # | point | step killed in | runs left unfinished | cleanup line seen | recovery s | partitions intact "
          "| verdict |\n|---|---|---|---|---|---|---|---|")
    for number, o in enumerate(outcomes, 1):
        print(f"| {number} | {o.point} | {o.killed_in or '?'} | {o.dead_runs} | {'yes' if o.cleanup_seen else 'no'} "
              f"| {o.recovery_s:.0f} | {'yes' if o.partitions_intact else 'no'} "
              f"| {'recovered' if o.recovered else 'FAILED'} |")
    recovered = sum(o.recovered for o in outcomes)
    print(f"\ntried {len(outcomes)}, recovered {recovered}, failed {len(outcomes) - recovered}; clean run "
          f"{clean_s:.0f}s; total {time.monotonic() - began:.0f}s")
    if recovered < len(outcomes):
        print(f"the failed points' homes are kept for inspection under {root}")
        return 1
    shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
