"""A small DuckDB warehouse from simulated landing files, without Dagster: the raw layer loaded by the
ingestion stage's own loads (with a few rejected rows, so the quarantine is not empty). Shared by the
SQL-rendering inventory and the Spark parity tests, which build the models with `engines.build_models`."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import partition_dir
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.ingestion.loads import load_partition
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.platform import warehouse

CONFIG = SimulationConfig(n_items=300, requests_per_day=40, shuffle_share=0.5, adjacent_swap_share=0.5, slots=10, seed=11)
START = dt.date(2026, 1, 1)
DAYS = 2
PARTITIONS = [str(START + dt.timedelta(days=offset)) for offset in range(DAYS)]


def simulate_landing(landing: Path) -> Path:
    """Simulated days plus, on the first day, a second observational file with a few rows the contract rejects
    (position 0, click 5), so raw.quarantine and the models over it have rows."""
    simulate_to_landing(CONFIG, landing, START, DAYS)
    folder = partition_dir(landing, "observational", START)
    table = pq.read_table(folder / "part-0.parquet").slice(0, 20)
    rows = table.to_pandas()
    rows["request_id"] = rows["request_id"].astype(str) + "-copy"  # new requests: no duplicate (request, slot)
    rows.loc[0:2, "position"] = 0
    rows.loc[3:4, "click"] = 5
    pq.write_table(pa.Table.from_pandas(rows, schema=table.schema, preserve_index=False), folder / "part-1.parquet")
    return landing


def load_raw(path: Path, landing: Path) -> None:
    """Ingest the landing files into the DuckDB warehouse at `path` (raw.* and raw.quarantine)."""
    with warehouse.session(path) as con:
        load_items(con, landing)
        for day in PARTITIONS:
            for source in contract.SOURCES:
                load_partition(con, landing, source, day)
