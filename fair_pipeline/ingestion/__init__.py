"""Ingestion: click logs from landing files into validated, partitioned warehouse tables.

The data contract (`contract`: the columns of an impression, policies, sources), landing-zone paths and
atomic Parquet writes (`landing`), the click simulator (`simulator`, pure numpy: items, production and
randomized traffic, the true position-bias curve) and the writer of simulated landing files
(`simulated_landing`), the validated loads (`loads`: typed rows into `raw.*_impressions` one daily partition
at a time, rejected rows into `raw.quarantine` with a reason; `catalogue`: the item catalogue into `raw.items`,
NULL-safe duplicates, exact re-deliveries deduplicated, conflicting ids quarantined) and the Dagster assets
(`assets`).
Inputs: `$FAIR_PIPELINE_HOME/landing/{observational,randomized}/date=YYYY-MM-DD/*.parquet` and `landing/items/`.
Outputs: `raw.observational_impressions`, `raw.randomized_impressions`, `raw.items`, `raw.quarantine`.
Tests: tests/ingestion/.
"""
from fair_pipeline.ingestion.contract import IMPRESSION_COLUMNS, IMPRESSION_SCHEMA, POLICIES, SOURCES
from fair_pipeline.ingestion.catalogue import CatalogueLoad, load_items
from fair_pipeline.ingestion.loads import PartitionLoad, load_partition
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_items, simulate_requests

__all__ = [
    "CatalogueLoad", "IMPRESSION_COLUMNS", "IMPRESSION_SCHEMA", "POLICIES", "PartitionLoad", "SOURCES", "SimulationConfig", "bias_curve",
    "load_items", "load_partition", "simulate_items", "simulate_requests", "simulate_to_landing",
]
