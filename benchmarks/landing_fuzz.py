"""The landing-file corpus (`fair_pipeline.ingestion.landing_corpus`): generate `--days` landing days, load each
into one warehouse, and print how many were tried, handled (refused naming the file with the partition unchanged,
or loaded with exactly the bad rows quarantined), unclear, silent and lost, by kind of day; then the same for
`--extras-days` days with extras files (`fair_pipeline.ingestion.extras_corpus`, default: a fifth of `--days`).

    python benchmarks/landing_fuzz.py --days 500
"""
from __future__ import annotations

import argparse
import collections
import tempfile
import time

from fair_pipeline.ingestion import extras_corpus
from fair_pipeline.ingestion.landing_corpus import OUTCOMES, generate, run_corpus


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=500, help="generated landing days (default: %(default)s)")
    parser.add_argument("--extras-days", type=int, default=None,
                        help="generated days with extras files (default: a fifth of --days)")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default: %(default)s)")
    args = parser.parse_args(argv)
    extras_days = args.days // 5 if args.extras_days is None else args.extras_days
    began, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as root:
        counts, problems = run_corpus(root, args.days, args.seed)
    kinds = collections.Counter(day.kind for day in generate(args.days, args.seed))
    files = sum(len(day.files) for day in generate(args.days, args.seed))
    print(f"tried {args.days} days ({files} files), "
          + ", ".join(f"{outcome} {counts.get(outcome, 0)}" for outcome in OUTCOMES)
          + f"  ({time.perf_counter() - began:.0f} s, CPU {time.process_time() - cpu:.0f} s)")
    print("days by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())))
    began, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as root:
        extras_counts, extras_problems = extras_corpus.run_corpus(root, extras_days, args.seed)
    extras_kinds = collections.Counter(day.kind for day in extras_corpus.generate(extras_days, args.seed))
    print(f"tried {extras_days} days with extras files, "
          + ", ".join(f"{outcome} {extras_counts.get(outcome, 0)}" for outcome in OUTCOMES)
          + f"  ({time.perf_counter() - began:.0f} s, CPU {time.process_time() - cpu:.0f} s)")
    print("extras days by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(extras_kinds.items())))
    for kind, outcome, detail in problems + extras_problems:
        print(f"  {outcome:<8} {kind:<10} {detail[:300]}")
    return 0 if not problems + extras_problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
