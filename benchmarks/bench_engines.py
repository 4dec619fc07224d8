"""DuckDB vs Spark (local) for the dbt_like_sql models, side by side in one run, wall and CPU time.

Both engines build every SQL model (staging views, daily marts) for the same simulated days, from the same raw
layer (ingested once by DuckDB, then copied to the Spark engine; the copy is timed on its own line). CPU time is
this process's (DuckDB runs in it) plus, for Spark, the JVM's (read from /proc). On one machine Spark is expected
to be slower: it pays a JVM, task scheduling and Parquet files per partition; it is there for data that does not
fit one machine. Ratios are what to compare (this machine is shared and noisy).

    python benchmarks/bench_engines.py [--impressions 1e6] [--days 2] [--repeats 3] [--master local[2]]
                                       [--masters local[1],local[2]] [--driver-memory 1g]

`--masters A,B` measures the Spark builds under each master, alternating within every repeat (the raw layer is
copied once; switching master starts a new SparkContext in the same JVM, well under a second), and prints Spark's
time per master and the ratios between them: on one machine, how the same statements scale with executor cores.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import tempfile
import time
from pathlib import Path

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.ingestion.loads import load_partition
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.platform import warehouse
from fair_pipeline.platform.engines import DuckDBEngine, build_models
from fair_pipeline.platform.engines.transfer import copy_raw_layer

START = dt.date(2026, 1, 1)
SLOTS = 20


def _process_tree_cpu(root_pid: int) -> float:
    """User + system CPU seconds of a process and its descendants (the JVM may run under a launcher)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        tree.update(children)
        frontier.extend(children)
    return sum(cpu.get(pid, 0.0) for pid in tree)


def timed(function, jvm_pid: int | None = None):
    jvm0 = _process_tree_cpu(jvm_pid) if jvm_pid else 0.0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = function()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    jvm = (_process_tree_cpu(jvm_pid) - jvm0) if jvm_pid else 0.0
    return result, wall, cpu + jvm


def main(argv: list[str] | None = None, stop_session: bool = True) -> None:
    """`stop_session=False` leaves the process's SparkSession running (a caller that shares it, e.g. the tests)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impressions", type=float, default=1e6, help="total impressions over all days")
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g", help="Spark driver memory (the raw copy passes a day "
                        "through it)")
    parser.add_argument("--masters", default="", help="comma-separated masters measured in turn (overrides --master)")
    args = parser.parse_args(argv)
    # impressions per day = requests * slots * (1 + shuffle share + adjacent-swap share)
    config = SimulationConfig(n_items=5_000, slots=SLOTS, seed=3,
                              requests_per_day=max(1, round(args.impressions / (args.days * SLOTS * 1.4))))
    partitions = [str(START + dt.timedelta(days=d)) for d in range(args.days)]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        written = simulate_to_landing(config, home / "landing", START, args.days)
        with warehouse.session(home / "warehouse.duckdb") as con:
            load_items(con, home / "landing")
            for day in partitions:
                for source in contract.SOURCES:
                    load_partition(con, home / "landing", source, day)
        print(f"{sum(written.values()):,} impressions over {args.days} days; {args.repeats} repeats per engine "
              f"(medians); Spark master {args.masters or args.master}")

        from fair_pipeline.platform.engines.spark_engine import (
            SparkEngine,
            spark_session,
        )

        masters = args.masters.split(",") if args.masters else [args.master]
        state = {}

        def session_for(master: str):
            """The SparkSession of `master`: started on first use (the JVM), else a new context in the same JVM."""
            if state.get("master") == master:
                return state["engine"]
            if state:
                state["spark"].stop()
            (spark, wall, cpu) = timed(lambda: spark_session(master=master, driver_memory=args.driver_memory,
                                                             shuffle_partitions=4))
            spark.sparkContext.setLogLevel("ERROR")
            state.update(master=master, spark=spark, jvm=spark.sparkContext._gateway.proc.pid,
                         engine=SparkEngine(spark, home / "spark_warehouse"))
            state.setdefault("start", (wall, cpu + _process_tree_cpu(state["jvm"])))  # the JVM's CPU since it started
            return state["engine"]

        with warehouse.session(home / "warehouse.duckdb") as con:
            duck = DuckDBEngine(con)
            spark_engine = session_for(masters[0])
            _, copy_wall, copy_cpu = timed(lambda: copy_raw_layer(duck, spark_engine, partitions), state["jvm"])
            duck_runs, spark_runs = [], {master: [] for master in masters}
            for _ in range(args.repeats):  # alternate engines and masters, so all see the same machine load
                rows_duck, wall, cpu = timed(lambda: sum(build_models(duck, partitions).values()))
                duck_runs.append((wall, cpu))
                for master in masters:
                    spark_engine = session_for(master)
                    rows_spark, wall, cpu = timed(lambda: sum(build_models(spark_engine, partitions).values()),
                                                  state["jvm"])
                    spark_runs[master].append((wall, cpu))
                    assert rows_duck == rows_spark, f"row counts differ: DuckDB {rows_duck}, Spark {rows_spark}"
        duck_wall, duck_cpu = (statistics.median(r[i] for r in duck_runs) for i in (0, 1))
        spark_time = {master: tuple(statistics.median(r[i] for r in runs) for i in (0, 1))
                      for master, runs in spark_runs.items()}
        print(f"{'step':<40} {'wall s':>8} {'CPU s':>8}")
        print(f"{'Spark session start (JVM)':<40} {state['start'][0]:8.2f} {state['start'][1]:8.2f}")
        print(f"{'raw layer DuckDB -> Spark (copy)':<40} {copy_wall:8.2f} {copy_cpu:8.2f}")
        print(f"{'SQL models on DuckDB':<40} {duck_wall:8.2f} {duck_cpu:8.2f}")
        for master, (spark_wall, spark_cpu) in spark_time.items():
            label = "SQL models on Spark" + (f" {master}" if len(masters) > 1 else "")
            print(f"{label:<40} {spark_wall:8.2f} {spark_cpu:8.2f}")
        for master, (spark_wall, spark_cpu) in spark_time.items():
            which = f" {master}" if len(masters) > 1 else ""
            print(f"Spark{which} / DuckDB, SQL models ({rows_duck:,} model rows): wall {spark_wall / duck_wall:.1f}x, "
                  f"CPU {spark_cpu / duck_cpu:.1f}x")
        for master in masters[1:]:
            (wall0, cpu0), (wall, cpu) = spark_time[masters[0]], spark_time[master]
            print(f"Spark SQL models, {master} / {masters[0]}: wall {wall / wall0:.2f}x, CPU {cpu / cpu0:.2f}x")
        if stop_session:
            state["spark"].stop()


if __name__ == "__main__":
    main()
