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
from fair_pipeline.lazy_exports import lazy_exports

# Imported on first use: the commands' `--help` reads the simulator's defaults without loading DuckDB or Arrow.
__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "contract": ("IMPRESSION_COLUMNS", "IMPRESSION_SCHEMA", "POLICIES", "SOURCES"),
    "catalogue": ("CatalogueLoad", "load_items"),
    "loads": ("PartitionLoad", "load_partition"),
    "simulated_landing": ("simulate_to_landing",),
    "simulation_config": ("SimulationConfig",),
    "simulator": ("bias_curve", "simulate_items", "simulate_requests"),
})
