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
    assert [name for name in conftest.OWN_JVM if not (REPO / name).is_file()] == []
    assert set(conftest.SHARED_CLUSTER) <= set(conftest.OWN_JVM)
    assert [name for name in conftest.SPLIT_MODULES if not (REPO / name).is_file()] == []


def test_every_long_test_named_for_scheduling_is_collected(pytestconfig):
    """A renamed test (or parameter) of a SPLIT_MODULES module would silently lose its place in the queue."""
    import subprocess
    import sys

    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "-n", "0",
                             *conftest.SPLIT_MODULES], cwd=REPO, capture_output=True, text=True, check=True).stdout
    collected = {line.strip() for line in listed.splitlines() if "::" in line}
    assert set(conftest.LONG_TESTS) <= collected, set(conftest.LONG_TESTS) - collected
    assert all(nodeid.split("::")[0] in conftest.SPLIT_MODULES for nodeid in conftest.LONG_TESTS)


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
             "tests/platform/spark/test_spark_engine.py::test_run", "tests/platform/spark/test_bench_engines.py::test_b"]
    own_cluster = [f"tests/platform/spark/test_engine_run.py::test_{k}" for k in range(2)] + [
        f"tests/platform/spark/test_spark_audit_driver.py::test_{k}" for k in range(2)]
    one_long = ["tests/platform/test_concurrent_runs.py::test_two"]
    kills = list(conftest.LONG_TESTS)  # SPLIT_MODULES' long tests, each a unit of its own
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in many_short + spark + own_cluster + one_long + kills]
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
    # Longest unit first (LONG_MODULES summed by unit), the next one to the other worker, every Spark module on the
    # shared session together as one unit, the modules on the shared standalone cluster together apart; the rest waits in the same
    # order: xdist's own reordering by number of tests would hand out the 10 short tests first and the long one last.
    units = {"tests/platform/spark/": set(spark), conftest.SHARED_CLUSTER_UNIT: set(own_cluster),
             "tests/platform/test_concurrent_runs.py": set(one_long), "tests/training/test_penalized.py": set(many_short),
             **{nodeid: {nodeid} for nodeid in kills}}
    seconds = conftest.unit_seconds()
    longest_first = sorted(units, key=lambda unit: -seconds.get(unit, 0))
    assert len({seconds.get(unit, 0) for unit in units}) == len(units), "ties would make the expected order moot"
    assert longest_first[-1] == "tests/training/test_penalized.py"  # not in LONG_MODULES: last, despite 10 tests
    assert sent == [units[longest_first[0]], units[longest_first[1]]]
    assert list(scheduler.workqueue) == longest_first[2:]
