"""What the driver pays for the audit on Spark as a day grows (`audit.spark_audit`, `audit.spark_pairwise`), on a
local standalone cluster.

A master and one worker are started from the pyspark wheel (tests/platform/spark/cluster.py), or ``--master`` names a
running one. For each day size a fresh driver process generates the day on the executors (``spark.range``: an item
per row from a catalogue of ``--items``, two groups by item, a label by item, a per-impression score = label + group
shift + noise, so nearly every score is distinct; ``--rows-per-query`` consecutive rows make one query), then runs
each of ``--passes`` on it:

- ``audit``: audits the logged score with ``--variance`` (default the item-clustered one, the audit's default
  estimand): scored on the executors, range-partitioned by score into ``--partitions`` ranges, swept per range from
  the driver's offsets, influence sums per item shuffled by item (the clustered variances; `audit.spark_clusters`);
- ``pairwise``: the within-query pairwise accuracies of the logged score, two-way clustered by item and query, on
  every query of the day (the pipeline samples at most ``pairwise_max_queries`` of them; every query is the
  largest sample): whole queries per partition (``--partitions``), item x query cells shuffled by item.

Per size and pass it prints the wall time, executors' CPU time and the bytes its tasks returned to the driver
(Spark's event log: task metrics `Executor CPU Time`, `Result Size`, of the jobs the pass submitted), the driver's
peak memory (Python peak RSS during the pass, sampled every 0.05 s; JVM: the live heap, the largest heap left after a
collection during the pass, from the driver JVM's GC log, and the peak heap used from the event log's driver
metrics, garbage included) and the growth ratios from the smallest size: flat driver figures mean no row reaches the
driver.

    python benchmarks/bench_spark_audit.py --rows 1e6,2e7 [--passes audit,pairwise]
        [--variance item_clustered|conditional] [--partitions 16] [--rows-per-query 20] [--cores 2]
        [--executor-memory 2g]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PASSES = ("audit", "pairwise")
COLUMNS = ("wall_s", "executor_cpu_s", "result_bytes", "tasks", "python_peak_mb", "jvm_live_heap_mb", "gcs",
           "jvm_heap_peak_mb")
SAMPLE_S = 0.05


def logged_score(frame):
    return frame["score"].to_numpy()


class PeakRss(threading.Thread):
    """This process's peak RSS (MB) while the `with` block runs, sampled every SAMPLE_S seconds."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.stopped = 0.0, threading.Event()

    def _sample(self) -> None:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                self.peak = max(self.peak, int(line.split()[1]) / 1024)

    def run(self) -> None:
        while not self.stopped.is_set():
            self._sample()
            self.stopped.wait(SAMPLE_S)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.join()
        self._sample()


def generated_day(spark, rows: int, items: int, source_partitions: int, rows_per_query: int):
    """The day on the executors: query_id, group, item_id, score, n_pos, n_neg (one labelled impression a row)."""
    from pyspark.sql import functions as F

    item = F.pmod(F.xxhash64("id"), F.lit(items))
    label = (F.pmod(F.xxhash64(item, F.lit(2)), F.lit(100)) < 35).cast("double")
    group_b = F.pmod(F.xxhash64(item, F.lit(1)), F.lit(10)) < 4
    return spark.range(0, rows, numPartitions=source_partitions).select(
        F.concat(F.lit("q"), F.floor(F.col("id") / rows_per_query).cast("string")).alias("query_id"),
        F.when(group_b, "b").otherwise("a").alias("group"), item.cast("string").alias("item_id"),
        (label + F.when(group_b, 0.5).otherwise(0.0) + F.randn(7)).alias("score"),
        label.alias("n_pos"), (1.0 - label).alias("n_neg"))


def _audit(day, partitions: int, variance: str) -> dict:
    from fair_pipeline.audit.spark_audit import audit_spark_rows
    from fair_pipeline.audit.sql import check_variance

    report, _ = audit_spark_rows(day, logged_score, "logged", [0.1], min_count=10, confidence=0.95,
                                 estimand=variance, cluster_cols=check_variance(variance)[:1], partitions=partitions)
    groups = report.groups[report.groups["cutoff"] == 0.1]
    return {"labelled": float(groups["n_pos"].sum() + groups["n_neg"].sum()),
            "auc_0.1": dict(zip(groups["group"], groups["auc"])), "se_0.1": dict(zip(groups["group"], groups["se"])),
            "clusters": float(groups["clusters"].max()) if "clusters" in groups else float("nan")}


def _pairwise(day, partitions: int) -> dict:
    from fair_pipeline.audit.spark_pairwise import pairwise_spark_rows

    result, queries = pairwise_spark_rows(day, logged_score, "logged", ["a", "b"], partitions=partitions)
    better = result.marginals[result.marginals["role"] == "better"]  # A_{g>:}: g's positives above the others
    return {"queries": float(queries), "pairs": float(result.matrix["n_pairs"].sum()),
            "items": float(result.matrix["n_items"].max()),
            "accuracy": dict(zip(better["group"], better["accuracy"])), "se": dict(zip(better["group"], better["se"]))}


def run_driver(master: str, event_dir: Path, rows: int, items: int, partitions: int, source_partitions: int,
               executor_memory: str, variance: str, passes: list[str], rows_per_query: int) -> dict:
    """Child process: generate the day on the executors, run each pass on it; per pass its wall time and time
    window, the driver's peak Python RSS during it, and what it found (a check that it ran on the rows)."""
    from fair_pipeline.platform.engines.spark_engine import spark_session

    spark = spark_session(master=master, driver_memory="1g", config={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": event_dir.as_uri(),
        "spark.eventLog.logStageExecutorMetrics": "true", "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false", "spark.executor.memory": executor_memory,
        # One line per collection with the heap after it: the live heap the driver holds (garbage excluded).
        "spark.driver.extraJavaOptions": f"-Xlog:gc:file={_gc_log(event_dir)}:timemillis,uptime"})
    day = generated_day(spark, rows, items, source_partitions, rows_per_query)
    out = {}
    for name in passes:
        spark.sparkContext.setJobDescription(name)  # the pass's jobs in the event log
        began, began_at = time.perf_counter(), time.time()
        with PeakRss() as rss:
            found = _audit(day, partitions, variance) if name == "audit" else _pairwise(day, partitions)
        wall = time.perf_counter() - began
        out[name] = {"wall_s": wall, "window": (began_at, began_at + wall), "python_peak_mb": rss.peak, **found}
    spark.stop()
    return out


def _gc_log(event_dir: Path) -> Path:
    return event_dir.parent / f"{event_dir.name}_driver_gc.log"


def live_heap(gc_log: Path, window: tuple[float, float]) -> dict[str, float]:
    """The largest heap left after a collection of the driver JVM during a pass (MB) and the collections."""
    from spark_cluster_logs import parse_gc_log

    after = [mb for at, mb in parse_gc_log(gc_log) if window[0] <= at <= window[1]]
    return {"jvm_live_heap_mb": float(max(after)) if after else float("nan"), "gcs": float(len(after))}


def run_sizes(master: str, base: Path, sizes: list[int], items: int, partitions: int, source_partitions: int,
              executor_memory: str, variance: str, passes: list[str], rows_per_query: int) -> dict[int, dict]:
    """Each size in a fresh driver process; {rows: {pass: its figures joined with its event log's}}."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from spark_cluster_logs import parse_event_log

    out = {}
    for rows in sizes:
        events = base / f"events_{rows}"
        events.mkdir(parents=True, exist_ok=True)
        child = subprocess.run([sys.executable, __file__, "--child", master, str(events), str(rows), str(items),
                                str(partitions), str(source_partitions), executor_memory, variance, ",".join(passes),
                                str(rows_per_query)], capture_output=True, text=True, check=False)
        if child.returncode:
            raise RuntimeError(f"{rows:,} rows: driver failed:\n{child.stderr[-4000:]}")
        driver = json.loads(child.stdout.strip().splitlines()[-1])
        spark = parse_event_log(events)
        out[rows] = {name: {**figures, **spark.get(name, {}), **live_heap(_gc_log(events), figures["window"])}
                     for name, figures in driver.items()}
        out[rows]["load_average"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1e6,2e7", help="impressions per day, comma-separated")
    parser.add_argument("--passes", default=",".join(PASSES), help=f"comma-separated, of {', '.join(PASSES)}")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--rows-per-query", type=int, default=20, help="consecutive rows that make one query")
    parser.add_argument("--partitions", type=int, default=16, help="score ranges / query partitions per pass")
    parser.add_argument("--source-partitions", type=int, default=8, help="partitions of the generated day")
    parser.add_argument("--cores", type=int, default=2, help="the worker's executor cores")
    parser.add_argument("--executor-memory", default="2g")
    parser.add_argument("--variance", default="item_clustered", choices=["item_clustered", "conditional"])
    parser.add_argument("--master", default=None, help="a running standalone master instead of starting one")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--child", nargs=10, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        master, events, rows, items, partitions, source_partitions, memory, variance, passes, per_query = args.child
        print(json.dumps(run_driver(master, Path(events), int(rows), int(items), int(partitions),
                                    int(source_partitions), memory, variance, passes.split(","), int(per_query))))
        return
    passes = args.passes.split(",")
    if not passes or set(passes) - set(PASSES):
        parser.error(f"--passes {args.passes!r}: each must be one of {', '.join(PASSES)}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the cluster helper lives beside the tests
    from tests.platform.spark.cluster import standalone_cluster

    sizes = [int(float(s)) for s in args.rows.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench_spark_audit_") as tmp, contextlib.ExitStack() as stack:
        master = args.master or stack.enter_context(
            standalone_cluster(Path(tmp) / "cluster", cores=args.cores, memory=args.executor_memory)).master_url
        figures = run_sizes(master, Path(tmp), sizes, args.items, args.partitions, args.source_partitions,
                            args.executor_memory, args.variance, passes, args.rows_per_query)
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in figures.items()}))
    print(f"on Spark: {args.items:,} items, 2 groups, {args.rows_per_query} rows a query, {args.partitions} "
          f"partitions; audit of the logged score ({args.variance} variance), pairwise accuracies (two-way)")
    print("| impressions/day | pass | " + " | ".join(COLUMNS) + " |")
    print("|---:|---|" + "---:|" * len(COLUMNS))
    for rows in sizes:
        for name in passes:
            print(f"| {rows:,} | {name} | " + " | ".join(f"{figures[rows][name].get(c, float('nan')):,.1f}"
                                                        for c in COLUMNS) + " |")
    print("load average (1 min) after each size: " + ", ".join(f"{figures[r]['load_average']:.1f}" for r in sizes))
    for rows in sizes[1:]:
        for name in passes:
            before, after = figures[sizes[0]][name], figures[rows][name]
            ratios = ", ".join(f"{c} {after[c] / before[c]:.2f}x" for c in COLUMNS if before.get(c))
            print(f"growth {sizes[0]:.0e} -> {rows:.0e} (x{rows / sizes[0]:.0f} rows), {name}: {ratios}")


if __name__ == "__main__":
    main()
