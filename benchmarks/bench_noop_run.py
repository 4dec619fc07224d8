"""A second `fair-pipeline run` on an unchanged home against the first one, side by side in one invocation.

The first run simulates the newest day and its training window on a fresh FAIR_PIPELINE_HOME, ingests them, fits
the benchmark models and trains, audits and reports the newest day. The second run finds every landing day's
fingerprint (files, sizes, content hashes) as last ingested and the newest partition newer than all it reads, so it
materializes nothing and says so in one line. A third run after one landing day was rewritten with other bytes
re-ingests that day only and re-runs the partitions whose window holds it. Each run is a fresh process (CLI start-up
included, as a user sees it); wall and CPU time (children included) are printed with their ratio to the first run.

    python benchmarks/bench_noop_run.py [--requests-per-day 2000]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
START = "2026-11-19"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(home: Path, *args: str) -> tuple[float, float, str]:
    env = {**os.environ, "FAIR_PIPELINE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "fair_pipeline.commands", "run", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"run {args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, cpu, done.stdout


def _rewrite_one_day(home: Path, day: str) -> None:
    """Rewrite one landing file with other bytes (its first row's click flipped): a real change of that day."""
    path = next((home / "landing" / "observational" / f"date={day}").glob("*.parquet"))
    table = pq.read_table(path)
    clicks = table.column("click").to_pylist()
    clicks[0] = 1 - clicks[0]
    pq.write_table(table.set_column(table.schema.get_field_index("click"), "click", pa.array(clicks, pa.int32())), path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests-per-day", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as tmp:
        home = Path(tmp) / "home"
        sizes = ["--requests-per-day", str(args.requests_per_day), "--start", START]
        first = _run(home, *sizes)
        second = _run(home)
        newest = sorted(p.name.removeprefix("date=") for p in (home / "landing" / "observational").glob("date=*"))
        _rewrite_one_day(home, newest[-2])
        third = _run(home)
    print(f"{'run':<46} {'wall s':>8} {'CPU s':>8} {'wall/first':>11} {'CPU/first':>10}")
    for name, (wall, cpu, _) in [("first run (fresh home)", first), ("second run (nothing new)", second),
                                 (f"third run ({newest[-2]} rewritten)", third)]:
        print(f"{name:<46} {wall:8.1f} {cpu:8.1f} {wall / first[0]:11.3f} {cpu / first[1]:10.3f}")
    print("second run said:", next((line for line in second[2].splitlines() if "nothing new" in line), "(no no-op line)"))
    print("third run ingested:", [line for line in third[2].splitlines() if "ingesting" in line])


if __name__ == "__main__":
    main()
