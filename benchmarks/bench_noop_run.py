"""A `fair-pipeline run` with nothing new against the first run and a run with one new day, side by side.

On a fresh FAIR_PIPELINE_HOME the first run simulates `--days` days of `--requests-per-day` requests, ingests them,
fits the benchmark models and trains, audits and reports the newest day. Then, on that home:
- no-op run: every landing day's fingerprint (files, sizes, content hashes) is as last ingested and the newest
  partition is newer than all it reads, so it materializes nothing and says so in one line; the content hashes
  come from the hash cache beside the Dagster instance, so no landing byte is read;
- the same no-op run after the hash cache was deleted: every landing byte is read and hashed again (what each
  no-op run cost without the cache);
- one new day (`run --start <the next day> --days 1`): that day simulated, ingested, trained, audited, reported;
- one day rewritten with other bytes: that day re-ingested, and the newest partition, whose window holds it, re-run.
Each run is a fresh process (CLI start-up included, as a user sees it, with Python's bytecode cache written before
the first one); wall and CPU time (children included) are printed with their ratios to the first run and to the new
day's run, and the CPU time of fingerprinting the landing zone in-process with and without the hash cache.

    python benchmarks/bench_noop_run.py [--days 4] [--requests-per-day 1000]
"""
from __future__ import annotations

import argparse
import datetime as dt
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
CACHE = Path("dagster_home") / "landing_hashes.json"  # hash_cache.CACHE_NAME in $DAGSTER_HOME


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _environment(home: Path) -> dict[str, str]:
    """The runs' environment: this home, and Python's bytecode cache on (as an installed package has it; without
    it every run would spend most of its time compiling Dagster's and MLflow's sources)."""
    env = {**os.environ, "FAIR_PIPELINE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home")}
    for name in ("MLFLOW_TRACKING_URI", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


def _compile_bytecode(home: Path) -> None:
    """Import what a run imports once before the measured runs, so that each of them finds the bytecode cached."""
    subprocess.run([sys.executable, "-c", "import fair_pipeline.definitions, fair_pipeline.commands.main"], cwd=ROOT,
                   env=_environment(home), check=True)


def _run(home: Path, *args: str) -> tuple[float, float, str]:
    env = _environment(home)
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


def _landing_size(home: Path) -> tuple[int, int]:
    files = [p for p in (home / "landing").rglob("*.parquet") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _fingerprinting(home: Path) -> tuple[float, float]:
    """CPU seconds of fingerprinting the whole landing zone here, without the hash cache (every byte read) and with
    the run's cache (the part of a no-op run that grows with the landing)."""
    from fair_pipeline.ingestion.fingerprints import files_fingerprint
    from fair_pipeline.ingestion.hash_cache import HashCache

    files = [p for p in (home / "landing").rglob("*.parquet") if p.is_file()]
    times = []
    for cache in (HashCache(None), HashCache(home / CACHE)):
        began = time.process_time()
        files_fingerprint(home / "landing", files, cache)
        times.append(time.process_time() - began)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=4, help="days the first run simulates (the newest and its window)")
    parser.add_argument("--requests-per-day", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as tmp:
        home = Path(tmp) / "home"
        sizes = ["--requests-per-day", str(args.requests_per_day)]
        _compile_bytecode(home)
        rows.append(("first run (fresh home)", _run(home, *sizes, "--start", START, "--days", str(args.days))))
        files, size = _landing_size(home)
        rows.append(("no-op run (nothing new)", _run(home)))
        uncached, cached = _fingerprinting(home)
        (home / CACHE).unlink()
        rows.append(("no-op run, hash cache deleted", _run(home)))
        days = sorted(p.name.removeprefix("date=") for p in (home / "landing" / "observational").glob("date=*"))
        after = (dt.date.fromisoformat(days[-1]) + dt.timedelta(days=1)).isoformat()
        rows.append((f"one new day ({after})", _run(home, *sizes, "--start", after, "--days", "1")))
        _rewrite_one_day(home, days[-1])
        rows.append((f"one day rewritten ({days[-1]})", _run(home)))
    first, new_day = rows[0][1], rows[3][1]
    print(f"home: {args.days} days of {args.requests_per_day} requests, {files} landing files, {size / 1e6:.1f} MB")
    print(f"{'run':<36} {'wall s':>8} {'CPU s':>8} {'wall/first':>11} {'CPU/first':>10} {'wall/new day':>13} "
          f"{'CPU/new day':>12}")
    for name, (wall, cpu, _) in rows:
        print(f"{name:<36} {wall:8.2f} {cpu:8.2f} {wall / first[0]:11.3f} {cpu / first[1]:10.3f} "
              f"{wall / new_day[0]:13.3f} {cpu / new_day[1]:12.3f}")
    print(f"fingerprinting the landing zone, CPU s: {uncached:.3f} hashing every byte, {cached:.3f} from the hash cache")
    for name, (_, _, out) in rows[1:3]:
        print(f"{name} said:", next((line for line in out.splitlines() if "nothing new" in line), "(no no-op line)"))
    print("one day rewritten ran:", [line.split(" (")[0] for line in rows[4][1][2].splitlines()
                                     if "ingesting the logs" in line or ": position bias" in line])


if __name__ == "__main__":
    main()
