"""The landing-file data contract (DESIGN.md section 3), in one place.

Simulators and real-data adapters write these columns; ingestion validates against them.
"""
from __future__ import annotations

import pyarrow as pa

# One row per displayed item.
IMPRESSION_SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("request_id", pa.string()),
        ("query_id", pa.string()),
        ("policy", pa.string()),
        ("position", pa.int32()),
        ("original_position", pa.int32()),
        ("item_id", pa.string()),
        ("group_id", pa.string()),
        ("score", pa.float64()),
        ("click", pa.int32()),
    ]
)
IMPRESSION_COLUMNS = tuple(IMPRESSION_SCHEMA.names)

POLICIES = ("production", "shuffle", "adjacent_swap")
OBSERVATIONAL_POLICIES = ("production",)
RANDOMIZED_POLICIES = ("shuffle", "adjacent_swap")

# Landing sub-folders; `landing/<source>/date=YYYY-MM-DD/*.parquet`.
SOURCES = ("observational", "randomized")
SOURCE_POLICIES = {"observational": OBSERVATIONAL_POLICIES, "randomized": RANDOMIZED_POLICIES}
ITEMS_DIR = "items"
TRUTH_DIR = "_truth"
EXTRAS_DIR = "_extras"  # source-specific columns the contract has no place for, keyed by (request_id, position)

# Scores beyond this magnitude are rejected: downstream stages bin scores into 64-bit integers
# (floor(score / bin width)), which overflows from about 1e17; no real ranking score comes near 1e12.
MAX_ABS_SCORE = 1e12

# DuckDB adds a `file_row_number` column when it reads Parquet with row numbers (ingestion needs them to
# quarantine exactly the bad rows) and cannot rename it, so a landing file may not have a column of that name.
# Every other column outside the contract is ignored: ingestion reads the contract's columns by name only.
RESERVED_COLUMNS = ("file_row_number",)
