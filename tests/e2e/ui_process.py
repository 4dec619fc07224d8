"""Runs `fair-pipeline ui` as a user would (a subprocess) and stops it with a signal."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from fair_pipeline.ui import _descendants, free_port

REPO = Path(__file__).resolve().parents[2]


class UiProcess:
    def __init__(self, home: Path, timeout_s: float = 240.0, mlflow_port: int | None = None):
        self.dagster_port, self.mlflow_port = free_port(), mlflow_port or free_port()
        env = {**os.environ, "FAIR_PIPELINE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home")}
        env.pop("MLFLOW_TRACKING_URI", None)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fair_pipeline.commands", "ui", "--dagster-port", str(self.dagster_port),
             "--mlflow-port", str(self.mlflow_port)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not self.urls():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError("fair-pipeline ui did not come up:\n" + self.output)
            time.sleep(0.3)

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def urls(self) -> dict[str, str]:
        # The base URL of each server (the MLflow line continues with the experiments view to open).
        found = dict(re.findall(r"(Dagster|MLflow) UI:\s+(http://[^/\s#?]+)", self.output))
        return found if len(found) == 2 else {}

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 90.0) -> int:
        """Signal the CLI process only (as a terminal's Ctrl-C or a service manager would); if it has
        not exited in time, kill everything it started so no test leaves servers behind."""
        tree = _descendants(self.process.pid)
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout_s)
        finally:
            if self.process.poll() is None:
                for pid in tree | _descendants(self.process.pid) | {self.process.pid}:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.process.wait()
            self._reader.join(timeout=5)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def no_server_left(ui: UiProcess) -> bool:
    """Nothing listens on either port and no process runs from the UI's command lines."""
    if port_open(ui.dagster_port) or port_open(ui.mlflow_port):
        return False
    needles = (f"-p {ui.dagster_port}", f"--port {ui.dagster_port}", f"--port {ui.mlflow_port}")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(needle in command for needle in needles):
                return False
    return True
