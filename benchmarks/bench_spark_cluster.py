"""What the driver pays as a day grows, on a local standalone Spark cluster: ingestion and the SQL models, per step.

A master and one worker are started from the pyspark wheel (tests/platform/spark/cluster.py). For each day size a
fresh driver process (default 1 GB heap) ingests one simulated day (both sources: the executors read and validate
the landing files, Spark writes the raw partitions and quarantine) and builds every SQL model for it. Per step it
prints: wall time, the executors' CPU time and the bytes tasks returned to the driver (both from Spark's event log:
task metrics `Executor CPU Time`, `Result Size`), the driver's peak memory: Python (this driver process's peak RSS)
and JVM: the live heap (the largest heap left after a collection in the step, from the driver JVM's GC log, with the
number of collections), the peak heap used (the event log's driver metrics: garbage included, so it grows with how
long the JVM waited before collecting) and the driver JVM's peak RSS (the heap it committed). Then the growth ratios
from the smallest size to each larger one: flat driver figures mean nothing row-sized reaches the driver.

    python benchmarks/bench_spark_cluster.py --impressions 1e6,5e6,2e7 [--cores 2] [--executor-memory 2g]
                                             [--driver-memory 1g]

The catalogue (items) is fixed across sizes; the simulated landing of every size is written first (its time is not
part of any step) and reused by later runs with the same --work-dir (--simulate-only writes it and stops).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

DAY = dt.date(2026, 1, 1)
SLOTS = 20
ITEMS = 20_000
# Impressions per production request: production + shuffle + adjacent-swap requests (0.2 each), SLOTS items each.
IMPRESSIONS_PER_REQUEST = SLOTS * 1.4
SIMULATED_MARKER = "simulated.txt"
STEPS = ("items", "ingest observational", "ingest randomized", "sql models")


def _simulate(landing: Path, impressions: float) -> bool:
    """Writes the day's landing once: a `--work-dir` that already holds it (its marker written last) is reused,
    so the large sizes are simulated once across runs. Returns whether it simulated."""
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
    from fair_pipeline.ingestion.simulator import SimulationConfig

    config = SimulationConfig(n_items=ITEMS, slots=SLOTS, requests_per_day=round(impressions / IMPRESSIONS_PER_REQUEST))
    marker = landing.parent / SIMULATED_MARKER
    if marker.exists() and marker.read_text() == repr(config):
        return False
    simulate_to_landing(config, landing, DAY, 1)
    marker.write_text(repr(config))
    return True


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _jvm_pid() -> int | None:
    """The driver JVM: this process's java child (classic pyspark launches it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == os.getpid() and "java" in (entry / "cmdline").read_text():
                    return int(entry.name)
            except OSError:
                continue
    return None


def run_driver(home: Path, master: str, event_dir: Path, driver_memory: str, executor_memory: str) -> dict:
    """Child process: the steps on one day; returns per-step wall and driver memory after the step."""
    from fair_pipeline.ingestion import contract, spark_loads
    from fair_pipeline.ingestion.catalogue import load_items
    from fair_pipeline.platform import warehouse
    from fair_pipeline.platform.engines import DuckDBEngine, build_models
    from fair_pipeline.platform.engines.spark_engine import SparkEngine, spark_session
    from fair_pipeline.platform.engines.transfer import copy_table

    spark = spark_session(master=master, driver_memory=driver_memory, config={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": event_dir.as_uri(),
        "spark.eventLog.logStageExecutorMetrics": "true", "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false", "spark.executor.memory": executor_memory,
        # One line per collection with the heap before -> after it: the live heap, which garbage not yet collected
        # (the event log's heap used, the process's RSS) does not show.
        "spark.driver.extraJavaOptions": f"-Xlog:gc:file={event_dir.parent / (event_dir.name + '_driver_gc.log')}"})
    uptime_ms = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getUptime
    engine = SparkEngine(spark, home / "spark_warehouse")
    jvm = _jvm_pid()
    landing = home / "landing"
    result = {}
    with warehouse.session(home / "warehouse.duckdb") as con:
        work = {
            "items": lambda: (load_items(con, landing), copy_table(DuckDBEngine(con), engine, ("raw", "items"))),
            "ingest observational": lambda: spark_loads.load_partition(engine, landing, "observational", DAY.isoformat()),
            "ingest randomized": lambda: spark_loads.load_partition(engine, landing, "randomized", DAY.isoformat()),
            "sql models": lambda: build_models(engine, [DAY.isoformat()]),
        }
        for step in STEPS:
            spark.sparkContext.setJobDescription(step)
            began, began_jvm_s = time.perf_counter(), uptime_ms() / 1000
            work[step]()
            result[step] = {"wall_s": time.perf_counter() - began, "jvm_uptime_s": (began_jvm_s, uptime_ms() / 1000),
                            "python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                            "jvm_peak_rss_mb": _vm_hwm_mb(jvm) if jvm else float("nan")}
        result["rows"] = {s: engine.row_count(("raw", f"{s}_impressions")) for s in contract.SOURCES}
    spark.stop()
    return result


def parse_event_log(event_dir: Path) -> dict[str, dict[str, float]]:
    """Per step (job description): executor CPU seconds, bytes tasks returned, the driver's peak JVM heap (MB)."""
    job_step, stage_step = {}, {}
    sums: dict[str, dict[str, float]] = defaultdict(lambda: {"executor_cpu_s": 0.0, "result_bytes": 0.0,
                                                            "jvm_heap_peak_mb": 0.0, "tasks": 0})
    for path in sorted(p for p in event_dir.rglob("*") if p.is_file()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                step = (event.get("Properties") or {}).get("spark.job.description", "other")
                for stage in event.get("Stage IDs", []):
                    stage_step[stage] = step
                job_step[event["Job ID"]] = step
            elif kind == "SparkListenerTaskEnd":
                metrics = event.get("Task Metrics") or {}
                entry = sums[stage_step.get(event["Stage ID"], "other")]
                entry["executor_cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
                entry["result_bytes"] += metrics.get("Result Size", 0)
                entry["tasks"] += 1
            elif kind == "SparkListenerStageExecutorMetrics" and event.get("Executor ID") == "driver":
                entry = sums[stage_step.get(event["Stage ID"], "other")]
                heap = (event.get("Executor Metrics") or {}).get("JVMHeapMemory", 0) / 2**20
                entry["jvm_heap_peak_mb"] = max(entry["jvm_heap_peak_mb"], heap)
    return sums


_GC_LINE = re.compile(r"^\[([0-9.]+)s\].*Pause.* (\d+)M->(\d+)M\((\d+)M\)")


def parse_gc_log(path: Path) -> list[tuple[float, int]]:
    """(JVM uptime s, heap MB after the collection) of each of the driver JVM's collections (-Xlog:gc lines)."""
    if not path.exists():
        return []
    return [(float(m.group(1)), int(m.group(3))) for line in path.read_text().splitlines() if (m := _GC_LINE.match(line))]


def live_heap(collections: list[tuple[float, int]], start_s: float, end_s: float) -> dict[str, float]:
    """The largest heap left after a collection during a step (MB; NaN: no collection ran in it)."""
    after = [mb for at, mb in collections if start_s <= at <= end_s]
    return {"jvm_live_heap_mb": float(max(after)) if after else float("nan"), "gcs": float(len(after))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impressions", default="1e6,5e6,2e7", help="impressions per day, comma-separated")
    parser.add_argument("--cores", type=int, default=2, help="the worker's executor cores")
    parser.add_argument("--executor-memory", default="2g")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--work-dir", default=None, help="keep homes and logs here (default: a temp directory)")
    parser.add_argument("--simulate-only", action="store_true", help="write the landing of every size and stop")
    parser.add_argument("--child", nargs=3, metavar=("HOME", "MASTER", "EVENT_DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--master", default=None,
                        help="a running standalone master (spark://...) instead of starting one from the wheel")
    args = parser.parse_args(argv)
    if args.child:
        home, master, event_dir = args.child
        print(json.dumps(run_driver(Path(home), master, Path(event_dir), args.driver_memory, args.executor_memory)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the cluster helper lives beside the tests
    from tests.platform.spark.cluster import standalone_cluster

    sizes = [float(s) for s in args.impressions.split(",")]
    base = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_spark_cluster_"))
    for size in sizes:
        began = time.perf_counter()
        if _simulate(base / f"home_{size:.0e}" / "landing", size):
            print(f"simulated {size:.0e} impressions in {time.perf_counter() - began:.0f} s", flush=True)
    if args.simulate_only:
        return
    rows = {}
    with contextlib.ExitStack() as stack:
        master = args.master or stack.enter_context(
            standalone_cluster(base / "cluster", cores=args.cores, memory=args.executor_memory)).master_url
        for size in sizes:
            home, events = base / f"home_{size:.0e}", base / f"events_{size:.0e}"
            # Every run starts from an empty warehouse and event log (the landing is kept: see _simulate).
            shutil.rmtree(home / "spark_warehouse", ignore_errors=True)
            (home / "warehouse.duckdb").unlink(missing_ok=True)
            shutil.rmtree(events, ignore_errors=True)
            events.mkdir(parents=True, exist_ok=True)
            child = subprocess.run([sys.executable, __file__, "--driver-memory", args.driver_memory, "--executor-memory",
                                    args.executor_memory, "--child", str(home), master, str(events)],
                                   capture_output=True, text=True, check=False)
            if child.returncode:
                sys.exit(f"{size:.0e}: driver failed:\n{child.stderr[-4000:]}")
            driver = json.loads(child.stdout.strip().splitlines()[-1])
            events_by_step = parse_event_log(events)
            gc_events = parse_gc_log(events.parent / f"{events.name}_driver_gc.log")
            rows[size] = {step: {**driver[step], **events_by_step.get(step, {}),
                                 **live_heap(gc_events, *driver[step]["jvm_uptime_s"])} for step in STEPS}
            rows[size]["_rows"] = driver["rows"]
            (base / f"results_{size:.0e}.json").write_text(json.dumps(rows[size]))  # kept if a larger size fails
            print(f"{size:.0e}: {driver['rows']}", flush=True)
    _print(rows, sizes)


def _print(rows: dict, sizes: list[float]) -> None:
    columns = ("wall_s", "executor_cpu_s", "python_peak_mb", "jvm_live_heap_mb", "gcs", "jvm_heap_peak_mb",
               "jvm_peak_rss_mb", "tasks", "result_bytes")
    print("| impressions/day | step | " + " | ".join(columns) + " |")
    print("|---:|---|" + "---:|" * len(columns))
    for size in sizes:
        for step in STEPS:
            values = rows[size][step]
            print(f"| {size:,.0f} | {step} | " + " | ".join(f"{values.get(c, float('nan')):,.1f}" for c in columns) + " |")
    smallest = sizes[0]
    for size in sizes[1:]:
        print(f"\ngrowth {smallest:.0e} -> {size:.0e} (x{size / smallest:.0f} impressions):")
        for step in STEPS:
            ratios = ", ".join(f"{c} {rows[size][step].get(c, 0) / rows[smallest][step].get(c, 1):.2f}x"
                               for c in columns if rows[smallest][step].get(c))
            print(f"  {step}: {ratios}")


if __name__ == "__main__":
    main()
