"""The coverage benchmarks' process pool ends even in a process whose SIGTERM handler only records the signal (as
Dagster's does after an in-process run): a forked worker that inherited it would ignore the pool's SIGTERM and
`Pool.terminate` would wait forever (a whole suite hung on tests/audit/test_coverage.py that way)."""
from __future__ import annotations

import subprocess
import sys

import pytest

POOL_UNDER_A_RECORDING_HANDLER = """
import signal, time
signal.signal(signal.SIGTERM, lambda signo, frame: None)  # records nothing, raises nothing: the worker lives on

def stuck(_):
    time.sleep(3600)  # a worker that never returns (as one blocked on a lock its dead peer held)

{make_pool}
with pool:
    assert pool.map(abs, range(-20, 0)) == list(range(20, 0, -1))
    pool.map_async(stuck, range(2))
    time.sleep(1)
print("ended")  # Pool.__exit__ terminated the workers
"""


def _run(make_pool: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", POOL_UNDER_A_RECORDING_HANDLER.format(make_pool=make_pool)],
                          capture_output=True, text=True, timeout=timeout)


def test_the_replication_pool_ends_whatever_sigterm_handler_its_parent_has():
    result = _run("from fair_pipeline.platform.replications import replication_pool\npool = replication_pool(2)", 60)
    assert result.returncode == 0 and result.stdout.strip() == "ended", result.stderr


@pytest.mark.skipif(sys.platform == "darwin", reason="the plain pool forks only on Linux")
def test_a_plain_forked_pool_hangs_there_so_the_test_above_can_fail():
    with pytest.raises(subprocess.TimeoutExpired):
        _run("from multiprocessing import get_context\npool = get_context('fork').Pool(2)", 10)
