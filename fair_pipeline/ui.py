"""`fair-pipeline ui`: the Dagster UI (webserver behind `platform.ui_guard`, with the daemon) and the MLflow UI on one
home.

Each server runs in its own session (process group), so a terminal's Ctrl-C reaches only us and we
stop both groups explicitly: SIGTERM to each group, then SIGKILL to whatever survives the grace
period (including grandchildren that moved to groups of their own).
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from fair_pipeline.platform import settings
from fair_pipeline.platform.tracking import CLASSIC_VIEW, UI_URL_ENV, TrackingUnavailableError, ensure_experiments

HOST = "127.0.0.1"
DEFAULT_DAGSTER_PORT = 3000
DEFAULT_MLFLOW_PORT = settings.DEFAULT_MLFLOW_UI_PORT
WORKSPACE = settings.REPO_ROOT / "workspace.yaml"


# Loaded before any fork: the child between fork and exec should only make system calls.
_LIBC = ctypes.CDLL(None, use_errno=True)


class UiStartError(RuntimeError):
    """A server exited or did not answer in time; the message includes the end of its log."""


def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) == 0


def dagster_command(port: int, host: str = HOST) -> list[str]:
    """The Dagster webserver behind the UI guard, and the daemon (what `dagster dev` runs, guarded)."""
    return [sys.executable, "-m", "fair_pipeline.platform.guarded_dagster", "-w", str(WORKSPACE), "-h", host,
            "-p", str(port)]


def mlflow_command(port: int, host: str = HOST) -> list[str]:
    return [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", settings.mlflow_tracking_uri(),
        "--default-artifact-root", settings.mlflow_artifact_root().as_uri(),
        "--host", host, "--port", str(port), "--workers", "1",
    ]


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (from /proc), including ones that started sessions of their own."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclasses.dataclass
class Server:
    name: str
    process: subprocess.Popen
    url: str
    health_url: str
    log_path: Path

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the server's process group, wait, then SIGKILL every straggler."""
        pids = {self.process.pid} | _descendants(self.process.pid)
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            self.process.poll()
            pids |= _descendants(self.process.pid) if self.process.returncode is None else set()
            if not any(_alive(pid) for pid in pids):
                break
            time.sleep(0.2)
        for pid in pids:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            self.process.poll()
            time.sleep(0.05)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _own_session_dying_with_parent() -> None:
    """In the child before exec: a session of its own (so we signal it as a group), and on Linux a
    SIGTERM when our process dies, even by SIGKILL, so a killed `fair-pipeline ui` leaves no servers.

    SIGTERM and SIGINT get their default action back first: an ignored signal stays ignored across exec, and
    a parent started with SIGINT ignored (a background job of a shell) that ran Dagster in process has
    SIGTERM ignored too (Dagster maps SIGTERM to SIGINT's handler); the servers would then outlive it."""
    os.setsid()
    for sig in (signal.SIGTERM, signal.SIGINT):
        _LIBC.signal(sig, 0)  # SIG_DFL; libc directly, since Python's signal.signal needs the main thread
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(name: str, command: list[str], env: dict[str, str], url: str, health_url: str, log_dir: Path) -> Server:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command, cwd=settings.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=_own_session_dying_with_parent,
        )
    return Server(name, process, url, health_url, log_path)


def _wait_ready(servers: list[Server], timeout_s: float, cancel: threading.Event | None = None) -> None:
    pending = list(servers)
    deadline = time.monotonic() + timeout_s
    while pending:
        if cancel is not None and cancel.is_set():
            raise UiStartError("interrupted while starting")
        for server in list(pending):
            if server.process.poll() is not None:
                raise UiStartError(f"{server.name} exited with code {server.process.returncode}:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(server.health_url, timeout=2) as response:
                    if response.status == 200:
                        pending.remove(server)
            except (urllib.error.URLError, OSError):
                pass
        if pending and time.monotonic() > deadline:
            names = ", ".join(s.name for s in pending)
            raise UiStartError(f"{names} did not answer within {timeout_s:.0f}s:\n" + "\n".join(s.log_tail() for s in pending))
        time.sleep(0.5)


@dataclasses.dataclass
class UiProcesses:
    servers: list[Server]

    @property
    def dagster(self) -> Server:
        return next(s for s in self.servers if s.name == "dagster")

    @property
    def mlflow(self) -> Server | None:
        return next((s for s in self.servers if s.name == "mlflow"), None)

    def stop(self) -> None:
        # Stop both at once: the webserver's and daemon's graceful shutdown takes a few seconds.
        threads = [threading.Thread(target=s.stop) for s in self.servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def exited(self) -> Server | None:
        return next((s for s in self.servers if s.process.poll() is not None), None)


def start_ui(dagster_port: int = DEFAULT_DAGSTER_PORT, mlflow_port: int = DEFAULT_MLFLOW_PORT, host: str = HOST,
             timeout_s: float = 180.0, cancel: threading.Event | None = None) -> UiProcesses:
    """Start both servers and wait until both answer; on failure nothing is left running."""
    from fair_pipeline.runner import ensure_dagster_home

    for port in (dagster_port, mlflow_port):
        if _port_in_use(host, port):
            raise UiStartError(f"port {port} on {host} is already in use; pick another with --dagster-port/--mlflow-port")
    dagster_home = ensure_dagster_home()
    uri = settings.mlflow_tracking_uri()
    local_store = uri.startswith("sqlite:///")
    try:
        ensure_experiments()  # the store and experiments exist before any server or step touches them
    except TrackingUnavailableError as error:
        raise UiStartError(str(error)) from error
    # Dagster's metadata links point at the MLflow UI this command serves (or at the external server).
    mlflow_url = f"http://{host}:{mlflow_port}" if local_store else settings.mlflow_ui_url()
    env = {
        **os.environ,
        settings.HOME_ENV: str(settings.home()),
        "DAGSTER_HOME": str(dagster_home),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(settings.REPO_ROOT), os.environ.get("PYTHONPATH")])),
        UI_URL_ENV: mlflow_url,
        "PYTHONUNBUFFERED": "1",
    }
    log_dir = settings.home() / "logs"
    servers = [
        _start("dagster", dagster_command(dagster_port, host), env, f"http://{host}:{dagster_port}",
               f"http://{host}:{dagster_port}/server_info", log_dir)
    ]
    try:
        if local_store:
            servers.append(_start("mlflow", mlflow_command(mlflow_port, host), env, mlflow_url, f"{mlflow_url}/health", log_dir))
        _wait_ready(servers, timeout_s, cancel)
    except BaseException:
        UiProcesses(servers).stop()
        raise
    return UiProcesses(servers)


def serve(dagster_port: int, mlflow_port: int, say: Callable[[str], None], host: str = HOST) -> int:
    """Run both UIs until Ctrl-C / SIGTERM (exit 0) or until one of them dies (exit 1)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        say(f"starting the Dagster UI (with the daemon) and the MLflow UI for {settings.home()} ...")
        try:
            ui = start_ui(dagster_port, mlflow_port, host, cancel=stop)
        except UiStartError as error:
            say(f"could not start the UI: {error}")
            return 0 if stop.is_set() else 1
        say(f"Dagster UI: {ui.dagster.url}   (DAGSTER_HOME={settings.dagster_home()})")
        mlflow_url = ui.mlflow.url if ui.mlflow else settings.mlflow_ui_url()
        say(f"MLflow UI:  {mlflow_url}/#/experiments?{CLASSIC_VIEW}{'' if ui.mlflow else '  (external server)'}")
        say(f"server logs under {settings.home() / 'logs'}; press Ctrl-C to stop both")
        code = 0
        while not stop.wait(0.5):
            dead = ui.exited()
            if dead is not None:
                say(f"{dead.name} exited with code {dead.process.returncode}; stopping the rest:\n{dead.log_tail()}")
                code = 1
                break
        say("stopping ...")
        ui.stop()
        say("stopped")
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
