"""Reading a measured run of bench_spark_cluster.py from its logs: Dagster's step times, Spark's event log, the
driver JVM's GC log and the driver's memory samples, per benchmark step.

A home holds the main job's logs and, in `steps_<steps>` folders, those of later runs of some of its steps
(`--steps`); its Dagster event log holds every one of those runs, so a measurement counts only the Dagster runs its
own process started (`measured_interval`).
"""
from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path

SAMPLES = "driver_memory.jsonl"  # the samples as they are taken; driver_memory.json once the job has ended
RUNNING = " (so far)"  # a step still running when the logs were read: its figures up to then
# Dagster step (asset) -> benchmark step; any other step is reported under its own name.
STEP_OF = {"raw__items": "items", "raw__observational_impressions": "ingest", "raw__randomized_impressions": "ingest",
           "marts__position_bias_curves": "position bias", "marts__eo_transforms": "eo", "marts__eo_evaluation": "eo",
           "marts__ranker_candidates": "training", "marts__fairness_audit": "audit",
           "marts__elicited_metric": "selection", "marts__model_selection": "selection",
           "reporting__fairness_report": "report"}
STEPS = ("items", "ingest", "sql models", "position bias", "eo", "training", "audit", "selection", "report",
         "between steps")


def step_windows(dagster_home: Path, sql_steps: set[str], since: float = 0.0,
                 until: float = float("inf")) -> list[tuple[str, float, float]]:
    """(benchmark step, start, end) of every Dagster step of the runs in the home that started between `since` and
    `until` (the measured process's lifetime), from Dagster's event log: a run started later on the same home (a
    `--steps` run measured after the main job) is another measurement's."""
    import dagster as dg

    from fair_pipeline.platform.settings import restored_variables

    windows = []
    with restored_variables("DAGSTER_HOME"):  # the caller's own DAGSTER_HOME comes back
        os.environ["DAGSTER_HOME"] = str(dagster_home)
        instance = dg.DagsterInstance.get()
    with instance:
        for record in instance.get_run_records():
            started = record.start_time or record.create_timestamp.timestamp()
            if not since <= started <= until:
                continue
            began = {}
            for entry in instance.all_logs(record.dagster_run.run_id):
                event, key = entry.dagster_event, entry.step_key
                if event is None or key is None:
                    continue
                if event.event_type_value == "STEP_START":
                    began[key] = entry.timestamp
                elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and key in began:
                    step = STEP_OF.get(key) or ("sql models" if key in sql_steps else key)
                    windows.append((step, began.pop(key), entry.timestamp))
            for key, at in began.items():  # a run still going (or stopped): its running steps, up to now
                windows.append(((STEP_OF.get(key) or ("sql models" if key in sql_steps else key)) + RUNNING, at,
                                min(time.time(), until)))
    return sorted(windows, key=lambda w: w[1])


def measured_interval(home: Path, logs: Path) -> tuple[float, float]:
    """When the run measured in `logs` started and ended (epoch s; no end while it runs). A run that did not end
    under the benchmark ends where a later measurement of the same home began; a `run.json` written before the
    end time was recorded ends at its start plus its wall time."""
    run = json.loads((logs / "run.json").read_text()) if (logs / "run.json").exists() else {}
    since = run.get("since", 0.0)
    until = run.get("until", since + run["wall_s"] + 1.0 if "wall_s" in run else float("inf"))
    for other in (home, *home.glob("steps_*")):
        if other != logs and (other / "run.json").exists():
            began = json.loads((other / "run.json").read_text()).get("since", 0.0)
            if began > since:
                until = min(until, began)
    return since, until


def step_at(windows: list[tuple[str, float, float]], at: float) -> str:
    return next((step for step, began, ended in windows if began <= at <= ended), "between steps")


def _events(event_dir: Path):
    """Every event of the event log(s) in `event_dir`; an application still running (`.inprogress`) may end in
    half a line, which is left out."""
    for path in sorted(p for p in event_dir.rglob("*") if p.is_file()):
        text = path.read_text()
        for line in text[: text.rfind("\n") + 1].splitlines():
            yield json.loads(line)


def stage_growth(small: Path, large: Path) -> str:
    """The stages completed in both runs' event logs (the same job sequence: matched by stage id, name and
    tasks), the bytes their tasks returned to the driver at each size and their growth: a comparison that holds
    for a larger run stopped before its end."""
    def stages(event_dir: Path) -> dict[int, tuple[str, int, float]]:
        names, tasks, result = {}, defaultdict(int), defaultdict(float)
        for event in _events(event_dir):
            if event.get("Event") == "SparkListenerTaskEnd":
                tasks[event["Stage ID"]] += 1
                result[event["Stage ID"]] += (event.get("Task Metrics") or {}).get("Result Size", 0)
            elif event.get("Event") == "SparkListenerStageCompleted":
                names[event["Stage Info"]["Stage ID"]] = event["Stage Info"]["Stage Name"]
        return {sid: (name, tasks[sid], result[sid]) for sid, name in names.items()}

    before, after = stages(small), stages(large)
    both = [sid for sid in sorted(after) if before.get(sid, (None, None))[:2] == after[sid][:2]]
    if not both:
        return "no stage completed in both runs"
    sums = [sum(run[sid][2] for sid in both) for run in (before, after)]
    worst = max(both, key=lambda sid: after[sid][2] / max(before[sid][2], 1.0))
    return (f"{len(both)} of the larger run's {len(after)} completed stages match the smaller run's (id, name, tasks: "
            f"{sum(after[sid][1] for sid in both):,} tasks): bytes returned {sums[0]:,.0f} -> {sums[1]:,.0f} "
            f"({sums[1] / sums[0]:.3f}x); largest stage growth {after[worst][2] / max(before[worst][2], 1.0):.3f}x "
            f"(stage {worst}: {after[worst][0]})")


def parse_event_log(event_dir: Path, windows=None) -> dict[str, dict[str, float]]:
    """Per step: executor CPU seconds, bytes tasks returned, tasks, the driver's peak JVM heap used (MB). A job
    belongs to the step during which it was submitted (`windows`), its stages and tasks with it; without windows,
    to its job description (`SparkContext.setJobDescription`)."""
    stage_step: dict[int, str] = {}
    sums: dict[str, dict[str, float]] = defaultdict(lambda: {"executor_cpu_s": 0.0, "result_bytes": 0.0,
                                                            "jvm_heap_peak_mb": 0.0, "tasks": 0})
    for event in _events(event_dir):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            step = (step_at(windows, event["Submission Time"] / 1000) if windows is not None else
                    (event.get("Properties") or {}).get("spark.job.description", "between steps"))
            for stage in event.get("Stage IDs", []):
                stage_step[stage] = step
        elif kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            entry = sums[stage_step.get(event["Stage ID"], "between steps")]
            entry["executor_cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
            entry["result_bytes"] += metrics.get("Result Size", 0)
            entry["tasks"] += 1
        elif kind == "SparkListenerStageExecutorMetrics" and event.get("Executor ID") == "driver":
            entry = sums[stage_step.get(event["Stage ID"], "between steps")]
            heap = (event.get("Executor Metrics") or {}).get("JVMHeapMemory", 0) / 2**20
            entry["jvm_heap_peak_mb"] = max(entry["jvm_heap_peak_mb"], heap)
    return sums


# -Xlog:gc:file=...:timemillis,uptime lines: [12.345s][1795803933660ms] GC(3) Pause Young (...) 120M->40M(256M) 3.1ms
# Only pauses that evacuate or compact (G1's Young, Mixed and Full): the heap after a concurrent cycle's Remark or
# Cleanup pause still holds what was allocated, and died, while the cycle marked, so it is not a live heap.
_GC_LINE = re.compile(r"^\[[0-9.]+s\]\[(\d+)ms\].*Pause (?:Young|Full).* (\d+)M->(\d+)M\((\d+)M\)")


def parse_gc_log(path: Path) -> list[tuple[float, int]]:
    """(epoch s, heap MB after the collection) of each of the driver JVM's collections (Young, Mixed, Full)."""
    if not path.exists():
        return []
    return [(int(m.group(1)) / 1000, int(m.group(3))) for line in path.read_text().splitlines()
            if (m := _GC_LINE.match(line))]


def per_step(windows, samples, collections) -> dict[str, dict[str, float]]:
    """Per step: wall (sum of its Dagster steps), peak Python and JVM RSS (samples), live heap and collections."""
    found: dict[str, dict[str, float]] = defaultdict(lambda: {"wall_s": 0.0, "python_peak_mb": 0.0,
                                                             "jvm_peak_rss_mb": 0.0, "jvm_live_heap_mb": 0.0,
                                                             "gcs": 0, "dagster_steps": 0})
    for step, began, ended in windows:
        found[step]["wall_s"] += ended - began
        found[step]["dagster_steps"] += 1
    for at, python, jvm in samples:
        entry = found[step_at(windows, at)]
        entry["python_peak_mb"] = max(entry["python_peak_mb"], python)
        entry["jvm_peak_rss_mb"] = max(entry["jvm_peak_rss_mb"], jvm)
    for at, heap in collections:
        entry = found[step_at(windows, at)]
        entry["jvm_live_heap_mb"] = max(entry["jvm_live_heap_mb"], heap)
        entry["gcs"] += 1
    return found


def analyse(home: Path, logs: Path | None = None) -> dict:
    """Per step figures from a measured run's logs (in `logs`, default the home): Dagster's (the runs the measured
    process started, `measured_interval`), Spark's event log, the GC log, the memory samples."""
    from fair_pipeline.platform import sql_models

    logs = logs or home
    if (logs / "driver_memory.json").exists():
        samples = json.loads((logs / "driver_memory.json").read_text())
    else:  # the job did not end under the benchmark: the samples it wrote as it went
        samples = [json.loads(line) for line in (logs / SAMPLES).read_text().splitlines() if line.strip()]
    sql_steps = {"__".join(model.key) for model in sql_models.discover_models().values()}
    windows = step_windows(home / "dagster_home", sql_steps, *measured_interval(home, logs))
    spark_by_step = parse_event_log(logs / "event_log", windows)
    memory_by_step = per_step(windows, samples, parse_gc_log(logs / "driver_gc.log"))
    ran = {w[0] for w in windows}
    shown = STEPS if logs == home else [s for s in STEPS if s in ran or s == "between steps"]  # a run of some steps
    rows = {step: {**memory_by_step.get(step, {}), **spark_by_step.get(step, {})}
            for step in (*shown, *sorted(ran - set(STEPS)))}
    run = {"wall_s": windows[-1][2] - windows[0][1] if windows else 0.0, "load_before": [float("nan")] * 3,
           "load_after": [float("nan")] * 3}
    if (logs / "run.json").exists():  # a run still going has its start only
        run.update(json.loads((logs / "run.json").read_text()))
    rows["_run"] = {**run, "python_peak_mb": max((s[1] for s in samples), default=float("nan")),
                    "jvm_peak_rss_mb": max((s[2] for s in samples), default=float("nan")),
                    "jvm_live_heap_mb": max((v.get("jvm_live_heap_mb", 0) for v in rows.values()), default=0),
                    "jvm_heap_peak_mb": max((v.get("jvm_heap_peak_mb", 0) for v in rows.values()), default=0),
                    "gcs": sum(v.get("gcs", 0) for v in rows.values()),
                    "result_bytes": sum(v.get("result_bytes", 0) for v in spark_by_step.values()),
                    "executor_cpu_s": sum(v.get("executor_cpu_s", 0) for v in spark_by_step.values()),
                    "tasks": sum(v.get("tasks", 0) for v in spark_by_step.values())}
    return rows
