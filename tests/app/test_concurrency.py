"""A multi-partition backfill with the multiprocess executor never fails on DuckDB's single-writer lock
and never loses rows: warehouse steps queue on the `duckdb` pool (limit 1 in the generated dagster.yaml)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.parquet as pq

from fair_pipeline import runner
from fair_pipeline.platform import settings

SCRIPT = Path(__file__).with_name("run_partition_subprocess.py")


def test_parallel_partition_runs_with_multiprocess_executor(small_landing):
    runner.ensure_dagster_home()
    assert dg.DagsterInstance.get().get_concurrency_config().pool_config.default_pool_limit == 1
    env = {**os.environ, "PYTHONPATH": str(settings.REPO_ROOT)}
    # Two runs at once (as a backfill launches them), each running 3 warehouse writers in parallel processes.
    runs = [subprocess.Popen([sys.executable, str(SCRIPT), day], env=env, start_new_session=True) for day in ("2026-01-01", "2026-01-02")]
    try:
        assert [run.wait(timeout=600) for run in runs] == [0, 0]
    finally:  # never leave a run (and its step processes) behind
        for run in runs:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        for source in ("observational", "randomized"):
            loaded = dict(con.execute(f"SELECT CAST(partition_date AS VARCHAR), count(*) FROM raw.{source}_impressions GROUP BY 1").fetchall())
            landed = {d: pq.read_metadata(small_landing / source / f"date={d}" / "part-0.parquet").num_rows for d in loaded}
            assert loaded == landed and len(loaded) == 2
        assert con.execute("SELECT count(*) FROM raw.items").fetchone()[0] == 2_000
