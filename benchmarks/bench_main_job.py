"""The main job (`fair-pipeline run`: simulate, then its Dagster runs: ingest, benchmark models, each day) at several traffic sizes:
per-asset CPU share, CPU inside asset steps vs outside them (run setup, Dagster between steps), compute vs
framework share (MLflow, Dagster, figures, imports), peak RSS and peak RSS per impression.

Two invocations per size, each a fresh process: the first run on a fresh home (`--days` days: it creates the
stores and materializes the benchmark models, once per code version), then the next day's run on that home
(`fair-pipeline run --start <the next day> --days 1`: what a daily cron or schedule runs).

Each size runs in its own subprocess on its own temporary FAIR_PIPELINE_HOME (so peak RSS is that run's, read
from /proc: VmHWM). A sampler thread records the process's CPU time (all threads, DuckDB's included) and RSS
every `--interval` seconds; the Dagster event log's step start / end times split the samples by asset step
(a step run once per trained day is summed over its runs; its peak RSS is the highest). The same thread samples
the main thread's stack and charges the CPU of each period to what it was doing (`kind_of`): our code and the
numpy / DuckDB / pandas work it calls is compute; MLflow, Dagster, drawing figures (fair_pipeline.charts, or
matplotlib in a checkout that used it) and module imports are framework.
All sizes run one after the other in one invocation, so the ratios between them are measured side by side.

    python benchmarks/bench_main_job.py [--sizes 25000 100000 250000] [--days 3] [--top 8] [--code CHECKOUT]
"""
from __future__ import annotations

import argparse
import bisect
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

START = "2026-01-01"
PAGE = os.sysconf("SC_PAGE_SIZE")
BENCHMARK_JOB = "benchmark_models"  # materialized once per code version, not by the daily runs


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def _peak_rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


KINDS = ("compute", "mlflow", "dagster", "figures", "imports", "other")
# where a stack's innermost known frame lives; the first match from the leaf decides (see `kind_of`)
LIBRARIES = (("mlflow", "/mlflow/"), ("figures", "/matplotlib/"), ("figures", "/PIL/"), ("figures", "/fair_pipeline/charts/"),
             ("dagster", "/dagster/"), ("dagster", "/dagster_"), ("compute", "/fair_pipeline/"))


def kind_of(frame) -> str:
    """What the main thread is doing: 'imports' when any frame is importing a module; otherwise the library of
    the innermost frame that is MLflow, figures, Dagster or fair_pipeline (so numpy, DuckDB, pandas,
    scikit-learn called by our code count as compute, SQLAlchemy called by MLflow as MLflow); 'other' when
    none is on the stack (CLI start-up, interpreter)."""
    kind, f = None, frame
    while f is not None:
        path = f.f_code.co_filename
        if path.startswith("<frozen importlib"):
            return "imports"
        if kind is None:
            kind = next((name for name, part in LIBRARIES if part in path), None)
        f = f.f_back
    return kind or "other"


class Sampler(threading.Thread):
    """(wall, cpu, rss, kind) every `interval` seconds until stopped: `kind` is what the main thread is doing
    (`kind_of`); the CPU spent since the previous sample (DuckDB's threads included) is charged to it."""

    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval, self.samples, self._halt = interval, [], threading.Event()
        self.main = threading.main_thread().ident

    def run(self) -> None:
        while not self._halt.is_set():
            frame = sys._current_frames().get(self.main)
            self.samples.append((time.time(), _cpu(), _rss(), kind_of(frame) if frame is not None else "other"))
            del frame
            self._halt.wait(self.interval)

    def stop(self) -> list[tuple[float, float, int, str]]:
        self._halt.set()
        self.join()
        self.samples.append((time.time(), _cpu(), _rss(), "other"))
        return self.samples


def cpu_by_kind(samples, first: float, last: float) -> dict[str, float]:
    """CPU seconds of each kind between wall times `first` and `last`: each interval's CPU goes to the kind
    sampled at its end (the work that was running when it was measured)."""
    out = dict.fromkeys(KINDS, 0.0)
    for (w0, c0, _, _), (w1, c1, _, kind) in zip(samples, samples[1:]):
        if w1 > first and w0 < last:
            out[kind] += c1 - c0
    return out


def _cpu_at(samples, when: float) -> float:
    """CPU seconds at wall time `when`, interpolated between samples."""
    walls = [s[0] for s in samples]
    k = bisect.bisect_left(walls, when)
    if k == 0:
        return samples[0][1]
    if k == len(samples):
        return samples[-1][1]
    (w0, c0, *_), (w1, c1, *_) = samples[k - 1], samples[k]
    return c0 + (c1 - c0) * (when - w0) / (w1 - w0) if w1 > w0 else c1


def _step_intervals(run_id: str) -> dict[str, tuple[float, float]]:
    import dagster as dg

    from fair_pipeline import runner

    instance = dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.from_config(
        str(runner.ensure_dagster_home()))  # the CLI restores the environment it set when it returns
    begun, intervals = {}, {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not event.step_key:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            begun[event.step_key] = record.timestamp
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            intervals[event.step_key] = (begun.get(event.step_key, record.timestamp), record.timestamp)
    return intervals


def child(requests_per_day: int, start: str, days: int, interval: float, code: Path) -> dict:
    """One `fair-pipeline run` of the checkout `code` in this process; returns the measurements as a dict."""
    from fair_pipeline import runner
    from fair_pipeline.commands import main

    sampler = Sampler(interval)
    sampler.start()
    began_wall, began_cpu = time.time(), _cpu()
    marks = {"runs": []}
    original = runner._execute

    def timed_run(job_name, instance, **kwargs):  # every Dagster run's bounds (ingest, benchmarks, each day)
        began = time.time()
        marks.setdefault("job_start", began)
        result = original(job_name, instance, **kwargs)
        marks["job_end"] = time.time()
        marks["runs"].append(result.run_id)
        marks.setdefault("jobs", []).append((job_name, began, marks["job_end"]))
        marks["success"] = marks.get("success", True) and result.success
        return result

    runner._execute = timed_run
    code = main(["run", "--start", start, "--days", str(days), "--requests-per-day", str(requests_per_day), "--benchmarks"])
    samples = sampler.stop()
    total_cpu = _cpu() - began_cpu
    steps = {}
    for run_id in marks["runs"]:
        for step, (first, last) in _step_intervals(run_id).items():
            inside = [s[2] for s in samples if first <= s[0] <= last]
            seen = steps.setdefault(step, {"cpu": 0.0, "wall": 0.0, "peak_rss": 0, "kinds": dict.fromkeys(KINDS, 0.0)})
            seen["cpu"] += _cpu_at(samples, last) - _cpu_at(samples, first)
            for kind, cpu in cpu_by_kind(samples, first, last).items():
                seen["kinds"][kind] += cpu
            seen["wall"] += last - first
            seen["peak_rss"] = max(seen["peak_rss"], max(inside) if inside else 0)
    job_cpu = _cpu_at(samples, marks["job_end"]) - _cpu_at(samples, marks["job_start"])
    import duckdb

    con = duckdb.connect(str(Path(os.environ["FAIR_PIPELINE_HOME"]) / "warehouse.duckdb"), read_only=True)
    first_day = dt.date.fromisoformat(start)
    impressions = sum(con.execute(f"SELECT count(*) FROM raw.{t} WHERE partition_date >= ? AND partition_date < ?",
                                  [first_day, first_day + dt.timedelta(days=days)]).fetchone()[0]
                      for t in ("observational_impressions", "randomized_impressions"))  # the days this run loaded
    con.close()
    return {"requests_per_day": requests_per_day, "start": start, "days": days, "exit_code": code, "success": marks["success"],
            "wall": time.time() - began_wall, "cpu": total_cpu, "job_cpu": job_cpu,
            "simulate_cpu": _cpu_at(samples, marks["job_start"]) - samples[0][1],
            "simulate_peak_rss": max(s[2] for s in samples if s[0] <= marks["job_start"]),
            "peak_rss": _peak_rss(), "impressions": impressions,
            "impressions_per_day": impressions // days,  # the simulator writes the same traffic every day
            "steps": steps, "kinds": cpu_by_kind(samples, marks["job_start"], marks["job_end"]),
            "job_kinds": _kinds_by_job(samples, marks["jobs"])}


def _kinds_by_job(samples, jobs) -> dict[str, dict[str, float]]:
    """CPU per kind of each Dagster job, summed over its runs (e.g. `train_and_audit` once per day)."""
    out = {}
    for name, first, last in jobs:
        seen = out.setdefault(name, dict.fromkeys(KINDS, 0.0))
        for kind, cpu in cpu_by_kind(samples, first, last).items():
            seen[kind] += cpu
    return out


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.2f}"


PHASES = {"first": "first run, fresh home", "next": "next day, existing home"}


def report(results: list[dict], top: int) -> None:
    print(f"\nmain job: the first run on a fresh home ({results[0]['days']} days), then the next day's run on it; "
          "CPU = process user+sys (all threads)")
    print(f"{'requests/day':>12s} {'run':>24s} {'impressions':>12s} {'wall s':>7s} {'CPU s':>7s} {'job CPU':>8s} "
          f"{'in steps':>8s} {'compute':>8s} {'peak RSS GiB':>12s} {'bytes/impr.':>11s} {'bytes/impr. of a day':>20s}")
    for r in results:
        in_steps = sum(s["cpu"] for s in r["steps"].values())
        print(f"{r['requests_per_day']:12,d} {PHASES[r['phase']]:>24s} {r['impressions']:12,d} {r['wall']:7.0f} {r['cpu']:7.1f} "
              f"{r['job_cpu']:8.1f} {in_steps / r['job_cpu']:8.0%} {r['kinds']['compute'] / r['job_cpu']:8.0%} "
              f"{_gib(r['peak_rss']):>12s} "
              f"{r['peak_rss'] / r['impressions']:11.0f} {r['peak_rss'] / r['impressions_per_day']:20.0f}"
              + ("" if r["success"] else "  (RUN FAILED)"))
    print("\ncompute vs framework share of the Dagster runs' CPU (what the main thread was doing when the CPU was "
          "spent; DuckDB's threads count with the call that started them)")
    print(f"{'requests/day':>12s} {'runs':>58s} {'CPU s':>7s} " + " ".join(f"{kind:>10s}" for kind in KINDS))
    for r in results:
        jobs = r.get("job_kinds", {})
        rows = [("all", r["kinds"]), *((f"job {name}", v) for name, v in jobs.items())]
        if BENCHMARK_JOB in jobs:
            rows.append((f"all but {BENCHMARK_JOB}",
                         {kind: sum(v[kind] for name, v in jobs.items() if name != BENCHMARK_JOB) for kind in KINDS}))
        for label, kinds in rows:
            total = sum(kinds.values()) or 1.0
            print(f"{r['requests_per_day']:12,d} {PHASES[r['phase']] + ': ' + label:>58s} {total:7.1f} "
                  + " ".join(f"{kinds[kind] / total:10.1%}" for kind in KINDS))
    for r in results:
        print(f"\n{r['requests_per_day']:,} requests/day, {PHASES[r['phase']]}: top {top} asset steps by CPU "
              f"(share of the Dagster run's CPU {r['job_cpu']:.1f} s; simulation before it: {r['simulate_cpu']:.1f} s CPU, "
              f"peak RSS {_gib(r['simulate_peak_rss'])} GiB)")
        print(f"  {'step':52s} {'CPU s':>7s} {'share':>6s} {'wall s':>7s} {'peak RSS GiB':>12s} {'compute':>8s} "
              f"{'mlflow':>7s} {'dagster':>8s} {'figures':>8s} {'imports':>8s}")
        ranked = sorted(r["steps"].items(), key=lambda kv: -kv[1]["cpu"])
        for step, s in ranked[:top]:
            sampled = sum(s["kinds"].values()) or 1.0
            print(f"  {step[:52]:52s} {s['cpu']:7.1f} {s['cpu'] / r['job_cpu']:6.1%} {s['wall']:7.1f} "
                  f"{_gib(s['peak_rss']):>12s} {s['kinds']['compute'] / sampled:8.0%} {s['kinds']['mlflow'] / sampled:7.0%} "
                  f"{s['kinds']['dagster'] / sampled:8.0%} {s['kinds']['figures'] / sampled:8.0%} "
                  f"{s['kinds']['imports'] / sampled:8.0%}")
        rest = ranked[top:]
        if rest:
            print(f"  {f'{len(rest)} other steps':52s} {sum(s['cpu'] for _, s in rest):7.1f} "
                  f"{sum(s['cpu'] for _, s in rest) / r['job_cpu']:6.1%}")
    firsts = [r for r in results if r["phase"] == "first"]
    if len(firsts) > 1:
        small, large = firsts[0], firsts[-1]
        print(f"\npeak RSS of the first runs, {large['requests_per_day']:,} / {small['requests_per_day']:,} requests/day: "
              f"{large['peak_rss'] / small['peak_rss']:.2f}x for {large['impressions'] / small['impressions']:.1f}x the impressions")


def _measure(size: int, start: str, days: int, home: str, args) -> dict:
    """One `fair-pipeline run` in a fresh interpreter on `home` (`child`); exits naming the failure."""
    env = {**os.environ, "FAIR_PIPELINE_HOME": home, "PYTHONPATH": str(args.code.resolve())}
    env.pop("DAGSTER_HOME", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([sys.executable, __file__, "--child", str(size), "--start", start, "--days", str(days),
                           "--interval", str(args.interval), "--code", str(args.code)], env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        sys.exit(f"{size:,} requests/day from {start}: the run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    if not result["success"]:  # what failed, from the CLI's own lines
        out = done.stdout.splitlines()
        first = next((k for k, line in enumerate(out) if " FAILED after " in line), None)
        print("\n".join(out[first:first + 15]) if first is not None else done.stderr[-3000:], flush=True)
    print(lines[-1], flush=True)  # the raw figures, kept even if a later size is interrupted
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000, 250_000], help="requests per day")
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--top", type=int, default=8, help="asset steps listed per size")
    parser.add_argument("--interval", type=float, default=0.05, help="sampling period, seconds")
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="checkout whose fair_pipeline is measured (default: this one), e.g. to measure a baseline")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--start", default=START, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print("RESULT " + json.dumps(child(args.child, args.start, args.days, args.interval, args.code.resolve())))
        return
    results = []
    next_day = str(dt.date.fromisoformat(START) + dt.timedelta(days=args.days))
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench_main_job_{size}_") as home:
            print(f"running {size:,} requests/day x {args.days} days in {home}, then the next day ...", flush=True)
            results.append({**_measure(size, START, args.days, home, args), "phase": "first"})
            results.append({**_measure(size, next_day, 1, home, args), "phase": "next"})
    report(results, args.top)


if __name__ == "__main__":
    main()
