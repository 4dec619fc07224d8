"""What the driver pays for the audit on Spark as a day grows (`audit.spark_audit`), on a local standalone cluster.

A master and one worker are started from the pyspark wheel (tests/platform/spark/cluster.py), or ``--master`` names a
running one. For each day size a fresh driver process generates the day on the executors (``spark.range``: an item
per row from a catalogue of ``--items``, two groups by item, a label by item, a per-impression score = label + group
shift + noise, so nearly every score is distinct), then audits the logged score with ``--variance`` (default the
item-clustered one, the audit's default estimand): scored on the executors, range-partitioned by score into
``--partitions`` ranges, swept per range from the driver's offsets, influence sums per item shuffled by item (the
clustered variances; `audit.spark_clusters`). Per size it prints the
audit's wall time, executors' CPU time and the bytes its tasks returned to the driver (Spark's event log: task metrics
`Executor CPU Time`, `Result Size`), the driver's peak memory (Python peak RSS; JVM: the live heap, the largest
heap left after a collection during the audit, from the driver JVM's GC log, and the peak heap used from the event
log's driver metrics, garbage included) and the growth ratios from the smallest size: flat driver figures mean no row reaches the driver.

    python benchmarks/bench_spark_audit.py --rows 1e6,2e7 [--variance item_clustered|conditional] [--partitions 16]
        [--cores 2] [--executor-memory 2g]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = "audit"
COLUMNS = ("wall_s", "executor_cpu_s", "result_bytes", "tasks", "python_peak_mb", "jvm_live_heap_mb", "gcs",
           "jvm_heap_peak_mb")


def logged_score(frame):
    return frame["score"].to_numpy()


def run_driver(master: str, event_dir: Path, rows: int, items: int, partitions: int, source_partitions: int,
               executor_memory: str, variance: str) -> dict:
    """Child process: generate the day on the executors, audit it; the audit's wall time, peak driver RSS and
    the I(0.1) of each group (a check that it ran on the rows)."""
    from pyspark.sql import functions as F

    from fair_pipeline.audit.spark_audit import audit_spark_rows
    from fair_pipeline.audit.sql import check_variance
    from fair_pipeline.platform.engines.spark_engine import spark_session

    spark = spark_session(master=master, driver_memory="1g", config={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": event_dir.as_uri(),
        "spark.eventLog.logStageExecutorMetrics": "true", "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false", "spark.executor.memory": executor_memory,
        # One line per collection with the heap after it: the live heap the driver holds (garbage excluded).
        "spark.driver.extraJavaOptions": f"-Xlog:gc:file={_gc_log(event_dir)}:timemillis,uptime"})
    item = F.pmod(F.xxhash64("id"), F.lit(items))
    label = (F.pmod(F.xxhash64(item, F.lit(2)), F.lit(100)) < 35).cast("double")
    group_b = F.pmod(F.xxhash64(item, F.lit(1)), F.lit(10)) < 4
    day = spark.range(0, rows, numPartitions=source_partitions).select(
        F.when(group_b, "b").otherwise("a").alias("group"), item.alias("item_id"),
        (label + F.when(group_b, 0.5).otherwise(0.0) + F.randn(7)).alias("score"),
        label.alias("n_pos"), (1.0 - label).alias("n_neg"))
    spark.sparkContext.setJobDescription(STEP)
    began, began_at = time.perf_counter(), time.time()
    report, _ = audit_spark_rows(day, logged_score, "logged", [0.1], min_count=10, confidence=0.95,
                                 estimand=variance, cluster_cols=check_variance(variance)[:1], partitions=partitions)
    wall = time.perf_counter() - began
    groups = report.groups[report.groups["cutoff"] == 0.1]
    spark.stop()
    return {"wall_s": wall, "window": (began_at, began_at + wall), "python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "labelled": float(groups["n_pos"].sum() + groups["n_neg"].sum()),
            "auc_0.1": dict(zip(groups["group"], groups["auc"])), "se_0.1": dict(zip(groups["group"], groups["se"])),
            "clusters": float(groups["clusters"].max()) if "clusters" in groups else float("nan")}


def _gc_log(event_dir: Path) -> Path:
    return event_dir.parent / f"{event_dir.name}_driver_gc.log"


def live_heap(gc_log: Path, window: tuple[float, float]) -> dict[str, float]:
    """The largest heap left after a collection of the driver JVM during the audit (MB) and the collections."""
    from bench_spark_cluster import parse_gc_log

    after = [mb for at, mb in parse_gc_log(gc_log) if window[0] <= at <= window[1]]
    return {"jvm_live_heap_mb": float(max(after)) if after else float("nan"), "gcs": float(len(after))}


def run_sizes(master: str, base: Path, sizes: list[int], items: int, partitions: int, source_partitions: int,
              executor_memory: str, variance: str) -> dict[int, dict]:
    """Each size in a fresh driver process; its figures joined with its event log's."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_spark_cluster import parse_event_log

    out = {}
    for rows in sizes:
        events = base / f"events_{rows}"
        events.mkdir(parents=True, exist_ok=True)
        child = subprocess.run([sys.executable, __file__, "--child", master, str(events), str(rows), str(items),
                                str(partitions), str(source_partitions), executor_memory, variance],
                               capture_output=True, text=True, check=False)
        if child.returncode:
            raise RuntimeError(f"{rows:,} rows: driver failed:\n{child.stderr[-4000:]}")
        driver = json.loads(child.stdout.strip().splitlines()[-1])
        out[rows] = {**driver, "load_average": os.getloadavg()[0], **parse_event_log(events).get(STEP, {}), **live_heap(_gc_log(events), driver["window"])}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1e6,2e7", help="impressions per day, comma-separated")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=16, help="score ranges swept in parallel")
    parser.add_argument("--source-partitions", type=int, default=8, help="partitions of the generated day")
    parser.add_argument("--cores", type=int, default=2, help="the worker's executor cores")
    parser.add_argument("--executor-memory", default="2g")
    parser.add_argument("--variance", default="item_clustered", choices=["item_clustered", "conditional"])
    parser.add_argument("--master", default=None, help="a running standalone master instead of starting one")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--child", nargs=8, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        master, events, rows, items, partitions, source_partitions, memory, variance = args.child
        print(json.dumps(run_driver(master, Path(events), int(rows), int(items), int(partitions),
                                    int(source_partitions), memory, variance)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the cluster helper lives beside the tests
    from tests.platform.spark.cluster import standalone_cluster

    sizes = [int(float(s)) for s in args.rows.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench_spark_audit_") as tmp, contextlib.ExitStack() as stack:
        master = args.master or stack.enter_context(
            standalone_cluster(Path(tmp) / "cluster", cores=args.cores, memory=args.executor_memory)).master_url
        figures = run_sizes(master, Path(tmp), sizes, args.items, args.partitions, args.source_partitions,
                            args.executor_memory, args.variance)
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in figures.items()}))
    print(f"audit of the logged score on Spark ({args.variance} variance): {args.partitions} score ranges, "
          f"{args.items:,} items, 2 groups")
    print("| impressions/day | " + " | ".join(COLUMNS) + " |")
    print("|---:|" + "---:|" * len(COLUMNS))
    for rows in sizes:
        print(f"| {rows:,} | " + " | ".join(f"{figures[rows].get(c, float('nan')):,.1f}" for c in COLUMNS) + " |")
    print("load average (1 min) after each size: " + ", ".join(f"{figures[r]['load_average']:.1f}" for r in sizes))
    for rows in sizes[1:]:
        ratios = ", ".join(f"{c} {figures[rows][c] / figures[sizes[0]][c]:.2f}x" for c in COLUMNS
                           if figures[sizes[0]].get(c))
        print(f"growth {sizes[0]:.0e} -> {rows:.0e} (x{rows / sizes[0]:.0f} rows): {ratios}")


if __name__ == "__main__":
    main()
