"""benchmarks/bench_commit_log.py (documented in docs/spark.md) runs, at small sizes, in the tests' SparkSession."""
from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_commit_log.py"


def test_the_commit_log_benchmark_runs_small_in_the_shared_session(spark, capsys):
    spec = importlib.util.spec_from_file_location("bench_commit_log", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--commits", "5,20", "--repeats", "1", "--master", "local[2]"])
    out = capsys.readouterr().out
    assert "| 20 | " in out and "replace_partition, after: wall / CPU s" in out and "after / before" in out, out
    assert all(wall > 0 for steps in results.values() for wall, _ in steps.values()), results
