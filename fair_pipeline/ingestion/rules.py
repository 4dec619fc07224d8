"""The landing contract's row rules, written once as SQL in DuckDB's dialect and run by both loaders: DuckDB's
(`loads`, over `read_parquet`) as it is, Spark's (`spark_loads`, over the files the executors read) through
`engines.spark_sql`'s rendering. Typing, the text forms a value may take, the rejection reasons and their order,
duplicate keys, the stored and the quarantined rows, and the UTF-8 check of byte columns.
tests/platform/spark/test_ingestion_parity.py runs the landing corpus through both loaders.
"""
from __future__ import annotations

import datetime as dt
import re
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
# File types (DuckDB's names) whose values are text but stored as bytes (Parquet BINARY without the UTF-8
# annotation): read as text only when every value is UTF-8 (`invalid_utf8_sql`, checked before the rows).
BYTE_TYPES = ("BLOB",)
FLOAT_TYPES = ("FLOAT", "DOUBLE")

# Characters an id may not consist of only: an id of spaces or tabs is as missing as an empty one.
BLANK_CHARACTERS = " \t\n\r\f\v"
# An id made only of Unicode blanks (separators such as U+00A0 and U+3000, control characters, and the invisible
# U+200B..U+200D, U+2060, U+FEFF, U+180E) is missing too. Such an id starts below "!" or at/after U+0080, so
# `id < '!' OR id >= U+0080` (a byte-wise prefix compare on both engines) guards the regular expression. `\z`, not
# `$`: Java's `$` (Spark) also matches before a final line break, RE2's (DuckDB) only at the end.
BLANK_ID = r"^[\p{Z}\p{Cc}\x{200B}-\x{200D}\x{2060}\x{FEFF}\x{180E}]*\z"
NON_ASCII = "\u0080"
# Text read as a number must be a plain decimal: the engines' casts also read "1_0" (DuckDB), "0x1A"-like or
# "1d" (Spark) forms, each differently.
PLAIN_NUMBER = r"^ *[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)? *\z"
# Text read as a timestamp must have a time of day: "2026-01-01" would be stored as an invented midnight, as a
# DATE column would (those are refused whole).
TIME_OF_DAY = "[0-9]:[0-9][0-9]"
DUPLICATE_REASON = "duplicate (request_id, position)"
GROUP_NAN_REASON = "group_id is NaN"

CONTRACT_SELECT = ", ".join(quote_identifier(c) for c in contract.IMPRESSION_COLUMNS)


def typed_expression(column: str, file_type: str, target: str) -> str:
    """SQL for the typed value of a column (NULL when the value does not parse), from fixed fragments; the
    patterns are bound parameters ($plain_number, $time_of_day)."""
    name = quote_identifier(column)
    if file_type == target:
        return name
    if file_type in BYTE_TYPES and target == "VARCHAR":  # bytes are text only as UTF-8 (checked per file first)
        return f"decode({name})"
    if file_type == "VARCHAR" and target in ("INTEGER", "DOUBLE"):
        name = f"CASE WHEN regexp_matches({name}, $plain_number) THEN {name} END"
    if file_type == "VARCHAR" and target.startswith("TIMESTAMP"):
        return f"CASE WHEN regexp_matches({name}, $time_of_day) THEN TRY_CAST({name} AS {target}) END"
    if target == "INTEGER":  # refuse 1.5 rather than round it
        return (f"CASE WHEN TRY_CAST({name} AS DOUBLE) = floor(TRY_CAST({name} AS DOUBLE)) "
                f"THEN TRY_CAST(TRY_CAST({name} AS DOUBLE) AS INTEGER) END")
    return f"TRY_CAST({name} AS {target})"


def text_expression(column: str, file_type: str) -> str:
    """The value as the file holds it, as text (for the quarantine)."""
    name = quote_identifier(column)
    return f"decode({name})" if file_type in BYTE_TYPES else f"CAST({name} AS VARCHAR)"


def typed_sql(file_types: Mapping[str, str], source: str, filename: str, stored_file: str) -> str:
    """The rows of relation `source` (the contract columns as in the files, `filename`, `file_row_number`): the
    contract columns, `filename`, `file_row_number`, `stored_file` (the expression for the file's name as stored,
    relative to the landing root), the typed values in `t_*` columns and the quarantine's text forms in `q_*`
    columns. `file_types` are the files' column types in DuckDB's names (`TARGET_TYPES`' vocabulary)."""
    typed = ",\n        ".join(
        f"{typed_expression(c, file_types[c], t)} AS {quote_identifier('t_' + c)}" for c, t in TARGET_TYPES.items()
    )
    texts = ", ".join(f"{text_expression(c, file_types[c])} AS {quote_identifier('q_' + c)}"
                      for c in contract.IMPRESSION_COLUMNS)
    group_nan = "isnan(group_id)" if file_types["group_id"] in FLOAT_TYPES else "false"
    return f"""
    SELECT {CONTRACT_SELECT}, {filename} AS filename, file_row_number, {stored_file} AS stored_file,
        {typed},
        {texts}, {group_nan} AS group_is_nan
    FROM {source}
"""


def _blank(column: str) -> str:
    return (f"{column} IS NULL OR (({column} < '!' OR {column} >= $non_ascii) "
            f"AND regexp_matches({column}, $blank_id))")


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
            WHEN {_blank('t_request_id')} THEN 'missing request_id'
            WHEN {_blank('t_query_id')} THEN 'missing query_id'
            WHEN {_blank('t_item_id')} THEN 'missing item_id'
            WHEN group_is_nan THEN '{GROUP_NAN_REASON}'
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
    """The values the rules bind (never formatted into their text); pass a statement `bound(sql, ...)` of them."""
    return {
        "known_policies": list(contract.POLICIES),
        "allowed_policies": list(contract.SOURCE_POLICIES[source]),
        "max_position": max_position,
        "day_start": dt.datetime.combine(day, dt.time(), dt.timezone.utc),
        "day_end": dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.timezone.utc),
        "blank_id": BLANK_ID,
        "non_ascii": NON_ASCII,
        "max_abs_score": contract.MAX_ABS_SCORE,
        "score_bound_reason": f"|score| above {contract.MAX_ABS_SCORE:g}",
        "plain_number": PLAIN_NUMBER,
        "time_of_day": TIME_OF_DAY,
    }


def accepted_sql(typed: str, rejected: str) -> str:
    """The stored rows (raw.<source>_impressions' columns, in order): every typed row not in relation `rejected`.
    Binds $partition_date (and `typed`'s patterns)."""
    return f"""
SELECT t_ts AS ts, t_request_id AS request_id, t_query_id AS query_id, t_policy AS policy, t_position AS position,
       t_original_position AS original_position, t_item_id AS item_id, t_group_id AS group_id, t_score AS score,
       t_click AS click, CAST($partition_date AS DATE) AS partition_date, stored_file AS source_file
FROM ({typed}) AS file_rows ANTI JOIN {rejected} USING (filename, file_row_number)
"""


def quarantine_sql(typed: str, rejected: str) -> str:
    """raw.quarantine's rows (its columns, in order) for the rows in relation `rejected`: the reason and every
    value as the file holds it, as text (bytes decoded). Binds $source and $partition_date (and `typed`'s patterns)."""
    texts = ", ".join(f"{quote_identifier('q_' + c)} AS {quote_identifier(c)}" for c in contract.IMPRESSION_COLUMNS)
    return f"""
SELECT $source AS source, CAST($partition_date AS DATE) AS partition_date, stored_file AS source_file, reason,
       {texts}, CAST(current_timestamp AS TIMESTAMP) AS quarantined_at
FROM ({typed}) AS file_rows
JOIN {rejected} USING (filename, file_row_number)
"""


def rejected_by_file_sql(rejected: str) -> str:
    """Per file: rejected rows and the most common reason, the first in text order on a tie (a file all of whose
    rows fail is refused whole, naming it; both engines name the same reason)."""
    return f"""
SELECT filename, rejected, reason FROM (
    SELECT filename, reason, sum(n) OVER (PARTITION BY filename) AS rejected,
           row_number() OVER (PARTITION BY filename ORDER BY n DESC, reason) AS place
    FROM (SELECT filename, reason, count(*) AS n FROM {rejected} GROUP BY filename, reason) AS by_reason
) AS ranked WHERE place = 1
"""


def bound(sql: str, values: Mapping[str, object]) -> dict[str, object]:
    """The entries of `values` that `sql` binds as $name (DuckDB refuses a value the statement does not use)."""
    return {name: value for name, value in values.items() if re.search(rf"\${re.escape(name)}\b", sql)}


def invalid_utf8_sql(file_types: Mapping[str, str], source: str, filename: str) -> str | None:
    """Per (file, contract column stored as bytes): the rows whose bytes are not UTF-8 text, over relation `source`
    (the contract columns and `filename`, the expression naming the file); None when no contract column is bytes."""
    checks = [
        f"SELECT {filename} AS filename, '{c}' AS column_name, count(*) AS bad_rows FROM {source} "
        f"WHERE {quote_identifier(c)} IS NOT NULL AND TRY(decode({quote_identifier(c)})) IS NULL GROUP BY {filename}"
        for c in contract.IMPRESSION_COLUMNS if file_types[c] in BYTE_TYPES
    ]
    return " UNION ALL ".join(checks) or None
