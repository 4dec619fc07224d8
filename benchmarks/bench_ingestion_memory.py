"""Peak memory of loading one simulated day (`ingestion.loads.load_partition`, observational source) under
DuckDB memory limits, side by side: peak RSS (the loading process's VmHWM, DuckDB included), CPU and wall.

One day is simulated once into a temporary landing zone; each limit loads it into its own fresh warehouse in
its own subprocess, in one run ("uncapped" = DuckDB's default of 80% of RAM). The pipeline's default limit is
`settings.DEFAULT_DUCKDB_MEMORY_LIMIT`.

    python benchmarks/bench_ingestion_memory.py [--requests-per-day 100000] [--limits uncapped 1GB 512MB]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAY = dt.date(2026, 1, 1)
UNCAPPED = "uncapped"


def _peak_rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def load_once(landing: Path, limit: str, workdir: Path) -> dict:
    from fair_pipeline.ingestion.loads import load_partition
    from fair_pipeline.platform import warehouse

    wall, times = time.perf_counter(), os.times()
    con = warehouse.connect(workdir / "warehouse.duckdb", temp_directory=workdir / "spill",
                            memory_limit=None if limit == UNCAPPED else limit)
    if limit == UNCAPPED:
        con.execute("RESET memory_limit")
    load = load_partition(con, landing, "observational", DAY.isoformat())
    con.close()
    after = os.times()
    return {"rows": load.accepted, "peak_rss": _peak_rss(), "wall": time.perf_counter() - wall,
            "cpu": after.user + after.system - times.user - times.system}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests-per-day", type=int, default=100_000)
    parser.add_argument("--limits", nargs="+", default=[UNCAPPED, "1GB", "512MB"])
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # landing, limit, workdir
    args = parser.parse_args()
    if args.child:
        landing, limit, workdir = args.child
        print("RESULT " + json.dumps(load_once(Path(landing), limit, Path(workdir))))
        return
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
    from fair_pipeline.ingestion.simulator import SimulationConfig

    with tempfile.TemporaryDirectory(prefix="bench_ingestion_memory_") as tmp:
        landing = Path(tmp) / "landing"
        simulate_to_landing(SimulationConfig(requests_per_day=args.requests_per_day), landing, DAY, 1)
        results = {}
        for limit in args.limits:
            workdir = Path(tmp) / f"load_{len(results)}"
            workdir.mkdir()
            done = subprocess.run([sys.executable, __file__, "--child", str(landing), limit, str(workdir)],
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"limit {limit}: the load failed:\n{done.stderr[-3000:]}")
            results[limit] = json.loads(lines[-1][len("RESULT "):])
    rows = next(iter(results.values()))["rows"]
    print(f"one observational day: {rows:,} rows ({args.requests_per_day:,} requests)")
    print(f"{'memory_limit':>12s} {'peak RSS GiB':>12s} {'bytes/row':>9s} {'wall s':>7s} {'CPU s':>7s}")
    for limit, r in results.items():
        print(f"{limit:>12s} {r['peak_rss'] / 2 ** 30:12.2f} {r['peak_rss'] / rows:9.0f} {r['wall']:7.1f} {r['cpu']:7.1f}")
    first = args.limits[0]
    for limit in args.limits[1:]:
        print(f"{limit} / {first}: peak RSS {results[limit]['peak_rss'] / results[first]['peak_rss']:.2f}x, "
              f"CPU {results[limit]['cpu'] / results[first]['cpu']:.2f}x, wall {results[limit]['wall'] / results[first]['wall']:.2f}x")


if __name__ == "__main__":
    main()
