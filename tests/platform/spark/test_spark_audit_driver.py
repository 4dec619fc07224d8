"""Bounded driver: the item-clustered audit (the default estimand; `audit.spark_audit`: sweep per score range,
influence sums shuffled by item) and the two-way clustered pairwise accuracies (`audit.spark_pairwise`: whole
queries per partition, item x query cells shuffled by item) on a standalone cluster, through
benchmarks/bench_spark_audit.py at two small sizes, return as many bytes to the driver at 10x the rows, from Spark's
event log (SparkListenerTaskEnd task metrics "Result Size" of each pass's jobs), on the session's standalone cluster
(`shared_cluster`: a JVM start is 20-45 s; the benchmark's child processes end their applications)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path



BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_spark_audit.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_spark_audit", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_bytes_returned_to_the_driver_do_not_grow_with_the_days_rows(shared_cluster, tmp_path, capsys):
    small, large = 20_000, 200_000
    out = tmp_path / "figures.json"
    _bench().main(["--rows", f"{small},{large}", "--items", "2000", "--partitions", "6", "--source-partitions", "4",
                   "--executor-memory", "1g", "--master", shared_cluster.master_url, "--json", str(out)])
    figures = {int(k): v for k, v in json.loads(out.read_text()).items()}
    printed = capsys.readouterr().out
    for name in ("audit", "pairwise"):
        assert f"growth 2e+04 -> 2e+05 (x10 rows), {name}: " in printed, printed
    for rows in (small, large):
        audit, pairwise = figures[rows]["audit"], figures[rows]["pairwise"]
        assert audit["labelled"] == rows  # every generated row was audited
        assert 0.0 < min(audit["auc_0.1"].values()) < 0.1  # I(0.1) of each group: the rows were swept
        assert audit["clusters"] == 2000 and min(audit["se_0.1"].values()) > 0  # clustered SEs
        # every query (20 rows each) was paired; the item clusters of the two-way SEs span the catalogue
        assert pairwise["queries"] == rows / 20 and pairwise["pairs"] > rows, pairwise
        assert pairwise["items"] > 1000 and min(pairwise["se"].values()) > 0, pairwise
        assert 0.6 < min(pairwise["accuracy"].values()) < 0.9, pairwise  # the scores rank label-1 items higher
        for name in ("audit", "pairwise"):
            assert figures[rows][name]["result_bytes"] > 0, (rows, name)
            assert figures[rows][name]["tasks"] == figures[small][name]["tasks"], (rows, name)
    # the same tasks return the same few numbers: for the audit, per group, per score range, the ranges' states and
    # the clusters' moments per shuffle partition; for the pairwise pass, each partition's accumulator of pair sums
    # and each stream's moments (queries, item x query cells, items). The rows, queries, cells and items go
    # through the executors and the shuffle, not the driver.
    for name in ("audit", "pairwise"):
        assert figures[large][name]["result_bytes"] <= 1.1 * figures[small][name]["result_bytes"], (name, figures)
