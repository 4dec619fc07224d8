"""Copies warehouse tables between engines through the `Warehouse` interface (Arrow on the driver).

Today's route to Spark: ingestion validates the landing files in DuckDB (raw.* and raw.quarantine), and
`copy_tables` moves the raw layer day by day into the Spark engine, where the SQL models run. One day at a
time passes through the driver, so the copy is bounded by a day's size, not by the table's."""
from __future__ import annotations

from collections.abc import Iterable

from fair_pipeline.platform.engines.base import Table, Warehouse
from fair_pipeline.platform.warehouse import quote_identifier

_FRAME = "__transfer_frame"
# The raw layer the ingestion writes: daily tables, and the unpartitioned item catalogue.
QUARANTINE = ("raw", "quarantine")
RAW_PARTITIONED = (("raw", "observational_impressions"), ("raw", "randomized_impressions"), QUARANTINE)
RAW_UNPARTITIONED = (("raw", "items"),)


def _select(table: Table, partitioned: bool) -> str:
    # Identifiers from the caller's table names (quoted); the partition is a bound parameter.
    sql = f"SELECT * FROM {quote_identifier(table[0])}.{quote_identifier(table[1])}"
    return sql + " WHERE partition_date = $partition_date" if partitioned else sql


def copy_partitions(source: Warehouse, target: Warehouse, table: Table, partitions: Iterable[str]) -> dict[str, int]:
    """Replace each partition of `table` in `target` by the source's rows of that day; rows per partition.
    A day the source has no rows for becomes an empty partition in the target (as a rebuild would)."""
    rows = {}
    for partition in partitions:
        target.register_frame(_FRAME, source.query_arrow(_select(table, True), {"partition_date": partition}))
        rows[partition] = target.replace_partition(table, f"SELECT * FROM {_FRAME}", None, partition)
    return rows


def copy_table(source: Warehouse, target: Warehouse, table: Table) -> int:
    """Replace an unpartitioned table of `target` by the source's; returns its rows."""
    target.register_frame(_FRAME, source.query_arrow(_select(table, False)))
    return target.replace_table(table, f"SELECT * FROM {_FRAME}")


def copy_raw_layer(source: Warehouse, target: Warehouse, partitions: Iterable[str]) -> dict[str, int]:
    """The raw layer's days `partitions` and the item catalogue; rows copied per table. Rows of raw.quarantine
    without a partition_date (rejected items) are not copied: no model reads them."""
    partitions = list(partitions)
    rows = {".".join(t): sum(copy_partitions(source, target, t, partitions).values()) for t in RAW_PARTITIONED}
    rows.update({".".join(t): copy_table(source, target, t) for t in RAW_UNPARTITIONED})
    return rows
