"""The Spark processes the tests start (`tests/platform/spark/cluster.py`) stop on `stop()`'s SIGTERM even when the
test process ignores SIGTERM (started as a background job with SIGINT ignored, after an in-process Dagster run, which
copies SIGINT's handler to SIGTERM): otherwise every master, worker and Connect server waited out the stop's timeout
before being killed. A Python sleeper stands in for the JVM: both keep an inherited SIG_IGN."""
from __future__ import annotations

import signal
import sys

from tests.platform.spark import cluster

SLEEPER = "import time; print('ready', flush=True); time.sleep(600)"


def test_a_process_started_while_sigterm_is_ignored_ends_on_sigterm(tmp_path):
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        sleeper = cluster._start("sleeper", [sys.executable, "-c", SLEEPER], tmp_path / "cwd", tmp_path / "logs")
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        sleeper.wait_for("ready", timeout_s=60)
        sleeper.stop(timeout_s=20)
    finally:
        if sleeper.process.poll() is None:
            sleeper.process.kill()
            sleeper.process.wait()
    assert sleeper.process.returncode == -signal.SIGTERM  # the SIGTERM ended it, not the kill after the timeout
