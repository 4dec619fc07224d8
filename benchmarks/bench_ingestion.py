"""Ingestion with validation vs a plain DuckDB insert of the same files, and simulator throughput.

Prints ratios measured side by side in one run (this machine is noisy: compare ratios, not seconds).
Targets: validated ingestion >= 0.5x the plain insert; simulator >= 1M impressions/s.

    python benchmarks/bench_ingestion.py [--requests-per-day 25000] [--days 2] [--repeats 3]
"""
from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from fair_pipeline.ingestion import loads
from fair_pipeline.ingestion.landing import partition_dir, partition_files, write_parquet_atomic
from fair_pipeline.ingestion.simulated_landing import simulate_day_tables
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform import warehouse

START = dt.date(2026, 1, 1)


def simulate(config: SimulationConfig, landing: Path, days: int) -> tuple[int, float, float]:
    """Returns (impressions, seconds generating, seconds generating + writing Parquet)."""
    items = simulate_items(config)
    generate = write = 0.0
    rows = 0
    for offset in range(days):
        day = START + dt.timedelta(days=offset)
        t0 = time.perf_counter()
        tables = simulate_day_tables(config, items, day)
        t1 = time.perf_counter()
        for source, table in tables.items():
            write_parquet_atomic(table, partition_dir(landing, source, day) / "part-0.parquet")
            rows += table.num_rows
        generate += t1 - t0
        write += time.perf_counter() - t1
    return rows, generate, generate + write


def plain_insert(db: Path, files: list[str]) -> float:
    """The floor: copy the files into a fresh table, no validation, no quarantine, no transaction logic."""
    with warehouse.session(db) as con:
        con.execute("CREATE TABLE plain AS SELECT * FROM read_parquet($files) LIMIT 0", {"files": files})
        t0 = time.perf_counter()
        con.execute("INSERT INTO plain SELECT * FROM read_parquet($files)", {"files": files})
        return time.perf_counter() - t0


def validated_load(db: Path, landing: Path, day: str) -> float:
    """The product path into a fresh warehouse: validation, quarantine, atomic partition replace."""
    with warehouse.session(db) as con:
        t0 = time.perf_counter()
        loads.load_partition(con, landing, "observational", day)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests-per-day", type=int, default=25_000)
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = SimulationConfig(requests_per_day=args.requests_per_day)
    with tempfile.TemporaryDirectory() as tmp:
        landing = Path(tmp) / "landing"
        rows, generate_s, total_s = simulate(config, landing, args.days)
        print(f"simulator: {rows:,} impressions; {rows / generate_s / 1e6:.2f}M/s generating, "
              f"{rows / total_s / 1e6:.2f}M/s including Parquet writes (target >= 1M/s)")
        day = START.isoformat()
        files = [str(f) for f in partition_files(landing, "observational", START)]
        n = sum(pq.read_metadata(f).num_rows for f in files)
        plain, validated = [], []
        for repeat in range(args.repeats):  # interleaved, so both see the same machine load
            plain.append(plain_insert(Path(tmp) / f"plain-{repeat}.duckdb", files))
            validated.append(validated_load(Path(tmp) / f"validated-{repeat}.duckdb", landing, day))
        best_plain, best_validated = min(plain), min(validated)
        print(f"ingestion of {n:,} rows (best of {args.repeats}): plain INSERT {n / best_plain / 1e6:.2f}M rows/s, "
              f"validated+quarantine+atomic replace {n / best_validated / 1e6:.2f}M rows/s")
        print(f"ratio validated / plain throughput = {best_plain / best_validated:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
