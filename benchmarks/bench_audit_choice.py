"""`audit_file`'s choice between streaming sorted rows and ``GROUP BY score``, on a file written with its repeated
scores first: the audit as it chooses, forced to sort, forced to group, and a plain sort of the rows for reference.

A Parquet file of ``--rows`` impressions (default 1e7) whose first ``--repeated`` share of rows (default 0.4) hold one
repeated score (e.g. unscored items' zeros) and the rest distinct scores, two groups. Reading the first rows only, the
audit would see nothing but repeats and group by score, hashing as many groups as the file has distinct scores; it
counts distinct scores over the whole file (`audit.files._mostly_distinct`), so it sorts. Rounds alternate the four
runs in this process; we print wall and CPU time (DuckDB's threads included), medians and fastest, and the load.

    python benchmarks/bench_audit_choice.py --rows 1e7 --rounds 2
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import fair_pipeline.audit.files as files
from bench_clustered_audit import plain_sort


def write_file(path: Path, rows: int, repeated: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    zeros = int(repeated * rows)
    scores = np.r_[np.zeros(zeros), rng.normal(size=rows - zeros)]
    group = rng.random(rows) < 0.4
    label = rng.random(rows) < np.where(group, 0.3, 0.4) + 0.1 * (scores > 0)
    pq.write_table(pa.table({"score": scores, "grp": np.where(group, "b", "a"), "label": label.astype(np.int8)}), path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--repeated", type=float, default=0.4, help="share of rows, first in the file, on one score")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-limit", default="4GB")
    args = parser.parse_args(argv)
    rows = int(args.rows)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_choice_") as tmp:
        path = Path(tmp) / "repeats_first.parquet"
        write_file(path, rows, args.repeated, 0)

        def audit(share):
            def run():
                saved = files.SORT_ROWS_SHARE
                files.SORT_ROWS_SHARE = saved if share is None else share
                try:
                    files.audit_file(path, "score", "label", "grp", memory_limit=args.memory_limit)
                finally:
                    files.SORT_ROWS_SHARE = saved
            return run

        runs = {"sort": lambda: plain_sort(path, args.memory_limit), "audit (its choice)": audit(None),
                "audit, sorted rows": audit(0.0), "audit, GROUP BY": audit(np.inf)}
        times = {k: [] for k in runs}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                wall, cpu = time.perf_counter(), time.process_time()
                fn()
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"{rows:,} rows, the first {args.repeated:.0%} on one score, the rest distinct; {args.rounds} alternating "
          f"rounds; load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    sort_cpu = np.median([t[1] for t in times["sort"]])
    print(f"{'':>20} {'wall median':>12} {'CPU median':>11} {'CPU min':>8} {'CPU / sort':>11}")
    for name, runs_ in times.items():
        wall, cpu = np.array([t[0] for t in runs_]), np.array([t[1] for t in runs_])
        print(f"{name:>20} {np.median(wall):>11.2f}s {np.median(cpu):>10.2f}s {cpu.min():>7.2f}s "
              f"{np.median(cpu) / sort_cpu:>10.2f}x")


if __name__ == "__main__":
    main()
