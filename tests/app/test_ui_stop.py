"""Stopping a server stops its whole process tree, even a child that ignores SIGTERM or left the group."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from fair_pipeline import ui

TREE = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    subprocess.Popen([sys.executable, "-c", stubborn])                           # same group, ignores SIGTERM
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)  # own group
    print("ready", flush=True)
    time.sleep(600)
""")


def test_stop_kills_the_whole_tree(tmp_path):
    log = tmp_path / "tree.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-c", TREE], stdout=out, start_new_session=True)
    deadline = time.monotonic() + 30
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    tree = ui._descendants(process.pid)
    assert len(tree) == 2
    server = ui.Server("tree", process, "", "", log)
    began = time.monotonic()
    server.stop(grace_s=2)
    assert time.monotonic() - began < 10
    assert process.returncode is not None
    assert not any(ui._alive(pid) for pid in tree | {process.pid})


def test_busy_port_is_refused_before_starting_anything(tmp_path, monkeypatch):
    import socket

    import pytest

    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(tmp_path))
    with socket.socket() as busy:
        busy.bind((ui.HOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ui.UiStartError, match=f"port {port} on 127.0.0.1 is already in use"):
            ui.start_ui(dagster_port=port, mlflow_port=ui.free_port())
    assert not (tmp_path / "logs").exists()


def _sleeper_of_a_killed_parent(tmp_path, parent_setup: str = "") -> int:
    """Start a sleeper through ui._start in a parent process, SIGKILL the parent, return the sleeper's pid."""
    script = textwrap.dedent(f"""
        import signal, sys, time
        sys.path.insert(0, {str(ui.settings.REPO_ROOT)!r})
        from pathlib import Path
        from fair_pipeline import ui
        {parent_setup}
        server = ui._start("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], {{}}, "", "", Path({str(tmp_path)!r}))
        print(server.process.pid, flush=True)
        time.sleep(600)
    """)
    # Default signal dispositions whatever this test process inherited or an earlier test left behind.
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGINT)])
    child = int(parent.stdout.readline())
    assert ui._alive(child) and os.getpgid(child) == child  # its own process group
    parent.kill()
    parent.wait()
    parent.stdout.close()
    return child


def _dies(child: int) -> bool:
    deadline = time.monotonic() + 10
    while ui._alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = ui._alive(child)
    if alive:  # never leave an orphan behind, even when the test fails
        os.killpg(child, signal.SIGKILL)
    return not alive


def test_servers_die_with_a_killed_parent(tmp_path):
    """`fair-pipeline ui` killed with SIGKILL (no chance to clean up) still leaves no server behind."""
    assert _dies(_sleeper_of_a_killed_parent(tmp_path))


def test_servers_die_with_a_killed_parent_that_ignored_sigterm(tmp_path):
    # The order dependence: pytest started as a background job has SIGINT ignored; after any in-process Dagster
    # run, SIGTERM is ignored too (Dagster copies SIGINT's handler to SIGTERM), the sleeper inherited that through
    # exec, ignored its parent-death SIGTERM and slept on for 10 minutes.
    setup = "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    assert _dies(_sleeper_of_a_killed_parent(tmp_path, setup))


def test_cli_reports_an_unreachable_mlflow_server_clearly(tmp_path, monkeypatch, capsys):
    from fair_pipeline.commands import main

    port = ui.free_port()
    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    # landing files first: backfill checks them before it touches any store
    assert main(["simulate", "--start", "2026-01-01", "--days", "1", "--requests-per-day", "20", "--items", "50",
                     "--slots", "5"]) == 0
    capsys.readouterr()
    assert main(["backfill", "--start", "2026-01-01", "--end", "2026-01-01"]) == 1
    assert f"cannot use MLflow: MLflow tracking server http://127.0.0.1:{port} is unreachable" in capsys.readouterr().out
    code = main(["ui", "--dagster-port", str(ui.free_port()), "--mlflow-port", str(ui.free_port())])
    assert code == 1
    out = capsys.readouterr().out
    assert f"could not start the UI: MLflow tracking server http://127.0.0.1:{port} is unreachable" in out
    assert not (tmp_path / "logs").exists()  # nothing was started
