"""The landing contract's row rules as SQL in DuckDB's dialect, run by the Spark loader (`spark_loads`) through
`engines.spark_sql`'s rendering, over a view of the files the executors read (`SparkEngine.register_files`): typing,
the rejection reasons and their order, duplicate keys, the stored and the quarantined rows.

Not yet the one source of both engines: DuckDB's loader (`loads`) has its own copy, since tightened (Unicode
blank ids, plain-decimal numbers, text timestamps with a time of day, BLOB text, NaN groups); those rules are
still to be moved here, and `loads` made to run these statements, so that both engines run one text.
tests/platform/spark/test_ingestion_parity.py compares the two loaders on the landing fuzz corpus.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from fair_pipeline.ingestion import contract
from fair_pipeline.platform.warehouse import quote_identifier

# Contract columns and the types they are validated and stored as. Columns whose file type already
# matches are used as they are (the common case, and much faster); others go through TRY_CAST.
TARGET_TYPES = {
    "ts": "TIMESTAMP WITH TIME ZONE",
    "request_id": "VARCHAR",
    "query_id": "VARCHAR",
    "policy": "VARCHAR",
    "position": "INTEGER",
    "original_position": "INTEGER",
    "item_id": "VARCHAR",
    "group_id": "VARCHAR",
    "score": "DOUBLE",
    "click": "INTEGER",
}

# Characters an id may not consist of only: an id of spaces or tabs is as missing as an empty one. Each sorts
# before "!", so `id < '!'` (a cheap prefix compare, true for '' and ids starting with one of them) guards the
# trim(), which would otherwise cost twice the rest of the validation.
BLANK_CHARACTERS = " \t\n\r\f\v"
DUPLICATE_REASON = "duplicate (request_id, position)"

CONTRACT_SELECT = ", ".join(quote_identifier(c) for c in contract.IMPRESSION_COLUMNS)


def typed_expression(column: str, file_type: str, target: str) -> str:
    """SQL for the typed value of a column (NULL when the value does not parse), from fixed fragments."""
    name = quote_identifier(column)
    if file_type == target:
        return name
    if target == "INTEGER":  # refuse 1.5 rather than round it
        return f"CASE WHEN TRY_CAST({name} AS DOUBLE) = floor(TRY_CAST({name} AS DOUBLE)) THEN TRY_CAST({name} AS INTEGER) END"
    return f"TRY_CAST({name} AS {target})"


def typed_sql(file_types: Mapping[str, str], source: str, filename: str, stored_file: str) -> str:
    """The rows of relation `source` (the contract columns as in the files, `filename`, `file_row_number`): the
    contract columns, `filename`, `file_row_number`, `stored_file` (the expression for the file's name as stored,
    relative to the landing root) and the typed values in `t_*` columns. `file_types` are the files' column types
    in DuckDB's names (`TARGET_TYPES`' vocabulary)."""
    typed = ",\n        ".join(
        f"{typed_expression(c, file_types[c], t)} AS {quote_identifier('t_' + c)}" for c, t in TARGET_TYPES.items()
    )
    return f"""
    SELECT {CONTRACT_SELECT}, {filename} AS filename, file_row_number, {stored_file} AS stored_file,
        {typed}
    FROM {source}
"""


def rejected_sql(typed: str, key: str) -> str:
    """(filename, file_row_number, reason) of every rejected row.

    The first failing rule wins, structural problems before value problems. Among rows that pass every
    other rule, the first occurrence of a (request_id, position) in file order is kept and later copies
    are rejected. `key`, an expression of (t_request_id, t_position), finds the (rare) repeated keys cheaply before
    only those rows are ranked by the exact key: a collision only adds rows to the exact ranking, which stays
    correct (DuckDB groups faster on one 64-bit hash than on (VARCHAR, INTEGER)). The CTEs are NOT MATERIALIZED:
    DuckDB would otherwise hold every typed row of the day in memory (it does not spill a materialized CTE; 12.5M
    rows overran the 512MB cap), where inlined they are streamed from the file (Spark never materializes a CTE)."""
    return f"""
WITH typed AS NOT MATERIALIZED ({typed}), checked AS NOT MATERIALIZED (
    SELECT filename, file_row_number, t_request_id, t_position,
        CASE
            WHEN t_request_id IS NULL OR (t_request_id < '!' AND trim(t_request_id, $blank) = '') THEN 'missing request_id'
            WHEN t_query_id IS NULL OR (t_query_id < '!' AND trim(t_query_id, $blank) = '') THEN 'missing query_id'
            WHEN t_item_id IS NULL OR (t_item_id < '!' AND trim(t_item_id, $blank) = '') THEN 'missing item_id'
            WHEN t_ts IS NULL THEN 'missing or unparsable ts'
            WHEN t_policy IS NULL OR NOT list_contains($known_policies, t_policy) THEN 'unknown policy'
            WHEN NOT list_contains($allowed_policies, t_policy) THEN 'policy not allowed in this source'
            WHEN t_position IS NULL OR t_position NOT BETWEEN 1 AND $max_position THEN 'position outside 1..K'
            WHEN t_original_position NOT BETWEEN 1 AND $max_position
                OR (original_position IS NOT NULL AND t_original_position IS NULL) THEN 'original_position outside 1..K'
            WHEN t_click IS NULL OR t_click NOT IN (0, 1) THEN 'click not 0/1'
            WHEN t_score IS NULL OR isnan(t_score) OR isinf(t_score) THEN 'score missing, NaN or infinite'
            WHEN abs(t_score) > $max_abs_score THEN $score_bound_reason
            WHEN t_ts < $day_start OR t_ts >= $day_end THEN 'date outside partition'
        END AS row_reason
    FROM typed
), repeated_keys AS (
    SELECT {key} AS key_value FROM checked WHERE row_reason IS NULL
    GROUP BY key_value HAVING count(*) > 1
), later_copies AS (
    SELECT filename, file_row_number
    FROM (
        SELECT c.filename, c.file_row_number,
               row_number() OVER (PARTITION BY c.t_request_id, c.t_position ORDER BY c.filename, c.file_row_number) AS copy
        FROM checked AS c JOIN repeated_keys ON {key} = repeated_keys.key_value
        WHERE c.row_reason IS NULL
    ) AS copies WHERE copy > 1
)
SELECT checked.filename, checked.file_row_number,
    coalesce(row_reason, '{DUPLICATE_REASON}') AS reason
FROM checked LEFT JOIN later_copies USING (filename, file_row_number)
WHERE row_reason IS NOT NULL OR later_copies.file_row_number IS NOT NULL
"""


def rule_parameters(source: str, day: dt.date, max_position: int) -> dict[str, object]:
    """The values `rejected_sql` binds (never formatted into its text)."""
    return {
        "known_policies": list(contract.POLICIES),
        "allowed_policies": list(contract.SOURCE_POLICIES[source]),
        "max_position": max_position,
        "day_start": dt.datetime.combine(day, dt.time(), dt.timezone.utc),
        "day_end": dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.timezone.utc),
        "blank": BLANK_CHARACTERS,
        "max_abs_score": contract.MAX_ABS_SCORE,
        "score_bound_reason": f"|score| above {contract.MAX_ABS_SCORE:g}",
    }


def accepted_sql(typed: str, rejected: str) -> str:
    """The stored rows (raw.<source>_impressions' columns, in order): every typed row not in relation `rejected`.
    Binds $partition_date."""
    return f"""
SELECT t_ts AS ts, t_request_id AS request_id, t_query_id AS query_id, t_policy AS policy, t_position AS position,
       t_original_position AS original_position, t_item_id AS item_id, t_group_id AS group_id, t_score AS score,
       t_click AS click, CAST($partition_date AS DATE) AS partition_date, stored_file AS source_file
FROM ({typed}) AS file_rows ANTI JOIN {rejected} USING (filename, file_row_number)
"""


def quarantine_sql(typed: str, rejected: str) -> str:
    """raw.quarantine's rows (its columns, in order) for the rows in relation `rejected`: the reason and every
    value as the file holds it, as text. Binds $source and $partition_date."""
    return f"""
SELECT $source AS source, CAST($partition_date AS DATE) AS partition_date, stored_file AS source_file, reason,
       CAST(ts AS VARCHAR) AS ts, CAST(request_id AS VARCHAR) AS request_id, CAST(query_id AS VARCHAR) AS query_id,
       CAST(policy AS VARCHAR) AS policy, CAST(position AS VARCHAR) AS position,
       CAST(original_position AS VARCHAR) AS original_position, CAST(item_id AS VARCHAR) AS item_id,
       CAST(group_id AS VARCHAR) AS group_id, CAST(score AS VARCHAR) AS score, CAST(click AS VARCHAR) AS click,
       CAST(current_timestamp AS TIMESTAMP) AS quarantined_at
FROM ({typed}) AS file_rows
JOIN {rejected} USING (filename, file_row_number)
"""


def rejected_by_file_sql(rejected: str) -> str:
    """Per file: rejected rows and the most common reason (a file all of whose rows fail is refused whole)."""
    return f"SELECT filename, count(*) AS rejected, mode(reason) AS reason FROM {rejected} GROUP BY filename"
