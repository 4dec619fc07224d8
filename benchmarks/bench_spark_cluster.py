"""What the driver pays as a day grows, on a local standalone Spark cluster: the whole main job, per step.

A master and one worker are started from the pyspark wheel (tests/platform/spark/cluster.py). For each day size the
main job runs as users run it, `fair-pipeline run --engine spark --spark-master spark://... --no-simulate`, in a
process of its own (its own driver, the engine's default 1 GB heap) on two simulated days of that size (the newest
day and the day it trains on): ingestion (the executors read and validate the landing files), the SQL models,
position bias, the EO transforms, the ranker candidates (training), the fairness audit, model selection and the
report. Per step (Dagster's step start and end times in the run's event log; Spark jobs belong to the step during
which they were submitted) it prints: wall time, the executors' CPU time and the bytes tasks returned to the driver
(Spark's event log: task metrics `Executor CPU Time`, `Result Size`), the driver's peak memory: Python (the driver
process's RSS, sampled every 0.2 s) and JVM: the live heap (the largest heap left after a collection during the step,
from the driver JVM's GC log: Young, Mixed and Full pauses, not a concurrent cycle's Remark and Cleanup, which copy
no live objects: the heap after them still holds what died while the cycle marked), the peak heap used (the event log's driver metrics: garbage included) and the driver
JVM's peak RSS (sampled). Then the growth ratios from the smallest size to each larger one: flat driver figures mean
nothing row-sized reaches the driver; and, stage by stage, the bytes returned by the Spark stages completed at both
sizes (the same job sequence: matched by stage id, name and tasks).

`--steps eo,selection` runs again only those steps' assets on each size's home the benchmark ran before (the newest
day; `benchmarks/spark_steps.py` is that driver: the same flags, stores and 1 GB driver, every other asset read as
stored), with the same instrumentation, its logs in the home's `steps_<steps>` folder: a changed step measured at
every size in minutes. A step's memory there starts from a fresh driver, not from the earlier steps' leftovers.

Every log is written as the job goes (the memory samples too), so `--from-logs` also reads a job still running or
stopped before its end: a step it had not finished is shown as "<step> (so far)", its figures up to then, without a
growth ratio; the stage comparison covers the stages it completed. Each measurement counts only the Dagster runs
its own process started (`spark_cluster_logs.measured_interval`): a later `--steps` run on a home is never part of
its main job's figures.

    python benchmarks/bench_spark_cluster.py --impressions 1e6,5e6,2e7 [--cores 2] [--executor-memory 2g]
                                             [--driver-memory 1g] [--work-dir DIR] [--spark-conf KEY=VALUE]
                                             [--spark-warehouse URI] [--steps eo,selection] [--from-logs]

The catalogue (items) is fixed across sizes; the simulated landing of every size is written first (its time is not
part of any step) and reused by later runs with the same --work-dir (--simulate-only writes it and stops).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the log analysis and the cluster helper
from benchmarks.spark_cluster_logs import RUNNING, SAMPLES, STEP_OF, analyse  # noqa: E402

START = dt.date(2026, 1, 1)
DAYS = 2  # the newest day and the one day before it that its models train on
SLOTS = 20
ITEMS = 20_000
# Impressions per production request: production + shuffle + adjacent-swap requests (0.2 each), SLOTS items each.
IMPRESSIONS_PER_REQUEST = SLOTS * 1.4
SIMULATED_MARKER = "simulated.txt"
SAMPLE_S = 0.2
RERUNNABLE = ("position bias", "eo", "training", "audit", "selection", "report")  # the train-and-audit job's
CLEARED = ("DAGSTER_HOME", "MLFLOW_TRACKING_URI", "FAIR_PIPELINE_ENGINE", "FAIR_PIPELINE_SPARK_MASTER",
           "FAIR_PIPELINE_SPARK_CONF", "FAIR_PIPELINE_SPARK_DRIVER_MEMORY")


def _simulate(home: Path, impressions: float) -> bool:
    """Writes the landing once: a `--work-dir` that already holds it (its marker written last) is reused, so the
    large sizes are simulated once across runs. Returns whether it simulated."""
    args = ["--start", START.isoformat(), "--days", str(DAYS), "--items", str(ITEMS), "--slots", str(SLOTS),
            "--requests-per-day", str(round(impressions / IMPRESSIONS_PER_REQUEST))]
    marker = home / SIMULATED_MARKER
    if marker.exists() and marker.read_text() == repr(args):
        return False
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "fair_pipeline.commands", "--home", str(home), "simulate", *args],
                   check=True, capture_output=True, text=True, env=_environment())
    marker.write_text(repr(args))
    return True


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in CLEARED}


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _java_child(pid: int) -> int | None:
    """The driver JVM: the process's java child (classic pyspark launches it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid and "java" in (entry / "cmdline").read_text():
                    return int(entry.name)
            except OSError:
                continue
    return None


class MemorySampler(threading.Thread):
    """(time, driver Python RSS MB, driver JVM RSS MB) every SAMPLE_S seconds while the driver process lives, each
    also appended to `path` as it is taken (a run stopped before its end keeps its samples)."""

    def __init__(self, pid: int, path: Path):
        super().__init__(daemon=True)
        self.pid, self.path, self.samples, self.stopped = pid, path, [], threading.Event()

    def run(self) -> None:
        jvm = None
        with self.path.open("w") as out:
            while not self.stopped.is_set():
                python = _rss_mb(self.pid)
                if python is None:
                    return
                jvm = jvm or _java_child(self.pid)
                self.samples.append((time.time(), python, (_rss_mb(jvm) or 0.0) if jvm else 0.0))
                out.write(json.dumps(self.samples[-1]) + "\n")
                out.flush()
                self.stopped.wait(SAMPLE_S)


def run_main_job(home: Path, master: str, logs: Path, args, assets: list[str] | None = None) -> tuple[list, float]:
    """The main job (or only the Dagster `assets`, see spark_steps.py) in a process of its own, its event log, GC
    log and memory samples in `logs`; returns its memory samples and wall seconds."""
    events, gc_log = logs / "event_log", logs / "driver_gc.log"
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.logStageExecutorMetrics": "true", "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false", "spark.executor.memory": args.executor_memory,
            # One line per collection with the heap before -> after it: the live heap, which garbage not yet
            # collected (the event log's heap used, the process's RSS) does not show.
            "spark.driver.extraJavaOptions": f"-Xlog:gc:file={gc_log}:timemillis,uptime"}
    command = ([sys.executable, "-m", "fair_pipeline.commands", "--home", str(home), "run", "--no-simulate"]
               if assets is None else [sys.executable, str(Path(__file__).with_name("spark_steps.py")), "--home",
                                       str(home), "--assets", ",".join(assets)])
    command += ["--engine", "spark", "--spark-master", master, "--spark-driver-memory", args.driver_memory]
    for key, value in conf.items():
        command += ["--spark-conf", f"{key}={value}"]
    for setting in args.spark_conf:
        command += ["--spark-conf", setting]
    if args.spark_warehouse:  # one directory per size under it: every size starts from empty tables
        command += ["--spark-warehouse", f"{args.spark_warehouse.rstrip('/')}/{home.name}"]
    began = time.time()
    with (logs / "main_job.log").open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_environment(), cwd=home)
        sampler = MemorySampler(process.pid, logs / SAMPLES)
        sampler.start()
        code = process.wait()
        sampler.stopped.set()
        sampler.join()
    if code:
        tail = "\n".join((logs / "main_job.log").read_text(errors="replace").splitlines()[-60:])
        sys.exit(f"{home.name}: the main job failed ({code}):\n{tail}")
    return sampler.samples, time.time() - began


def steps_logs(home: Path, steps: list[str] | None) -> Path:
    """Where a run's logs are: the home for the main job, a folder of it for a run of some steps."""
    return home / ("steps_" + "+".join(s.replace(" ", "-") for s in steps)) if steps else home


def measure(home: Path, master: str, args, steps: list[str] | None = None) -> dict:
    """Runs the main job on a home holding only its landing (or, given `steps`, only their assets on a home the main
    job ran), then `analyse`s its logs."""
    logs = steps_logs(home, steps)
    if steps:
        if not (home / "dagster_home").is_dir() or not (home / "landing").is_dir():  # the truth, the catalogues
            sys.exit(f"{home.name}: --steps runs steps again on a home the main job ran, its landing kept")
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir()
    else:  # Every run starts from an empty home but its landing (see _simulate).
        for child in home.iterdir():
            if child.name not in ("landing", SIMULATED_MARKER):
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    (logs / "event_log").mkdir()
    load_before, since = os.getloadavg(), time.time()
    # The start first: --from-logs of a run still going counts only the Dagster runs it started.
    (logs / "run.json").write_text(json.dumps({"since": since, "load_before": load_before}))
    assets = [key for key, step in STEP_OF.items() if step in steps] if steps else None
    samples, wall = run_main_job(home, master, logs, args, assets)
    (logs / "driver_memory.json").write_text(json.dumps(samples))  # kept beside the logs: --from-logs reads them
    (logs / "run.json").write_text(json.dumps({"wall_s": wall, "load_before": load_before,
                                               "load_after": os.getloadavg(), "since": since, "until": time.time()}))
    return analyse(home, logs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impressions", default="1e6,5e6,2e7", help="impressions per day, comma-separated")
    parser.add_argument("--cores", type=int, default=2, help="the worker's executor cores")
    parser.add_argument("--executor-memory", default="2g")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--work-dir", default=None, help="keep homes and logs here (default: a temp directory)")
    parser.add_argument("--simulate-only", action="store_true", help="write the landing of every size and stop")
    parser.add_argument("--from-logs", action="store_true",
                        help="run nothing: print the figures of the runs already measured in --work-dir")
    parser.add_argument("--master", default=None,
                        help="a running standalone master (spark://...) instead of starting one from the wheel")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="more Spark settings for the main job (repeatable)")
    parser.add_argument("--spark-warehouse", default=None, metavar="URI",
                        help="the Spark tables under this URI (a directory per size) instead of each home")
    parser.add_argument("--steps", default=None, metavar="STEP,...",
                        help="run only these steps again on the homes the main job ran in --work-dir: "
                             + ", ".join(RERUNNABLE))
    args = parser.parse_args(argv)
    steps = args.steps.split(",") if args.steps else None
    if steps and not set(steps) <= set(RERUNNABLE):
        parser.error(f"--steps: {', '.join(sorted(set(steps) - set(RERUNNABLE)))} cannot run alone; "
                     f"steps that can: {', '.join(RERUNNABLE)}")
    from tests.platform.spark.cluster import standalone_cluster

    sizes = [float(s) for s in args.impressions.split(",")]
    base = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_spark_cluster_")).resolve()
    logs = {size: steps_logs(base / f"home_{size:.0e}", steps) for size in sizes}
    if args.from_logs:
        _print({size: analyse(base / f"home_{size:.0e}", logs[size]) for size in sizes}, sizes, logs)
        return
    for size in sizes if not steps else ():  # --steps: the homes as the main job left them
        began = time.perf_counter()
        if _simulate(base / f"home_{size:.0e}", size):
            print(f"simulated {DAYS} days of {size:.0e} impressions in {time.perf_counter() - began:.0f} s", flush=True)
    if args.simulate_only:
        return
    results = "results_steps_" + "+".join(s.replace(" ", "-") for s in steps) if steps else "results"
    rows = {}
    with contextlib.ExitStack() as stack:
        master = args.master or stack.enter_context(
            standalone_cluster(base / "cluster", cores=args.cores, memory=args.executor_memory)).master_url
        for size in sizes:
            rows[size] = measure(base / f"home_{size:.0e}", master, args, steps)
            (base / f"{results}_{size:.0e}.json").write_text(json.dumps(rows[size]))  # kept if a larger size fails
            run = rows[size]["_run"]
            print(f"{size:.0e}: {'steps ' + args.steps if steps else 'main job'} {run['wall_s']:.0f} s, load average {run['load_before'][0]:.1f} before, "
                  f"{run['load_after'][0]:.1f} after", flush=True)
    _print(rows, sizes, logs)


COLUMNS = ("wall_s", "executor_cpu_s", "python_peak_mb", "jvm_live_heap_mb", "gcs", "jvm_heap_peak_mb",
           "jvm_peak_rss_mb", "tasks", "result_bytes")
DRIVER = ("python_peak_mb", "jvm_live_heap_mb", "jvm_heap_peak_mb", "jvm_peak_rss_mb", "tasks", "result_bytes")


def _print(rows: dict, sizes: list[float], logs: dict[float, Path] | None = None) -> None:
    steps = list(dict.fromkeys(s for size in sizes for s in rows[size] if s != "_run"))
    print("| impressions/day | step | " + " | ".join(COLUMNS) + " |")
    print("|---:|---|" + "---:|" * len(COLUMNS))
    for size in sizes:
        for step in [*steps, "_run"]:
            if step not in rows[size]:
                continue
            values = rows[size][step]
            print(f"| {size:,.0f} | {step.strip('_')} | " + " | ".join(
                f"{values.get(c, float('nan')):,.1f}" for c in COLUMNS) + " |")
    smallest = sizes[0]
    for size in sizes[1:]:
        print(f"\ngrowth {smallest:.0e} -> {size:.0e} (x{size / smallest:.0f} impressions):")
        ended = not any(step.endswith(RUNNING) for step in rows[size])
        # a step still running, or with fewer of its Dagster steps run, at one size has figures of part of its
        # work: no ratio
        compared = [s for s in steps if not s.endswith(RUNNING) and rows[size].get(s, {}).get("wall_s")
                    and rows[smallest].get(s, {}).get("wall_s")
                    and rows[size][s].get("dagster_steps") == rows[smallest][s].get("dagster_steps")]
        for step in [*compared, *(["_run"] if ended else [])]:
            before, after = rows[smallest].get(step, {}), rows[size].get(step, {})
            ratios = ", ".join(f"{c} {after.get(c, 0) / before[c]:.2f}x" for c in COLUMNS if before.get(c))
            print(f"  {step.strip('_')}: {ratios}")
        if not ended:
            print("  not ended: " + ", ".join(s for s in steps if s not in compared and rows[smallest].get(s, {})
                                               .get("wall_s") and s != "between steps") + " (no ratio)")
        worst = {c: max((rows[size].get(s, {}).get(c, 0) / rows[smallest][s][c]
                         for s in compared if rows[smallest].get(s, {}).get(c)), default=float("nan")) for c in DRIVER}
        print("  largest growth of a step's driver figure: " + ", ".join(f"{c} {v:.2f}x" for c, v in worst.items()))
        if logs is not None:
            print("  stages: " + stage_growth(logs[smallest] / "event_log", logs[size] / "event_log"))


if __name__ == "__main__":
    main()
