"""benchmarks/bench_engines.py (documented in docs/spark.md) runs, at a small size, in the tests' SparkSession."""
from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_engines.py"


def test_the_engine_benchmark_runs_small_in_the_shared_session(spark, capsys):
    spec = importlib.util.spec_from_file_location("bench_engines", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # --masters with the shared session's own master only: a second master would stop the shared session.
    bench.main(["--impressions", "5e3", "--repeats", "1", "--masters", "local[2]"], stop_session=False)
    out = capsys.readouterr().out
    for line in ("Spark master local[2]", "SQL models on DuckDB", "SQL models on Spark", "raw layer DuckDB -> Spark",
                 "Spark / DuckDB, SQL models"):
        assert line in out, out
    assert not spark.sparkContext._jsc.sc().isStopped()
