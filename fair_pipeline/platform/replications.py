"""A process pool for Monte Carlo replications (the coverage benchmarks and their tests).

Forked workers inherit their parent's signal handlers. A process that ran a Dagster job in-process may still hold
Dagster's handlers, which only record SIGTERM; a worker waiting for a task then ignores the pool's SIGTERM at
shutdown and `Pool.terminate` waits for it forever. The workers here take the default action back first.
"""
from __future__ import annotations

import signal
import sys
from multiprocessing import get_context
from multiprocessing.pool import Pool


def _default_termination() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def replication_pool(jobs: int) -> Pool:
    """`jobs` worker processes (forked where the platform allows, so that workers share the loaded modules) that end
    on the pool's SIGTERM."""
    context = get_context("spawn" if sys.platform == "darwin" else "fork")
    return context.Pool(jobs, initializer=_default_termination)


def replication_rows(task, arguments, jobs: int, chunks_per_job: int = 4) -> list:
    """Run ``task`` on every argument (in `jobs` processes when jobs > 1) and join the lists of rows it returns, in
    the arguments' order (so results do not depend on ``jobs``)."""
    arguments = list(arguments)
    if jobs > 1:
        with replication_pool(jobs) as pool:
            parts = pool.map(task, arguments, chunksize=max(1, len(arguments) // (chunks_per_job * jobs)))
    else:
        parts = [task(a) for a in arguments]
    return [row for part in parts for row in part]


__all__ = ["replication_pool", "replication_rows"]
