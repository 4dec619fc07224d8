"""Kill `fair-pipeline run` with SIGKILL at a chosen point, run the recovery run, and check the home.

Shared by `benchmarks/kill_points.py` (the red-team run over many points) and the slow tests in
`tests/platform/test_kill_recovery.py`. A point is reached by polling the run's Dagster event log for a running
step (STEP_START without its end) or by waiting for a line the run prints; the process group is then frozen
with SIGSTOP, the event log read again (so the table names the step the process was really in), and killed.
The recovery is `run --no-simulate` on the same landing files; its home must then equal a clean run's.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from fair_pipeline.commands import main; sys.exit(main())"]
CLEANUP = "[fair-pipeline] recovered:"
SOURCES = ("observational", "randomized")
POLL_S = 0.05


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The smallest simulation that still runs every stage (the CI smoke test's sizes)."""

    start: str = "2026-01-01"
    days: int = 2
    requests_per_day: int = 200
    items: int = 500
    slots: int = 10

    def simulate_args(self) -> list[str]:
        return ["--start", self.start, "--days", str(self.days), "--requests-per-day", str(self.requests_per_day),
                "--items", str(self.items), "--slots", str(self.slots)]


@dataclasses.dataclass(frozen=True)
class KillPoint:
    """Where to kill: while one of `steps` runs, or after the run prints `marker`, or (neither) `delay_s` after
    the start. With `delay_s` after a step or marker, the kill lands wherever the run is by then."""

    name: str
    steps: frozenset[str] = frozenset()
    marker: str | None = None
    delay_s: float = 0.0


def _steps(*keys: str) -> frozenset[str]:
    return frozenset(keys)


# The fixed points, one or more per stage; step keys are the asset keys with `__` (fair_pipeline/definitions.py).
FIXED_POINTS = [
    KillPoint("ingest_items", _steps("raw__items")),
    KillPoint("ingest_observational", _steps("raw__observational_impressions")),
    KillPoint("ingest_randomized", _steps("raw__randomized_impressions")),
    KillPoint("sql_staging_impressions", _steps("staging__stg_observational_impressions",
                                                "staging__stg_randomized_impressions")),
    KillPoint("sql_staging_items_quarantine", _steps("staging__stg_items", "staging__stg_quarantine")),
    KillPoint("sql_marts_position", _steps("marts__position_score_bins", "marts__position_swap_cells")),
    KillPoint("sql_marts_eo_ctr_volume", _steps("marts__eo_score_click_counts", "marts__daily_ctr_by_position",
                                                "marts__daily_volume")),
    KillPoint("benchmark_models_logging", _steps("marts__benchmark_models"), delay_s=3.0),
    KillPoint("position_bias", _steps("marts__position_bias_curves")),
    KillPoint("eo_transforms", _steps("marts__eo_transforms")),
    KillPoint("mlflow_log_model", marker="Inferring model signature"),
    KillPoint("ranker_training", _steps("marts__ranker_candidates"), delay_s=1.0),
    KillPoint("eo_evaluation", _steps("marts__eo_evaluation")),
    KillPoint("audit", _steps("marts__fairness_audit"), delay_s=2.0),
    KillPoint("selection", _steps("marts__model_selection"), delay_s=0.5),
    KillPoint("report", _steps("reporting__fairness_report"), delay_s=2.0),
]
ALL_STEPS = sorted(set().union(*(p.steps for p in FIXED_POINTS)) | {"marts__elicited_metric"})


@dataclasses.dataclass
class Outcome:
    point: str
    killed_in: str = ""
    dead_runs: int = 0
    cleanup_seen: bool = False
    recovery_s: float = 0.0
    partitions_intact: bool = False
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def recovered(self) -> bool:
        return not self.problems


# --- the home -------------------------------------------------------------------------------------------------

def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI")}
    return {**env, "FAIR_PIPELINE_HOME": str(home), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def cli(home: Path, *args: str, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, env=environment(home), capture_output=True, text=True,
                          timeout=timeout_s)


def simulate(landing_home: Path, sizes: Sizes, timeout_s: float = 600) -> Path:
    """Simulated landing files, written once and copied into every point's home."""
    result = cli(landing_home, "simulate", *sizes.simulate_args(), timeout_s=timeout_s)
    if result.returncode != 0:
        raise RuntimeError(f"simulate failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return landing_home / "landing"


def fresh_home(home: Path, landing: Path) -> Path:
    from fair_pipeline import runner

    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(landing, home / "landing")
    # The instance the harness polls must exist before the run starts; the CLI keeps an existing dagster.yaml.
    (home / "dagster_home").mkdir(parents=True)
    (home / "dagster_home" / "dagster.yaml").write_text(runner.DAGSTER_YAML)
    return home


def instance_for(home: Path):
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home / "dagster_home")))


def unfinished_runs(instance) -> list[str]:
    import dagster as dg

    statuses = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
                dg.DagsterRunStatus.CANCELING]
    return [r.dagster_run.run_id for r in instance.get_run_records(dg.RunsFilter(statuses=statuses))]


def running_steps(instance) -> set[str]:
    """Steps started and not ended, over every unfinished run."""
    import dagster as dg

    kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    running: set[str] = set()
    for run_id in unfinished_runs(instance):
        for entry in instance.all_logs(run_id, of_type=kinds):
            event = entry.dagster_event
            if event.event_type == dg.DagsterEventType.STEP_START:
                running.add(event.step_key)
            else:
                running.discard(event.step_key)
    return running


def mlflow_client(home: Path):
    from fair_pipeline.platform.tracking import store_client

    return store_client(f"sqlite:///{home / 'mlflow.db'}")


def running_mlflow_runs(home: Path) -> int:
    if not (home / "mlflow.db").exists():
        return 0
    client = mlflow_client(home)
    experiments = [e.experiment_id for e in client.search_experiments()]
    return len(client.search_runs(experiments, filter_string="attributes.status = 'RUNNING'"))


def stored_partition_rows(home: Path, source: str) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return dict(con.table(f"raw.{source}_impressions").aggregate(
            "CAST(partition_date AS VARCHAR), count(*)", "partition_date").fetchall())


def landed_partition_rows(home: Path, source: str) -> dict[str, int]:
    import pyarrow.parquet as pq

    from fair_pipeline.ingestion.landing import landed_dates, partition_files

    landing = home / "landing"
    return {day: sum(pq.read_metadata(f).num_rows for f in partition_files(landing, source, day))
            for day in landed_dates(landing, source)}


# History tables keep one row per run by design (readers take the newest), so a killed run's row may remain.
HISTORY_TABLES = {"marts.elicited_metrics"}


def fingerprint(home: Path) -> dict[str, object]:
    """What a clean run and a recovered run must share: the row count of every warehouse table but the history
    tables, and the newest partition's model ranking (models and costs; registry version numbers differ by
    design)."""
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables "
                             "WHERE table_schema IN ('raw', 'staging', 'marts') ORDER BY 1, 2").fetchall()
        counts = {f"{s}.{t}": con.table(f'"{s}"."{t}"').shape[0] for s, t in tables
                  if f"{s}.{t}" not in HISTORY_TABLES}
        ranking = con.execute("SELECT model, family, round(cost, 9) FROM marts.model_ranking WHERE partition_date = "
                              "(SELECT max(partition_date) FROM marts.model_ranking) ORDER BY model").fetchall()
    return {"row_counts": counts, "model_ranking": ranking}


def champion_problem(home: Path) -> str | None:
    """None when fair-ranker@champion names a version whose MLflow run finished (not one of a killed run)."""
    from fair_pipeline.platform.tracking import FAIR_RANKER

    client = mlflow_client(home)
    try:
        version = client.get_model_version_by_alias(FAIR_RANKER, "champion")
    except Exception as error:  # noqa: BLE001 - a missing alias is the finding, whatever MLflow raises for it
        return f"{FAIR_RANKER}@champion does not resolve: {type(error).__name__}"
    status = client.get_run(version.run_id).info.status if version.run_id else "FINISHED"
    return None if status == "FINISHED" else f"{FAIR_RANKER}@champion -> v{version.version} of a {status} run"


# --- one point ------------------------------------------------------------------------------------------------

class _Lines:
    """Reads the killed run's output in a thread (a full pipe would stall it) and notes a marker line."""

    def __init__(self, process: subprocess.Popen, marker: str | None):
        self.lines: list[str] = []
        self.seen = threading.Event()
        self.marker = marker
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.lines.append(line)
            if self.marker and self.marker in line:
                self.seen.set()

    def tail(self) -> str:
        return "".join(self.lines[-20:])


def _signal(process: subprocess.Popen, signo: int) -> None:
    os.killpg(process.pid, signo)  # the run's own group (start_new_session): the process and any child


def _inside(instance, process: subprocess.Popen, steps: frozenset[str]) -> set[str] | None:
    """Freeze the run; the steps it is in if one of `steps` is among them (the run stays frozen), else resume."""
    _signal(process, signal.SIGSTOP)
    running = running_steps(instance)
    if running & steps:
        return running
    _signal(process, signal.SIGCONT)
    return None


def _reach(point: KillPoint, process: subprocess.Popen, lines: _Lines, instance, timeout_s: float) -> set[str]:
    """Wait for the point, freeze the run there, and return the steps it is in. Raises TimeoutError, or
    RuntimeError when the run ends first."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            lines.thread.join(5)
            raise RuntimeError(f"the run ended (exit {process.returncode}) before the kill point:\n{lines.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"kill point not reached within {timeout_s:.0f}s:\n{lines.tail()}")
        if point.marker:
            reached = lines.seen.is_set()
        elif point.steps:
            reached = bool(running_steps(instance) & point.steps)
        else:
            reached = True
        if reached and not point.delay_s and point.steps:
            frozen = _inside(instance, process, point.steps)  # the step may have ended since the poll: poll on
            if frozen is not None:
                return frozen
        elif reached:
            time.sleep(point.delay_s)
            _signal(process, signal.SIGSTOP)
            return running_steps(instance)
        time.sleep(POLL_S)


def kill_at(point: KillPoint, home: Path, timeout_s: float) -> tuple[str, list[str], int]:
    """Start `run --no-simulate --verbose` on `home` and kill it at `point`: (steps it was in, runs left
    unfinished, MLflow runs left RUNNING)."""
    process = subprocess.Popen([*CLI, "run", "--no-simulate", "--benchmarks", "--verbose"], cwd=REPO, env=environment(home),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = _Lines(process, point.marker)
    instance = instance_for(home)
    try:
        steps = _reach(point, process, lines, instance, timeout_s)
        _signal(process, signal.SIGKILL)
        process.wait()
        lines.thread.join(5)
        return ", ".join(sorted(steps)) or "(between steps)", unfinished_runs(instance), running_mlflow_runs(home)
    finally:
        if process.poll() is None:
            _signal(process, signal.SIGKILL)
            process.wait()
        instance.dispose()


def check_recovered(home: Path, clean: dict[str, object] | None, outcome: Outcome) -> None:
    """The checks after the recovery run; each failed one is appended to `outcome.problems`."""
    instance = instance_for(home)
    try:
        if unfinished_runs(instance):
            outcome.problems.append(f"runs left unfinished: {unfinished_runs(instance)}")
        claimed = instance.event_log_storage.get_concurrency_info("duckdb").claimed_slots
        if claimed:
            outcome.problems.append(f"duckdb pool slots still claimed: {claimed}")
    finally:
        instance.dispose()
    if running_mlflow_runs(home):
        outcome.problems.append(f"{running_mlflow_runs(home)} MLflow run(s) left RUNNING")
    intact = all(stored_partition_rows(home, s) == landed_partition_rows(home, s) for s in SOURCES)
    outcome.partitions_intact = intact
    if not intact:
        outcome.problems.append("raw partitions differ from the landing files: " + str(
            {s: (stored_partition_rows(home, s), landed_partition_rows(home, s)) for s in SOURCES}))
    problem = champion_problem(home)
    if problem:
        outcome.problems.append(problem)
    if clean is not None:
        recovered = fingerprint(home)
        for key, value in clean.items():
            if recovered[key] != value:
                diff = ({k: (v, recovered[key].get(k)) for k, v in value.items() if recovered[key].get(k) != v}
                        if isinstance(value, dict) else "differs")
                outcome.problems.append(f"{key} differs from the clean run: {diff}")


def run_point(point: KillPoint, home: Path, landing: Path, clean: dict[str, object] | None,
              timeout_s: float = 1200, prepare: Callable[[Path, Path], object] = fresh_home) -> Outcome:
    """Kill a run at `point` on `home` as `prepare(home, landing)` leaves it (by default a fresh home holding
    `landing`), recover with `run --no-simulate`, check."""
    outcome = Outcome(point.name)
    prepare(home, landing)
    try:
        outcome.killed_in, dead, left_running = kill_at(point, home, timeout_s)
    except (RuntimeError, TimeoutError) as error:
        outcome.problems.append(f"not killed: {error}")
        return outcome
    outcome.dead_runs = len(dead)
    began = time.monotonic()
    try:
        result = cli(home, "run", "--no-simulate", "--benchmarks", timeout_s=timeout_s)
    except subprocess.TimeoutExpired:
        outcome.problems.append(f"recovery run did not end within {timeout_s:.0f}s")
        return outcome
    outcome.recovery_s = time.monotonic() - began
    out = result.stdout + result.stderr
    if result.returncode != 0:
        outcome.problems.append(f"recovery run exited {result.returncode}:\n{out[-3000:]}")
    cleanup = [line for line in out.splitlines() if line.startswith(CLEANUP)]
    outcome.cleanup_seen = len(cleanup) == 1 and all(run_id in cleanup[0] for run_id in dead)
    # A run killed inside a Dagster run leaves it unfinished: exactly one cleanup line naming it. Killed between
    # runs, nothing is left and no line is due.
    if bool(dead) != outcome.cleanup_seen or len(cleanup) > 1:
        outcome.problems.append(f"cleanup lines {cleanup} for unfinished runs {dead}")
    if left_running and f"ended {left_running} MLflow run(s) as FAILED" not in out:
        outcome.problems.append(f"{left_running} MLflow run(s) were RUNNING and no line says they were ended")
    check_recovered(home, clean, outcome)
    return outcome


def clean_run(home: Path, landing: Path, timeout_s: float = 1200,
              prepare: Callable[[Path, Path], object] = fresh_home) -> tuple[dict[str, object], float]:
    """The reference: `run --no-simulate` on `home` as `prepare(home, landing)` leaves it (by default a fresh
    home); (its fingerprint, its seconds)."""
    prepare(home, landing)
    began = time.monotonic()
    result = cli(home, "run", "--no-simulate", "--benchmarks", timeout_s=timeout_s)
    if result.returncode != 0:
        raise RuntimeError(f"the clean run failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return fingerprint(home), time.monotonic() - began
