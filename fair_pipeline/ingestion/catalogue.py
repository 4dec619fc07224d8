"""Validated, atomic loading of the item catalogues (`landing/items/[date=D/]*.parquet` -> `raw.items`), no Dagster.

Every delivery is kept, each row with its delivery's day and the days it holds on (`catalogue_dates`); stages read
the catalogue as of their partition's day. Each row of a delivery is classified by one portable SQL statement (`CLASSIFY_ITEMS`: window functions
only, so the Spark renderer of ingestion gets the same rules):
  missing item_id               NULL or blank id: quarantined
  conflicting rows for item_id  the id comes with rows that differ in some column: every row of it quarantined
  exact copy                    a row equal in every column to an earlier one (the catalogue delivered twice):
                                dropped, and counted in the load's result
Duplicates are found with PARTITION BY, which groups NULLs together, so NULL ids or NULL features never turn the
comparison into NULL; rows are compared within their delivery only. A catalogue with no row to keep (no rows at all, or every row rejected) is refused and the
previous `raw.items` is left as it was; otherwise `raw.items` and the items' quarantine are replaced in one
transaction.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

import pyarrow as pa

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue_dates import DATE_COLUMNS, deliveries, pin_undated_catalogue
from fair_pipeline.ingestion.loads import (
    BLANK_CHARACTERS,
    STORED_FILE,
    LandingFileError,
    sql_string,
    stored_paths,
    unused_name,
)
from fair_pipeline.platform.warehouse import is_numeric_type, quote_identifier, table_exists, transaction

MISSING_ID = "missing item_id"
CONFLICTING_ID = "conflicting rows for item_id"
EXACT_COPY = "exact copy"

# `{columns}`: every delivered column (quoted), `{file}`: the source-file column, over the relation `_items`.
# Rows of one id all equal each other exactly when each row's count among identical rows is the id's count.
CLASSIFY_ITEMS = """
SELECT *,
    CASE
        WHEN item_id IS NULL OR trim(CAST(item_id AS VARCHAR), $blank) = '' THEN '{missing}'
        WHEN count(*) OVER (PARTITION BY catalogue_date, item_id)
             > count(*) OVER (PARTITION BY catalogue_date, {columns}) THEN '{conflicting}'
        WHEN row_number() OVER (PARTITION BY catalogue_date, {columns} ORDER BY {file}) > 1 THEN '{copy}'
    END AS _item_reason
FROM _items
"""


@dataclasses.dataclass(frozen=True)
class CatalogueLoad:
    """What loading the catalogues did: items stored (rows of every delivery), rows quarantined (by reason), exact
    copies dropped, the files read, the feature columns rankers cannot use (not numeric), the delivery days (None:
    undated) and where an undated catalogue was pinned (None: nowhere)."""

    accepted: int
    rejected_by_reason: dict[str, int]
    exact_copies: int
    files: tuple[str, ...]
    non_numeric_columns: tuple[str, ...]
    delivery_days: tuple = ()
    pinned_to: str | None = None

    @property
    def rejected(self) -> int:
        return sum(self.rejected_by_reason.values())


def _check_item_files(con: duckdb.DuckDBPyConnection, files: list[Path]) -> set[str]:
    """Each file has item_id and group_id, no repeated column, and rows; returns every column name."""
    names_seen: set[str] = set()
    for path in files:
        try:
            metadata = pq.read_metadata(path)
        except Exception as error:  # noqa: BLE001 - any reader failure means an unreadable file
            raise LandingFileError(f"unreadable items file {path}: {error}") from error
        names = metadata.schema.to_arrow_schema().names
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise LandingFileError(f"items file {path} has duplicate columns {repeated}")
        missing = [c for c in ("item_id", "group_id") if c not in names]
        if missing:
            raise LandingFileError(f"items file {path} lacks columns {missing}")
        if metadata.num_rows == 0:
            raise LandingFileError(f"items file {path} has no rows (a failed export?); {_previous_items(con)}")
        names_seen.update(names)
    return names_seen


def _previous_items(con: duckdb.DuckDBPyConnection) -> str:
    if not table_exists(con, "raw", "items"):
        return "no catalogue was loaded before"
    return f"the previous catalogue ({con.execute('SELECT count(*) FROM raw.items').fetchone()[0]} items) was kept"


def _delivery_table(landing: Path) -> tuple[pa.Table, list[Path], tuple]:
    """(file -> delivery day and validity, every file, the delivery days); an undated catalogue next to dated ones
    is pinned first. Any file that can't be read is refused by name, never skipped."""
    found = deliveries(landing)
    files = [f for d in found for f in d.files]
    table = pa.table({
        "_file": [str(f) for d in found for f in d.files],
        "catalogue_date": pa.array([d.day for d in found for _ in d.files], pa.date32()),
        "valid_from": pa.array([d.valid_from for d in found for _ in d.files], pa.date32()),
        "valid_until": pa.array([d.valid_until for d in found for _ in d.files], pa.date32()),
    })
    return table, files, tuple(d.day for d in found)


def load_items(con: duckdb.DuckDBPyConnection, landing: Path) -> CatalogueLoad:
    """Replace raw.items from every delivery under landing/items/ (rules in the module docstring); feature columns
    are kept as they come. Raises LandingFileError naming the file, or the catalogue, when there is nothing to
    keep."""
    folder = Path(landing) / contract.ITEMS_DIR
    pinned = pin_undated_catalogue(landing)
    dated, files, days = _delivery_table(landing)
    if not files:
        raise FileNotFoundError(f"no items file: {folder}/*.parquet (or {folder}/date=YYYY-MM-DD/*.parquet) not found")
    names = _check_item_files(con, files)
    # The source-file and reason columns get names no items file uses, so no file column can stand in for them.
    file_column = unused_name("_landing_file", names)
    reserved = sorted({n for n in names if n.lower() in ("_item_reason", "_file", *DATE_COLUMNS)})
    if reserved:
        raise LandingFileError(f"items files under {folder} have columns named {reserved} (reserved for raw.items)")
    scan = (f"SELECT f.*, d.catalogue_date, d.valid_from, d.valid_until FROM read_parquet($files, "
            f"filename = {sql_string(file_column)}, union_by_name = true, hive_partitioning = false) f "
            f"JOIN _deliveries d ON d._file = f.{quote_identifier(file_column)}")
    columns = ", ".join(quote_identifier(n) for n in sorted(names))
    classify = CLASSIFY_ITEMS.format(columns=columns, file=quote_identifier(file_column), missing=MISSING_ID,
                                     conflicting=CONFLICTING_ID, copy=EXACT_COPY)
    params = {"files": [str(f) for f in files]}
    keep = f"SELECT * EXCLUDE ({quote_identifier(file_column)}, _item_reason) FROM _classified WHERE _item_reason IS NULL"
    con.register("_deliveries", dated)
    try:
        return _replace_items(con, landing, folder, scan, classify, keep, params, files, file_column, days, pinned)
    finally:
        con.unregister("_deliveries")


def _replace_items(con, landing, folder, scan, classify, keep, params, files, file_column, days, pinned):
    with transaction(con):
        con.execute(f"CREATE OR REPLACE TEMP TABLE _items AS {scan}", params)
        con.execute(f"CREATE OR REPLACE TEMP TABLE _classified AS {classify}", {"blank": BLANK_CHARACTERS})
        counts = dict(con.execute("SELECT coalesce(_item_reason, ''), count(*) FROM _classified GROUP BY ALL").fetchall())
        accepted = counts.pop("", 0)
        copies = counts.pop(EXACT_COPY, 0)
        if accepted == 0:
            reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(counts.items())) or "no rows"
            raise LandingFileError(f"items catalogue {folder}: no row to keep ({reasons}); {_previous_items(con)}")
        empty = con.execute("SELECT catalogue_date FROM _classified GROUP BY catalogue_date "
                            "HAVING count(*) FILTER (WHERE _item_reason IS NULL) = 0 ORDER BY 1").fetchall()
        if empty:
            raise LandingFileError(f"items catalogue {folder}: the delivery for {empty[0][0] or 'no date'} has no row to "
                                   f"keep (every row rejected); {_previous_items(con)}")
        con.execute(f"CREATE OR REPLACE TABLE raw.items AS {keep}")
        con.execute("DELETE FROM raw.quarantine WHERE source = 'items'")
        con.execute(
            f"""INSERT INTO raw.quarantine (source, partition_date, source_file, reason, item_id, group_id, quarantined_at)
            SELECT 'items', NULL, {STORED_FILE.format(column=quote_identifier(file_column))}, _item_reason,
                   CAST(item_id AS VARCHAR), CAST(group_id AS VARCHAR), now()
            FROM _classified WHERE _item_reason IS NOT NULL AND _item_reason <> $copy""",
            {**params, "stored_files": stored_paths(landing, files), "copy": EXACT_COPY},
        )
        non_numeric = tuple(
            name for name, column_type in con.execute("SELECT column_name, column_type FROM (DESCRIBE raw.items)").fetchall()
            if name not in ("item_id", "group_id", *DATE_COLUMNS) and not is_numeric_type(column_type)
        )
        con.execute("DROP TABLE _classified")
        con.execute("DROP TABLE _items")
    return CatalogueLoad(accepted, counts, copies, tuple(params["files"]), non_numeric, days,
                         str(pinned) if pinned else None)
