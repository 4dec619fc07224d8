"""How xdist hands the suite to its workers (tests/conftest.py): long work units first, in that order, and each
ONE_WORKER directory to a single worker."""
from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

from tests import conftest

REPO = Path(__file__).resolve().parents[1]


def test_every_long_module_and_one_worker_directory_named_for_scheduling_exists():
    """A renamed module would silently lose its place, a renamed directory its single worker."""
    assert [name for name in conftest.LONG_MODULES if not (REPO / name).is_file()] == []
    assert [name for name in conftest.ONE_WORKER if not (REPO / name).is_dir()] == []


class _TwoWorkers:
    """The suite's own configuration (its addopts included) as the xdist controller sees it with two workers."""

    def __init__(self, config):
        self._config, self.option = config, config.option

    def getvalue(self, name: str):
        return {"dist": "loadfile", "tx": ["2*popen"]}.get(name) or self._config.getvalue(name)

    getoption = getvalue


class _Worker:
    """What the scheduler uses of xdist's WorkerController."""

    shutting_down = False

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.batches: list[list[int]] = []

    def send_runtest_some(self, indices):
        self.batches.append(list(indices))

    def shutdown(self):
        self.shutting_down = True


def test_long_units_go_first_in_their_order_and_the_spark_tests_to_one_worker(pytestconfig):
    many_short = [f"tests/training/test_penalized.py::test_{k}" for k in range(10)]
    spark = ["tests/platform/spark/test_parity.py::test_a", "tests/platform/spark/test_parity.py::test_b",
             "tests/platform/spark/test_engine_run.py::test_run", "tests/platform/spark/test_bench_engines.py::test_b"]
    readme = [f"tests/e2e/test_readme.py::test_{k}" for k in range(4)]
    one_long = ["tests/platform/test_concurrent_runs.py::test_two"]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in many_short + spark + readme + one_long]
    random.Random(1).shuffle(items)  # as pytest-randomly leaves them
    conftest.pytest_collection_modifyitems(items)
    collection = [item.nodeid for item in items]

    scheduler = pytestconfig.hook.pytest_xdist_make_scheduler(config=_TwoWorkers(pytestconfig), log=None)
    workers = [_Worker("gw0"), _Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()

    sent = [{collection[i] for i in worker.batches[0]} for worker in workers]
    # The longest unit (the README's 4 tests) first, then every Spark module together, on the other worker; the
    # rest waits in LONG_MODULES order: xdist's own reordering by number of tests would hand out the 10 short
    # tests first and the single long one last.
    assert sent == [set(readme), set(spark)]
    assert list(scheduler.workqueue) == ["tests/platform/test_concurrent_runs.py", "tests/training/test_penalized.py"]
