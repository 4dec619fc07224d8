"""Spark processes for tests and benchmarks, started from the installed pyspark wheel (nothing downloaded):
a standalone master and worker (`spark-class org.apache.spark.deploy.{master.Master,worker.Worker}` on 127.0.0.1)
and a Spark Connect server (`spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`).

Each is a child process of the caller with its own log file; `stop()` terminates exactly the processes it started
(by their id). The worker runs in its own working directory, away from the driver's cwd, so a test that passes
on it does not depend on executors finding the driver's relative paths. A JVM start costs 20-45 s on a busy
machine: start a cluster once per test module (a module-scoped fixture) and share it.

    with standalone_cluster(tmp_path, cores=2) as cluster:
        spark = SparkSession.builder.master(cluster.master_url).getOrCreate()
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

# What each process logs once it can serve (Spark's own log lines; stable across 3.x and 4.x).
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"
CONNECT_READY = "Spark Connect server started"
# The tests' JVMs in subprocesses run C1 alone (tests/conftest.py sets it as JAVA_TOOL_OPTIONS; docs/development.md).
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
START_TIMEOUT_S = 180.0  # a JVM start is 20-45 s on an idle machine; several minutes when 8 test suites share 2 cores


class SparkProcessError(RuntimeError):
    """A Spark process exited or did not become ready in time; the message quotes the end of its log."""


def require_java(what: str) -> None:
    """Skips the test without Java 17 (fails it on CI, where .ci/run installs Java)."""
    import shutil

    import pytest

    if shutil.which("java") is None:
        message = f"{what} needs Java 17 (`apt-get install openjdk-17-jre-headless`; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def spark_home() -> Path:
    """The pyspark wheel's own Spark distribution (bin/, sbin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class SparkProcess:
    name: str
    process: subprocess.Popen
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_for(self, marker: str, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.log.exists() and marker in self.log.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                raise SparkProcessError(f"{self.name} exited with {self.process.returncode}; log {self.log}:\n{self.tail()}")
            time.sleep(0.5)
        raise SparkProcessError(f"{self.name} not ready after {timeout_s:.0f} s (no {marker!r}); log {self.log}:\n{self.tail()}")

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout_s)


def _environment(log_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_NO_DAEMONIZE": "1",
        # Executors' Python workers use this interpreter (the test's virtualenv), whatever the PATH says.
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    return env


def _default_stop_signals() -> None:
    """In the child before exec: SIGTERM and SIGINT get their default action back. An ignored signal stays ignored
    across exec, and a test process started with SIGINT ignored (a background job of a shell, as CI may start the
    suite) has SIGTERM ignored too after any in-process Dagster run (Dagster copies SIGINT's handler to SIGTERM): a
    JVM started from it ignored `stop()`'s SIGTERM, which then waited its whole timeout before killing it."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def _start(name: str, command: list[str], cwd: Path, log_dir: Path) -> SparkProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=cwd, env=_environment(log_dir), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=_default_stop_signals)
    return SparkProcess(name, process, log)


@dataclasses.dataclass
class StandaloneCluster:
    """A standalone master and one worker on 127.0.0.1; `master_url` is what `--spark-master` takes."""

    master_url: str
    master: SparkProcess
    worker: SparkProcess
    worker_dir: Path
    event_log_dir: Path

    def stop(self) -> None:
        for process in (self.worker, self.master):
            process.stop()


def start_standalone(base: Path, cores: int = 2, memory: str = "2g") -> StandaloneCluster:
    """Start a master and a worker with `cores` and `memory` for executors, under `base` (logs, the worker's
    working directory, an event-log directory drivers may use); waits until the worker has registered."""
    base = Path(base)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, master_ui, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    logs = base / "logs"
    master = _start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(master_ui)], base / "master", logs)
    worker = None
    try:
        master.wait_for(MASTER_READY)
        worker_dir = base / "worker"
        worker = _start("worker", [spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                                   "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                   "--webui-port", str(worker_ui), "--work-dir", str(worker_dir / "work")],
                        worker_dir, logs)
        worker.wait_for(WORKER_READY)
    except BaseException:
        if worker is not None:
            worker.stop()
        master.stop()
        raise
    event_logs = base / "event_logs"
    event_logs.mkdir(parents=True, exist_ok=True)
    return StandaloneCluster(master_url, master, worker, worker_dir, event_logs)


@contextlib.contextmanager
def standalone_cluster(base: Path, cores: int = 2, memory: str = "2g") -> Iterator[StandaloneCluster]:
    cluster = start_standalone(base, cores, memory)
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclasses.dataclass
class ConnectServer:
    """A Spark Connect server; `url` (sc://127.0.0.1:PORT) is what `--spark-master` and `SparkSession.builder.remote`
    take."""

    url: str
    server: SparkProcess

    def stop(self) -> None:
        self.server.stop()


def start_connect_server(base: Path, master: str = "local[2]", driver_memory: str = "1g",
                         conf: dict[str, str] | None = None) -> ConnectServer:
    """Start a Spark Connect server (its own driver JVM on `master`) under `base`; waits until it serves."""
    base = Path(base)
    port = free_port()
    settings = {"spark.connect.grpc.binding.port": str(port), "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC", **(conf or {})}
    command = [str(spark_home() / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--name", "fair_pipeline connect server", "--master", master, "--driver-memory", driver_memory]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    server = _start("connect", command, base / "connect", base / "logs")
    try:
        server.wait_for(CONNECT_READY)
    except BaseException:
        server.stop()
        raise
    return ConnectServer(f"sc://127.0.0.1:{port}", server)


@contextlib.contextmanager
def connect_server(base: Path, master: str = "local[2]", driver_memory: str = "1g") -> Iterator[ConnectServer]:
    server = start_connect_server(base, master, driver_memory)
    try:
        yield server
    finally:
        server.stop()
