"""Bounded driver: the item-clustered audit (the default estimand) on a standalone cluster (`audit.spark_audit`:
sweep per score range, influence sums shuffled by item; through benchmarks/bench_spark_audit.py at two small sizes)
returns as many bytes to the driver at 10x the rows, from Spark's event log (SparkListenerTaskEnd task metrics
"Result Size" of the audit's jobs). One cluster start for the module (a JVM start is 20-45 s)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.platform.spark.cluster import require_java, standalone_cluster

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_spark_audit.py"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_java("the cluster test")
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), cores=2, memory="1g") as started:
        yield started


def _bench():
    spec = importlib.util.spec_from_file_location("bench_spark_audit", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_bytes_returned_to_the_driver_do_not_grow_with_the_days_rows(cluster, tmp_path, capsys):
    small, large = 20_000, 200_000
    out = tmp_path / "figures.json"
    _bench().main(["--rows", f"{small},{large}", "--items", "2000", "--partitions", "6", "--source-partitions", "4",
                   "--executor-memory", "1g", "--master", cluster.master_url, "--json", str(out)])
    figures = {int(k): v for k, v in json.loads(out.read_text()).items()}
    assert "growth 2e+04 -> 2e+05 (x10 rows)" in capsys.readouterr().out
    for rows in (small, large):
        assert figures[rows]["labelled"] == rows  # every generated row was audited
        assert 0.0 < min(figures[rows]["auc_0.1"].values()) < 0.1  # I(0.1) of each group: the rows were swept
        assert figures[rows]["clusters"] == 2000 and min(figures[rows]["se_0.1"].values()) > 0  # clustered SEs
        assert figures[rows]["result_bytes"] > 0 and figures[rows]["tasks"] == figures[small]["tasks"]
    # the same tasks return the same few numbers: per group, per score range, the ranges' states and the
    # clusters' moments per shuffle partition (the clusters' rows go through the shuffle, not the driver)
    assert figures[large]["result_bytes"] <= 1.1 * figures[small]["result_bytes"], figures
