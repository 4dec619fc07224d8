"""Self-healing runs, on a real on-disk Dagster instance without running the pipeline:
runs whose owner process is gone are failed and their pool slots freed; live runs are left alone."""
from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

import dagster as dg
import pytest

from fair_pipeline import runner
from fair_pipeline.platform import run_recovery, settings
from fair_pipeline.platform.tracking import TAG_DAGSTER_RUN, ensure_experiments, store_client

POOL = "duckdb"


@dg.op
def _noop():
    return None


@dg.job
def _job():
    _noop()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def instance(fp_home):
    runner.ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        yield instance


def _run(instance, owner: str | None, status=dg.DagsterRunStatus.STARTED, claim: bool = True) -> str:
    tags = {run_recovery.OWNER_TAG: owner} if owner else {}
    run = instance.create_run_for_job(_job, tags=tags, status=status)
    if claim:
        _claim(instance, run.run_id)
    return run.run_id


def _claim(instance, run_id: str) -> None:
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default(POOL)  # what the executor does: the pool's default limit, 1
    assert storage.claim_concurrency_slot(POOL, run_id, "raw__items").is_claimed


def _slot_holders(instance) -> set[str]:
    return {s.run_id for s in instance.event_log_storage.get_concurrency_info(POOL).claimed_slots}


def test_owner_checks_pid_host_and_reuse():
    assert not run_recovery.owner_is_gone(run_recovery.owner_tag_value())
    dead = f"{socket.gethostname()}:{_dead_pid()}:123"
    assert run_recovery.owner_is_gone(dead)
    # Our own pid with another start time: the pid was reused by a new process, the owner is gone.
    reused = f"{socket.gethostname()}:{os.getpid()}:1"
    assert run_recovery.owner_is_gone(reused)
    # Another machine's process cannot be checked: never treated as gone.
    assert not run_recovery.owner_is_gone(f"some-other-host:{_dead_pid()}:123")
    assert not run_recovery.owner_is_gone("garbage")


def test_dead_runs_are_failed_and_slots_freed_live_runs_untouched(instance):
    dead = _run(instance, f"{socket.gethostname()}:{_dead_pid()}:1")
    assert _slot_holders(instance) == {dead}
    alive = _run(instance, run_recovery.owner_tag_value(), claim=False)
    untagged = _run(instance, None, claim=False)  # e.g. launched by the UI's run launcher: its monitor's job

    recovery = run_recovery.recover_dead_runs(instance)

    assert recovery.failed_runs == [dead]
    assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive).status == dg.DagsterRunStatus.STARTED
    assert instance.get_run_by_id(untagged).status == dg.DagsterRunStatus.STARTED
    assert _slot_holders(instance) == set()
    assert f"marked 1 run(s) whose process is gone as FAILURE ({dead})" in recovery.summary()
    assert run_recovery.recover_dead_runs(instance).summary() is None, "a second pass finds nothing"


def test_a_live_run_keeps_its_slot(instance):
    alive = _run(instance, run_recovery.owner_tag_value())
    assert run_recovery.recover_dead_runs(instance).summary() is None
    assert _slot_holders(instance) == {alive}


def test_ended_or_deleted_runs_holding_slots_are_freed(instance):
    """UI "Terminate" marks a run CANCELED but its slot stayed; `dagster run delete` left none to look up."""
    canceled = _run(instance, None)
    instance.report_run_canceled(instance.get_run_by_id(canceled))
    recovery = run_recovery.recover_dead_runs(instance)
    assert recovery.freed_slot_runs == [canceled] and recovery.failed_runs == []
    assert _slot_holders(instance) == set()
    deleted = _run(instance, None)
    instance.delete_run(deleted)  # Dagster frees the slots of a run it deletes
    _claim(instance, deleted)  # a claim that outlived its run
    assert run_recovery.recover_dead_runs(instance).freed_slot_runs == [deleted]
    assert _slot_holders(instance) == set()


def test_mlflow_runs_of_a_dead_run_are_ended_as_failed(instance):
    ensure_experiments()
    dead = _run(instance, f"{socket.gethostname()}:{_dead_pid()}:1")
    other = _run(instance, run_recovery.owner_tag_value(), claim=False)
    client = store_client(settings.mlflow_tracking_uri())
    experiment = client.get_experiment_by_name("fair_pipeline/audit").experiment_id
    left_running = [client.create_run(experiment, tags={TAG_DAGSTER_RUN: dead}).info.run_id for _ in range(2)]
    finished = client.create_run(experiment, tags={TAG_DAGSTER_RUN: dead}).info.run_id
    client.set_terminated(finished, status="FINISHED")
    live = client.create_run(experiment, tags={TAG_DAGSTER_RUN: other}).info.run_id

    assert run_recovery.recover_dead_runs(instance).ended_mlflow_runs == 2
    assert [client.get_run(r).info.status for r in left_running] == ["FAILED", "FAILED"]
    assert client.get_run(finished).info.status == "FINISHED"
    assert client.get_run(live).info.status == "RUNNING"


def test_unreachable_mlflow_does_not_stop_the_recovery(instance, monkeypatch):
    dead = _run(instance, f"{socket.gethostname()}:{_dead_pid()}:1")

    def unreachable(_run_ids):
        raise ConnectionError("tracking server down")

    monkeypatch.setattr(run_recovery, "_end_mlflow_runs", unreachable)
    recovery = run_recovery.recover_dead_runs(instance)
    assert recovery.failed_runs == [dead] and _slot_holders(instance) == set()
    assert "could not end their MLflow runs (ConnectionError: tracking server down)" in recovery.summary()


def _set_and_sleep(started) -> None:
    started.set()
    time.sleep(60)


def _interrupted_within(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not run_recovery.interrupted() and time.monotonic() < deadline:
        time.sleep(0.05)
    return run_recovery.interrupted()


def test_a_signal_to_a_forked_child_is_not_this_processs_interrupt():
    """A forked child shares the parent's wakeup socket unless it is forgotten at fork: a `multiprocessing` pool's
    SIGTERM to its workers at shutdown was read as this process's Ctrl-C (found by CI: the next CLI run said
    "interrupted")."""
    me = os.getpid()

    def on_sigterm(_signo, _frame):  # a Python handler, as Dagster installs one: the signal reaches the wakeup fd
        if os.getpid() != me:
            os._exit(0)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        run_recovery._watch_interrupts()  # what `prepare_run` starts before a run
        run_recovery.begin_command()
        fork = multiprocessing.get_context("fork")
        started = fork.Event()
        child = fork.Process(target=_set_and_sleep, args=(started,))
        child.start()
        assert started.wait(10)
        child.terminate()  # SIGTERM, as `Pool.terminate` sends to a worker still running
        child.join(10)
        assert child.exitcode == 0  # its handler ran
        assert not _interrupted_within(1.5)
        os.kill(me, signal.SIGTERM)  # the control: this process's own SIGTERM is seen
        assert _interrupted_within(5)
    finally:
        signal.signal(signal.SIGTERM, previous)
        run_recovery.begin_command()
