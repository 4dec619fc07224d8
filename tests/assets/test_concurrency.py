"""A multi-partition backfill with the multiprocess executor never fails on DuckDB's single-writer lock
and never loses rows: warehouse steps queue on the `duckdb` pool (limit 1)."""
from __future__ import annotations

import concurrent.futures

import dagster as dg
import duckdb
import pyarrow.parquet as pq

from fair_pipeline import runner, settings
from fair_pipeline.definitions import ingest_logs_job_def


def test_parallel_partition_runs_with_multiprocess_executor(small_landing):
    runner.ensure_dagster_home()
    instance = dg.DagsterInstance.get()
    assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
    job = dg.reconstructable(ingest_logs_job_def)  # 3 warehouse writers per run, 2 runs at once

    def run(day: str) -> bool:
        with dg.execute_job(
            job, instance=instance, tags={"dagster/partition": day},
            run_config={"execution": {"config": {"multiprocess": {"max_concurrent": 3, "start_method": {"forkserver": {}}}}}},
        ) as result:
            return result.success

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(run, ["2026-01-01", "2026-01-02"]))
    assert outcomes == [True, True]
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        for source in ("observational", "randomized"):
            loaded = dict(con.execute(f"SELECT CAST(partition_date AS VARCHAR), count(*) FROM raw.{source}_impressions GROUP BY 1").fetchall())
            landed = {d: pq.read_metadata(small_landing / source / f"date={d}" / "part-0.parquet").num_rows for d in loaded}
            assert loaded == landed and len(loaded) == 2
        assert con.execute("SELECT count(*) FROM raw.items").fetchone()[0] == 2_000
