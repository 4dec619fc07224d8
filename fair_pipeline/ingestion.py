"""Validated, atomic loading of one day's landing files into the raw layer (no Dagster here).

Each partition load is one transaction: the partition's old rows and quarantine entries are deleted and
the new valid / rejected rows inserted, so a re-run replaces exactly that partition and a failure
leaves the previous state intact. Validation is one SQL pass; every rejected row keeps its values
(as text), its reason, its source file and its partition.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from fair_pipeline import contract
from fair_pipeline.landing import partition_dir, partition_files
from fair_pipeline.warehouse import quote_identifier, table_columns, table_exists, transaction

# First failing rule wins; the order puts structural problems before value problems. Among rows that
# pass every other rule, the first occurrence of a (request_id, position) in file order is kept and later
# copies are quarantined as duplicates.
_VALIDATED = """
CREATE OR REPLACE TEMP TABLE _validated AS
WITH typed AS (
    SELECT
        TRY_CAST(ts AS TIMESTAMPTZ) AS ts_utc,
        TRY_CAST(request_id AS VARCHAR) AS request_id,
        TRY_CAST(query_id AS VARCHAR) AS query_id,
        TRY_CAST(policy AS VARCHAR) AS policy,
        TRY_CAST(position AS INTEGER) AS position,
        TRY_CAST(original_position AS INTEGER) AS original_position,
        TRY_CAST(item_id AS VARCHAR) AS item_id,
        TRY_CAST(group_id AS VARCHAR) AS group_id,
        TRY_CAST(score AS DOUBLE) AS score,
        TRY_CAST(click AS INTEGER) AS click,
        filename AS source_file, file_row_number,
        CAST(ts AS VARCHAR) AS ts_text, CAST(position AS VARCHAR) AS position_text,
        CAST(original_position AS VARCHAR) AS original_position_text,
        CAST(score AS VARCHAR) AS score_text, CAST(click AS VARCHAR) AS click_text
    FROM read_parquet($files, filename = true, file_row_number = true, union_by_name = true)
), checked AS (
    SELECT *,
        CASE
            WHEN request_id IS NULL OR request_id = '' THEN 'missing request_id'
            WHEN query_id IS NULL OR query_id = '' THEN 'missing query_id'
            WHEN item_id IS NULL OR item_id = '' THEN 'missing item_id'
            WHEN ts_utc IS NULL THEN 'missing or unparsable ts'
            WHEN policy IS NULL OR NOT list_contains($known_policies, policy) THEN 'unknown policy'
            WHEN NOT list_contains($allowed_policies, policy) THEN 'policy not allowed in this source'
            WHEN position IS NULL OR position < 1 OR position > $max_position THEN 'position outside 1..K'
            WHEN original_position < 1 OR original_position > $max_position THEN 'original_position outside 1..K'
            WHEN click IS NULL OR TRY_CAST(click_text AS DOUBLE) NOT IN (0, 1) THEN 'click not 0/1'
            WHEN score IS NULL OR isnan(score) OR isinf(score) THEN 'score missing, NaN or infinite'
            WHEN CAST(timezone('UTC', ts_utc) AS DATE) <> $partition_date THEN 'date outside partition'
        END AS row_reason
    FROM typed
)
SELECT *,
    coalesce(
        row_reason,
        CASE WHEN row_number() OVER (
            PARTITION BY request_id, position, row_reason IS NULL ORDER BY source_file, file_row_number
        ) > 1 THEN 'duplicate (request_id, position)' END
    ) AS reason
FROM checked
"""

_DELETE_PARTITION = "DELETE FROM {table} WHERE partition_date = $partition_date"
_DELETE_QUARANTINE = "DELETE FROM raw.quarantine WHERE source = $source AND partition_date = $partition_date"

_INSERT_VALID = """
INSERT INTO {table}
SELECT timezone('UTC', ts_utc), request_id, query_id, policy, position, original_position, item_id, group_id,
       score, click, CAST($partition_date AS DATE), source_file
FROM _validated WHERE reason IS NULL
"""

QUARANTINE_INSERT = """
INSERT INTO raw.quarantine
SELECT $source, CAST($partition_date AS DATE), source_file, reason, ts_text, request_id, query_id, policy,
       position_text, original_position_text, item_id, group_id, score_text, click_text, now()
FROM _validated WHERE reason IS NOT NULL
"""

_REASON_COUNTS = "SELECT reason, count(*) FROM _validated WHERE reason IS NOT NULL GROUP BY reason ORDER BY reason"


@dataclasses.dataclass(frozen=True)
class PartitionLoad:
    source: str
    partition_date: str
    files: tuple[str, ...]
    accepted: int
    rejected: int
    rejected_by_reason: dict[str, int]
    extras_rows: int

    @property
    def rejected_share(self) -> float:
        total = self.accepted + self.rejected
        return self.rejected / total if total else 0.0


def raw_table(source: str) -> str:
    if source not in contract.SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {contract.SOURCES}")
    return f"raw.{source}_impressions"


def _check_files(files: list[Path]) -> None:
    """Readable Parquet with every contract column; the error names the file and the columns."""
    for path in files:
        try:
            names = pq.read_schema(path).names
        except Exception as error:  # noqa: BLE001 - any reader failure means an unreadable file
            raise ValueError(f"unreadable landing file {path}: {error}") from error
        missing = [c for c in contract.IMPRESSION_COLUMNS if c not in names]
        if missing:
            raise ValueError(f"landing file {path} lacks contract columns {missing}")


def load_partition(
    con: duckdb.DuckDBPyConnection, landing: Path, source: str, partition_date: str, max_position: int = 50
) -> PartitionLoad:
    """Replace one day of `raw.<source>_impressions` (and its quarantine and extras) atomically."""
    day = dt.date.fromisoformat(partition_date)
    files = partition_files(landing, source, day)
    _check_files(files)
    table = raw_table(source)
    params = {"partition_date": partition_date}
    with transaction(con):
        con.execute(
            _VALIDATED,
            {
                "files": [str(f) for f in files],
                "known_policies": list(contract.POLICIES),
                "allowed_policies": list(contract.SOURCE_POLICIES[source]),
                "max_position": max_position,
                **params,
            },
        )
        con.execute(_DELETE_PARTITION.format(table=table), params)
        con.execute(_DELETE_QUARANTINE, {"source": source, **params})
        con.execute(_INSERT_VALID.format(table=table), params)
        con.execute(QUARANTINE_INSERT, {"source": source, **params})
        counts = dict(con.execute(_REASON_COUNTS).fetchall())
        total = con.execute("SELECT count(*) FROM _validated").fetchone()[0]
        extras_rows = _load_extras(con, landing, source, day)
        con.execute("DROP TABLE _validated")
    rejected = sum(counts.values())
    return PartitionLoad(
        source=source,
        partition_date=partition_date,
        files=tuple(str(f) for f in files),
        accepted=total - rejected,
        rejected=rejected,
        rejected_by_reason=counts,
        extras_rows=extras_rows,
    )


def _load_extras(con: duckdb.DuckDBPyConnection, landing: Path, source: str, day: dt.date) -> int:
    """Source-specific columns (e.g. Open Bandit's propensities) go to raw.<source>_extras, keyed by
    (request_id, position); the table takes its shape from the first file loaded."""
    files = sorted(partition_dir(Path(landing) / contract.EXTRAS_DIR, source, day).glob("*.parquet"))
    if not files:
        return 0
    table_name = f"{source}_extras"
    scan = "SELECT *, CAST($partition_date AS DATE) AS partition_date FROM read_parquet($files, union_by_name = true)"
    params = {"files": [str(f) for f in files], "partition_date": day.isoformat()}
    if not table_exists(con, "raw", table_name):
        con.execute(f"CREATE TABLE raw.{quote_identifier(table_name)} AS {scan} LIMIT 0", params)
    con.execute(f"DELETE FROM raw.{quote_identifier(table_name)} WHERE partition_date = $partition_date", {"partition_date": day.isoformat()})
    columns = ", ".join(quote_identifier(c) for c in table_columns(con, "raw", table_name))
    con.execute(f"INSERT INTO raw.{quote_identifier(table_name)} ({columns}) SELECT {columns} FROM ({scan})", params)
    return con.execute(
        f"SELECT count(*) FROM raw.{quote_identifier(table_name)} WHERE partition_date = $partition_date",
        {"partition_date": day.isoformat()},
    ).fetchone()[0]


def load_items(con: duckdb.DuckDBPyConnection, landing: Path) -> dict[str, int]:
    """Replace raw.items from landing/items/*.parquet; rows without an id or with a repeated id are
    quarantined (source 'items'); feature columns are kept as they come."""
    files = sorted((Path(landing) / contract.ITEMS_DIR).glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no items file: {Path(landing) / contract.ITEMS_DIR}/*.parquet not found")
    for path in files:
        names = pq.read_schema(path).names
        missing = [c for c in ("item_id", "group_id") if c not in names]
        if missing:
            raise ValueError(f"items file {path} lacks columns {missing}")
    scan = """
        SELECT *, count(*) OVER (PARTITION BY item_id) AS _copies
        FROM read_parquet($files, filename = true, union_by_name = true)
    """
    params = {"files": [str(f) for f in files]}
    with transaction(con):
        con.execute(f"CREATE OR REPLACE TEMP TABLE _items AS {scan}", params)
        con.execute(
            "CREATE OR REPLACE TABLE raw.items AS SELECT * EXCLUDE (filename, _copies) FROM _items "
            "WHERE item_id IS NOT NULL AND item_id <> '' AND _copies = 1"
        )
        con.execute("DELETE FROM raw.quarantine WHERE source = 'items'")
        con.execute(
            """INSERT INTO raw.quarantine (source, partition_date, source_file, reason, item_id, group_id, quarantined_at)
            SELECT 'items', NULL, filename,
                   CASE WHEN item_id IS NULL OR item_id = '' THEN 'missing item_id' ELSE 'duplicate item_id' END,
                   CAST(item_id AS VARCHAR), CAST(group_id AS VARCHAR), now()
            FROM _items WHERE item_id IS NULL OR item_id = '' OR _copies > 1"""
        )
        accepted = con.execute("SELECT count(*) FROM raw.items").fetchone()[0]
        rejected = con.execute("SELECT count(*) FROM raw.quarantine WHERE source = 'items'").fetchone()[0]
        con.execute("DROP TABLE _items")
    return {"accepted": accepted, "rejected": rejected}
