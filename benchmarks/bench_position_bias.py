"""Position-bias estimation on ~1e7 simulated impressions stored in DuckDB: seconds and peak memory per
estimator, side by side with the floor `SELECT position, count(*), sum(click) ... GROUP BY position`.

Each measurement runs in its own subprocess (peak RSS = that process's ru_maxrss, DuckDB included), in one
run, on the same table. An estimator's time = its row-level pass (the daily mart SQL of dbt_like_sql/marts
over every partition, as the pipeline runs it) + summing the window + the numpy estimate on the aggregates.
For contrast, "in-memory pairwise" loads the production rows into pandas (row pass column) and runs the
in-memory facade `estimate_position_bias` (numpy column) on them.

    python benchmarks/bench_position_bias.py [--impressions 10000000] [--db PATH]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import duckdb

from fair_pipeline.platform import sql_models

DAYS = 5
IN_MEMORY = "in-memory pairwise"
START = dt.date(2024, 1, 1)
MARTS = {"position_score_bins": ("randomized", "naive", "direct_is", "adjacent_pairwise"),
         "position_swap_cells": ("adjacent_swap",)}
FLOOR_SQL = """
    SELECT position, count(*) AS impressions, sum(click) AS clicks FROM (
        SELECT position, click FROM staging.stg_observational_impressions
        UNION ALL SELECT position, click FROM staging.stg_randomized_impressions
    ) GROUP BY position
"""


def generate(db: Path, impressions: int) -> int:
    import pandas as pd

    from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
    from fair_pipeline.position_bias.simulated_aggregates import day_frames

    per_day = impressions / DAYS / 50 / 1.4  # production + 20% shuffle + 20% adjacent swap requests
    config = SimulationConfig(requests_per_day=int(round(per_day)))
    items = simulate_items(config)
    con = duckdb.connect(str(db))
    con.execute("CREATE SCHEMA IF NOT EXISTS staging; CREATE SCHEMA IF NOT EXISTS marts")
    columns = "partition_date DATE, request_id BIGINT, policy VARCHAR, position INTEGER, original_position INTEGER, score DOUBLE, click INTEGER"
    for table in ("stg_observational_impressions", "stg_randomized_impressions"):
        con.execute(f"CREATE OR REPLACE TABLE staging.{table} ({columns})")
    for offset in range(DAYS):
        day = START + dt.timedelta(days=offset)
        for frame in day_frames(config, items, day):
            frame = frame.assign(partition_date=pd.Timestamp(day))
            table = "stg_observational_impressions" if frame["policy"].iloc[0] == "production" else "stg_randomized_impressions"
            con.register("day_rows", frame)
            con.execute(f"INSERT INTO staging.{table} SELECT partition_date, request_id, policy, position,"
                        " original_position, score, click FROM day_rows")
            con.unregister("day_rows")
        print(f"  generated {day}", file=sys.stderr)
    total = con.execute("SELECT (SELECT count(*) FROM staging.stg_observational_impressions)"
                        " + (SELECT count(*) FROM staging.stg_randomized_impressions)").fetchone()[0]
    con.close()
    return int(total)


def build_mart(con, name: str) -> None:
    """Every daily partition of a mart, with the SQL and bound parameters the pipeline uses."""
    model = sql_models.discover_models()[name]
    sql, _ = sql_models.render_sql(model.text)
    con.execute(f"DROP TABLE IF EXISTS marts.{name}")
    for offset in range(DAYS):
        params = sql_models.bind_parameters(model, (START + dt.timedelta(days=offset)).isoformat())
        con.execute(f"CREATE TABLE marts.{name} AS {sql}" if offset == 0 else f"INSERT INTO marts.{name} {sql}", params)


def worker(db: Path, task: str) -> dict:
    from fair_pipeline.position_bias.sql import estimate_position_bias_sql

    con = duckdb.connect(str(db))
    started = time.perf_counter()
    if task == IN_MEMORY:  # the pandas path on the same rows, for contrast: the log has to fit in memory
        from fair_pipeline.position_bias import estimate_position_bias

        frame = con.execute("SELECT request_id, position, score, click FROM staging.stg_observational_impressions").df()
        aggregate = time.perf_counter() - started
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate_position_bias(frame, method="adjacent_pairwise")
        estimate = time.perf_counter() - started - aggregate
    elif task == "floor":
        con.execute(FLOOR_SQL).fetchall()
        aggregate = time.perf_counter() - started
        estimate = 0.0
    else:
        mart = next(name for name, methods in MARTS.items() if task in methods)
        build_mart(con, mart)
        aggregate = time.perf_counter() - started
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            curve = estimate_position_bias_sql(con, task, START, START + dt.timedelta(days=DAYS - 1))
        estimate = time.perf_counter() - started - aggregate
        assert len(curve) == 50
    con.close()
    return {"task": task, "aggregate_s": aggregate, "estimate_s": estimate, "peak_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """VmHWM of this process (ru_maxrss would carry the parent's peak over fork + exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impressions", type=float, default=1e7)
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (kept if given; generated if absent)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per task; the fastest is shown (noisy machine)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.db, args.worker)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "bench.duckdb"
        if not db.exists():
            started = time.perf_counter()
            rows = generate(db, int(args.impressions))
            print(f"generated {rows:,} impressions in {time.perf_counter() - started:.1f}s -> {db}")
        con = duckdb.connect(str(db), read_only=True)
        rows = con.execute("SELECT (SELECT count(*) FROM staging.stg_observational_impressions)"
                           " + (SELECT count(*) FROM staging.stg_randomized_impressions)").fetchone()[0]
        con.close()
        results = []
        for task in ("floor", *MARTS["position_score_bins"], *MARTS["position_swap_cells"], IN_MEMORY):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, __file__, "--db", str(db), "--worker", task],
                                     capture_output=True, text=True, check=True)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            best = min(runs, key=lambda r: r["aggregate_s"] + r["estimate_s"])
            results.append({**best, "peak_mb": max(r["peak_mb"] for r in runs)})
    floor = results[0]
    print(f"\n{rows:,} impressions in DuckDB ({DAYS} daily partitions), best of {args.repeat} runs;"
          " floor = plain GROUP BY position\n")
    print(f"{'task':<20}{'row pass s':>11}{'numpy s':>9}{'total s':>9}{'x floor':>9}{'peak MB':>9}")
    for r in results:
        total = r["aggregate_s"] + r["estimate_s"]
        floor_total = floor["aggregate_s"]
        print(f"{r['task']:<20}{r['aggregate_s']:>11.2f}{r['estimate_s']:>9.2f}{total:>9.2f}"
              f"{total / floor_total:>9.1f}{r['peak_mb']:>9.0f}")


if __name__ == "__main__":
    main()
