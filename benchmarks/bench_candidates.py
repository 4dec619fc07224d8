"""Model-selection candidates: the EO re-fit's sufficient statistic for every retrained ranker (lambda), as
`selection.candidates.ranker_weighted_sums` computes it, at 7 and 14 rankers, side by side with one pass per
ranker (one join of the window's production impressions per lambda).

A synthetic warehouse shaped like the simulator's (50,000 items with 8 features, 50 slots, 7 days, ~13% clicks)
is generated in DuckDB; every variant runs on the same connection, interleaved, `--repeats` times; the table
prints the median wall and CPU seconds (CPU of the whole process, DuckDB's threads included) and the ratios.
Target: 14 rankers <= 1.2x the cost of 7.

    python benchmarks/bench_candidates.py [--impressions 7500000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import datetime as dt
import resource
import statistics
import time

import duckdb
import numpy as np
import pandas as pd

from fair_pipeline.platform.sql_models import SQL_PARAMETERS
from fair_pipeline.selection.candidates import Ranker, ranker_weighted_sums

START = dt.date(2026, 1, 1)
DAYS, SLOTS, ITEMS, FEATURES = 7, 50, 50_000, 8
BIN_WIDTH = float(SQL_PARAMETERS["eo_score_bin_width"])  # the pipeline's bin width
WEIGHTS = pd.DataFrame({"position": np.arange(1, SLOTS + 1), "weight": 1.0 / np.arange(1, SLOTS + 1) ** 0.5})


def generate(impressions: int) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging")
    features = ", ".join(f"random() * 2 - 1 AS f{k}" for k in range(FEATURES))
    con.execute(f"CREATE TABLE staging.stg_items AS SELECT 'i' || k AS item_id, {features} FROM range($n) t(k)",
                {"n": ITEMS})
    con.execute(
        """
        CREATE TABLE staging.stg_observational_impressions AS
        SELECT CAST($start AS DATE) + CAST(r % $days AS INTEGER) AS partition_date, 'production' AS policy,
               'i' || (hash(r) % $items) AS item_id, CASE WHEN hash(r) % $items % 3 = 0 THEN 'b' ELSE 'a' END AS group_id,
               CAST(r % $slots + 1 AS INTEGER) AS position, CAST(random() < 0.13 AS INTEGER) AS click
        FROM range($n) t(r)
        """,
        {"start": START, "days": DAYS, "items": ITEMS, "slots": SLOTS, "n": impressions},
    )
    return con


def rankers(count: int, seed: int = 0) -> list[Ranker]:
    rng = np.random.default_rng(seed)
    names = tuple(f"f{k}" for k in range(FEATURES))
    return [Ranker(f"lam={k}", float(k), names, rng.normal(size=FEATURES), float(rng.normal()), START,
                   START + dt.timedelta(days=DAYS - 1), None) for k in range(count)]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(run) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    run()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impressions", type=int, default=7_500_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    con = generate(args.impressions)
    seven, fourteen = rankers(7), rankers(14)
    variants = {  # the tables are yielded one by one: consume them all
        "one pass, 7 rankers": lambda: list(ranker_weighted_sums(con, seven, BIN_WIDTH, WEIGHTS)),
        "one pass, 14 rankers": lambda: list(ranker_weighted_sums(con, fourteen, BIN_WIDTH, WEIGHTS)),
        "one pass per ranker, 7 rankers": lambda: [list(ranker_weighted_sums(con, [r], BIN_WIDTH, WEIGHTS))
                                                   for r in seven],
    }
    times = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, run in variants.items():
            times[name].append(measure(run))
    wall = {name: statistics.median(t[0] for t in runs) for name, runs in times.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    print(f"{args.impressions:,} production impressions, {ITEMS:,} items x {FEATURES} features, "
          f"median of {args.repeats} interleaved runs")
    print(f"{'variant':34s} {'wall s':>8s} {'CPU s':>8s}")
    for name in variants:
        print(f"{name:34s} {wall[name]:8.2f} {cpu[name]:8.2f}")
    base = "one pass, 7 rankers"
    for name in ("one pass, 14 rankers", "one pass per ranker, 7 rankers"):
        print(f"{name} / {base}: wall {wall[name] / wall[base]:.2f}x, CPU {cpu[name] / cpu[base]:.2f}x")


if __name__ == "__main__":
    main()
