"""Self-healing runs: a run whose process died (kill -9, OOM, power loss) is failed and its pool slots freed
before the next run starts, and a run waiting for a pool slot obeys Ctrl-C / SIGTERM.

Why: `fair-pipeline run` executes in-process, so when that process dies nobody writes the run's end. The run
stays STARTED and keeps its `duckdb` pool slot (pools allow one step at a time), and every later run waits for
that slot forever. Dagster's daemon frees slots only of runs that *ended*; a run launched from the CLI has no
monitor that could notice its process is gone. So each run records its owner process in a run tag, and
`prepare_run` (called once before each run) checks the owners of unfinished runs.
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._utils.interrupts import check_captured_interrupt

from fair_pipeline.platform import settings

# "<host>:<pid>:<process start time in clock ticks since boot>"; the start time tells a reused pid apart.
OWNER_TAG = "fair_pipeline/owner"
_UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
_RUN_ID = re.compile(r"^[0-9a-f-]{36}$")


def _process_start(pid: int) -> str:
    """The process's start time from /proc (Linux); '' where /proc is unavailable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # Field 22; the command name (field 2) may contain spaces, so count from the closing parenthesis.
    return stat[stat.rindex(")") + 2 :].split()[19]


def owner_tag_value(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}"


def owner_is_gone(owner: str) -> bool:
    """True only when the owner ran on this host and its process no longer exists (or its pid was reused)."""
    host, pid_text, started = (owner.rsplit(":", 2) + ["", ""])[:3]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's process cannot be checked from here: never touch its runs
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, owned by another user
    return bool(started) and _process_start(pid) not in ("", started)


@dataclasses.dataclass
class Recovery:
    failed_runs: list[str] = dataclasses.field(default_factory=list)
    freed_slot_runs: list[str] = dataclasses.field(default_factory=list)
    ended_mlflow_runs: int = 0
    mlflow_error: str | None = None

    def summary(self) -> str | None:
        if not (self.failed_runs or self.freed_slot_runs):
            return None
        parts = []
        if self.failed_runs:
            ids = ", ".join(self.failed_runs)
            parts.append(f"marked {len(self.failed_runs)} run(s) whose process is gone as FAILURE ({ids})")
        if self.freed_slot_runs:
            ids = ", ".join(self.freed_slot_runs)
            parts.append(f"freed the pool slots of {len(self.freed_slot_runs)} ended run(s) ({ids})")
        if self.ended_mlflow_runs:
            parts.append(f"ended {self.ended_mlflow_runs} MLflow run(s) as FAILED")
        if self.mlflow_error:
            parts.append(f"could not end their MLflow runs ({self.mlflow_error})")
        return "recovered: " + "; ".join(parts)


def recover_dead_runs(instance: dg.DagsterInstance) -> Recovery:
    """Fail every unfinished run whose owner process is gone, free the pool slots of every run that is no longer
    running (dead, ended, or deleted), and end the MLflow runs of the dead ones as FAILED."""
    recovery = Recovery()
    for record in instance.get_run_records(dg.RunsFilter(statuses=_UNFINISHED)):
        run = record.dagster_run
        owner = run.tags.get(OWNER_TAG)
        if owner and owner_is_gone(owner):
            instance.report_run_failed(run, message=f"The process that ran this run ({owner}) is gone; marked failed "
                                       "by fair-pipeline before starting a new run.")
            recovery.failed_runs.append(run.run_id)
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        for run_id in sorted(_slot_holders(storage)):
            run = instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                storage.free_concurrency_slots_for_run(run_id)
                if run_id not in recovery.failed_runs:
                    recovery.freed_slot_runs.append(run_id)
    if recovery.failed_runs:
        try:
            recovery.ended_mlflow_runs = _end_mlflow_runs(recovery.failed_runs)
        except Exception as error:  # noqa: BLE001 - an unreachable tracking server must not keep the home wedged
            recovery.mlflow_error = f"{type(error).__name__}: {error}"
    return recovery


def _slot_holders(storage) -> set[str]:
    """Runs holding or queued for a slot of any pool."""
    run_ids = set(storage.get_concurrency_run_ids())
    for key in storage.get_concurrency_keys():
        run_ids.update(slot.run_id for slot in storage.get_concurrency_info(key).claimed_slots)
    return run_ids


def _end_mlflow_runs(dagster_run_ids: list[str]) -> int:
    """End as FAILED the MLflow runs still RUNNING that the dead Dagster runs started (by their run-id tag)."""
    from fair_pipeline.platform.tracking import TAG_DAGSTER_RUN, local_sqlite_path, store_client

    uri = settings.mlflow_tracking_uri()
    store = local_sqlite_path(uri)
    if store is not None and not store.exists():
        return 0
    client = store_client(uri)
    experiment_ids = [e.experiment_id for e in client.search_experiments()]
    ended = 0
    for run_id in dagster_run_ids:
        if not _RUN_ID.match(run_id):  # MLflow filters take no parameters: only a well-formed id is put in one
            continue
        for run in client.search_runs(
            experiment_ids, filter_string=f"tags.`{TAG_DAGSTER_RUN}` = '{run_id}' and attributes.status = 'RUNNING'"
        ):
            client.set_terminated(run.info.run_id, status="FAILED")
            ended += 1
    return ended


def prepare_run(instance: dg.DagsterInstance) -> dict[str, str]:
    """Call before starting a run: recovers dead runs (one printed line if anything was cleaned), makes a wait
    for a pool slot interruptible, and returns the run tags that record this process as the run's owner.

    A command that runs several jobs in a row asks `interrupted()` after each (Dagster turns an interrupt into a
    failed run, not into an exception), after `begin_command()` at its start."""
    summary = recover_dead_runs(instance).summary()
    if summary:
        print(f"[fair-pipeline] {summary}", flush=True)
    _watch_interrupts()
    return {OWNER_TAG: owner_tag_value()}


# Dagster defers SIGINT/SIGTERM between steps and only looks at them when the next step starts, so a run
# waiting for a pool slot ignores them. A deferred interrupt still pending after this long is raised.
_INTERRUPT_GRACE_S = 2.0
_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
_watcher_started = threading.Event()
_interrupted = threading.Event()
_wakeup: tuple[socket.socket, socket.socket] | None = None  # module-level: the fds must live as long as the process


def begin_command() -> None:
    """Forget interrupts seen before this command (the flag is process-wide; a process may run many commands)."""
    _interrupted.clear()


def interrupted() -> bool:
    """True when this process received SIGINT or SIGTERM since `begin_command()` (seen once a run has started)."""
    return _interrupted.is_set()


def _raise_interrupt(_signo, _frame) -> None:
    raise DagsterExecutionInterruptedError("interrupted while waiting")


def _watch_interrupts() -> None:
    """A thread that sees every SIGINT/SIGTERM (Python writes each signal's number to the wakeup fd, whichever
    handler Dagster has installed) and raises a deferred one in the main thread if Dagster does not act on it."""
    if threading.current_thread() is not threading.main_thread() or _watcher_started.is_set():
        return
    _watcher_started.set()
    global _wakeup
    _wakeup = reader, writer = socket.socketpair()
    writer.setblocking(False)
    reader.settimeout(0.25)
    signal.set_wakeup_fd(writer.fileno())
    signal.signal(signal.SIGUSR1, _raise_interrupt)
    main = threading.main_thread().ident

    def watch() -> None:
        pending_since = None
        while True:
            try:
                if any(signo in _INTERRUPTS for signo in reader.recv(64)):
                    _interrupted.set()
            except TimeoutError:
                pass
            if not check_captured_interrupt():
                pending_since = None
            elif pending_since is None:
                pending_since = time.monotonic()
            elif time.monotonic() - pending_since > _INTERRUPT_GRACE_S:
                signal.pthread_kill(main, signal.SIGUSR1)  # the handler runs in the main thread and raises there
                pending_since = None

    threading.Thread(target=watch, name="fair-pipeline-interrupt-watch", daemon=True).start()


def _forget_the_watch_in_a_forked_child() -> None:
    """A forked child inherits the wakeup socket: a signal sent to the child (a `multiprocessing` pool's SIGTERM
    at shutdown, say) would be written to the parent's socket and read as the parent's interrupt. (A signal in the
    instant between the fork and this hook still would be: no process can tell who wrote to the socket.)"""
    global _wakeup
    _interrupted.clear()
    if _wakeup is None:
        return
    signal.set_wakeup_fd(-1)  # the forking thread is the child's main thread, so this is allowed
    for end in _wakeup:
        end.close()
    _wakeup = None
    _watcher_started.clear()  # the watcher thread did not survive the fork; the child may start its own


os.register_at_fork(after_in_child=_forget_the_watch_in_a_forked_child)
