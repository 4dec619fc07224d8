"""Ingestion of a day larger than DuckDB's memory cap completes by spilling (at 250k
requests/day, a rejected-rows query that materializes every typed row of the day in memory runs out of it)."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from fair_pipeline.ingestion import loads
from fair_pipeline.ingestion.landing import partition_dir, write_parquet_atomic
from fair_pipeline.ingestion.simulated_landing import simulate_source_table
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform import warehouse

DAY = dt.date(2026, 1, 1)


def test_a_day_twenty_times_the_memory_limit_loads_exactly(tmp_path):
    """1.25M rows (~70 bytes each in DuckDB) under a 64MB cap with two threads; the old query failed here with
    'failed to allocate data of size 16.0 MiB (45.8 MiB/61.0 MiB used)'. Some rows are repeated and some
    invalid, so every part of the rejected-rows query runs; counts and sums are exact."""
    config = SimulationConfig(requests_per_day=25_000, n_items=2_000)
    table = simulate_source_table(config, simulate_items(config), DAY, "observational")
    copies = np.arange(0, table.num_rows, 10_007)  # later copies of valid rows: duplicates
    table = pa.concat_tables([table, table.take(copies)])
    clicks = table.column("click").to_numpy().copy()
    bad = np.arange(5, table.num_rows, 50_021)
    clicks[bad] = 7
    table = table.set_column(table.column_names.index("click"), "click", pa.array(clicks, pa.int32()))
    landing = tmp_path / "landing"
    write_parquet_atomic(table, partition_dir(landing, "observational", DAY) / "part-0.parquet")
    with warehouse.session(tmp_path / "warehouse.duckdb", memory_limit="64MB", temp_directory=tmp_path / "spill") as con:
        con.execute("SET threads = 2")
        load = loads.load_partition(con, landing, "observational", DAY.isoformat())
        stored = con.execute("SELECT count(*), sum(click) FROM raw.observational_impressions").fetchone()
    duplicates_of_valid = len(np.setdiff1d(copies, bad))  # a copy of a row with a bad click is rejected for its click
    bad_in_copies = np.isin(np.arange(table.num_rows - len(copies), table.num_rows), bad).sum()
    assert load.rejected_by_reason == {"click not 0/1": len(bad),
                                       "duplicate (request_id, position)": duplicates_of_valid - bad_in_copies}
    assert load.accepted == table.num_rows - load.rejected
    kept = np.ones(table.num_rows, bool)
    kept[bad] = False
    kept[table.num_rows - len(copies):][~np.isin(copies, bad)] = False
    assert stored == (load.accepted, int(clicks[kept].sum()))
