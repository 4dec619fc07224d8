"""The landing-file corpus (`fair_pipeline.ingestion.landing_corpus`): generate `--days` landing days, load each
into one warehouse, and print how many were tried, handled (refused naming the file with the partition unchanged,
or loaded with exactly the bad rows quarantined), unclear, silent and lost, by kind of day.

    python benchmarks/landing_fuzz.py --days 500
"""
from __future__ import annotations

import argparse
import collections
import tempfile
import time

from fair_pipeline.ingestion.landing_corpus import OUTCOMES, generate, run_corpus


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=500, help="generated landing days (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default: %(default)s)")
    args = parser.parse_args(argv)
    began, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as root:
        counts, problems = run_corpus(root, args.days, args.seed)
    kinds = collections.Counter(day.kind for day in generate(args.days, args.seed))
    files = sum(len(day.files) for day in generate(args.days, args.seed))
    print(f"tried {args.days} days ({files} files), "
          + ", ".join(f"{outcome} {counts.get(outcome, 0)}" for outcome in OUTCOMES)
          + f"  ({time.perf_counter() - began:.0f} s, CPU {time.process_time() - cpu:.0f} s)")
    print("days by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())))
    for kind, outcome, detail in problems:
        print(f"  {outcome:<8} {kind:<10} {detail[:300]}")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
