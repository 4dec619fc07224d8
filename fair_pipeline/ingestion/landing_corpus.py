"""A generated corpus of landing days that ingestion must handle: each day is refused whole (an error naming the
file, the partition unchanged) or loaded with exactly its bad rows quarantined, each with its reason.

Every day is built from known parts, so its outcome is known: rows with at most one defect each (missing, blank
or Unicode-blank ids, dates outside the day, date-only text timestamps, digit-separator numbers, NaN group labels,
bad policies, positions, clicks and scores, repeated keys), columns as different writers type them (pandas'
large_string / int64 / timestamp[ns], Spark's naive timestamps, dictionary text, bytes, all-NULL columns), files in
any-case `.parquet` names and hive-style subfolders, and file-level defects (reserved, duplicate or missing
columns, DATE / integer / list types, a real type conflict between files, invalid UTF-8 bytes, no rows, every row
bad, a file in a plain subfolder, a FIFO, a truncated or bit-flipped file).

`run_corpus` loads each day into one warehouse and sorts the outcomes: handled (as expected), silent (a refusal
or bad row expected but the data was stored), lost (a row neither stored nor quarantined, or a refused day that
changed the partition), unclear (another error, or a message that does not name the file). The test asserts no
day is silent, lost or unclear; `benchmarks/landing_fuzz.py` prints the counts.
"""
from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import math
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract, loads
from fair_pipeline.ingestion.landing import LandingFileError, partition_dir

DAY = dt.date(2026, 1, 1)
MIDNIGHT = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SLOTS = 5
SCORE_REASON = f"|score| above {contract.MAX_ABS_SCORE:g}"
OUTCOMES = ("handled", "silent", "lost", "unclear")

# (column, bad value, reason; None = valid). Values for typed columns; text-only defects are in TEXT_DEFECTS.
ROW_DEFECTS = [
    ("request_id", None, "missing request_id"), ("request_id", " \t", "missing request_id"),
    ("request_id", "\u00a0", "missing request_id"), ("query_id", "\u3000", "missing query_id"),
    ("item_id", "\u200b", "missing item_id"), ("item_id", "\ufeff\u00a0", "missing item_id"),
    ("item_id", "\u00a0x", None), ("item_id", "é ✓ 'x\"; DROP TABLE raw.items; --", None),
    ("ts", None, "missing or unparsable ts"), ("ts", MIDNIGHT + dt.timedelta(days=1), "date outside partition"),
    ("ts", MIDNIGHT - dt.timedelta(microseconds=1), "date outside partition"), ("ts", MIDNIGHT, None),
    ("policy", "bogus", "unknown policy"), ("policy", "shuffle", "policy not allowed in this source"),
    ("position", 0, "position outside 1..K"), ("position", 51, "position outside 1..K"),
    ("position", None, "position outside 1..K"), ("original_position", 0, "original_position outside 1..K"),
    ("original_position", None, None), ("click", 2, "click not 0/1"), ("click", None, "click not 0/1"),
    ("score", math.nan, "score missing, NaN or infinite"), ("score", -math.inf, "score missing, NaN or infinite"),
    ("score", 1e17, SCORE_REASON), ("score", -1e12, None), ("group_id", None, None),
    ("group_id", "Women's <b>&amp; \"65+\" 👩‍🦳 نساء", None),
]
# Defects that exist only when the column is text in the file (the writer typed it so): (text, reason, stored value).
TEXT_DEFECTS = {"ts": [("2026-01-01", "missing or unparsable ts", None), ("yesterday", "missing or unparsable ts", None)],
                "position": [("1_0", "position outside 1..K", None), ("0x1", "position outside 1..K", None),
                             ("padded", None, "own")],  # " 3 " for the row's own position 3
                "score": [("1_000.5", "score missing, NaN or infinite", None), ("nan", "score missing, NaN or infinite", None)]}
# Types other writers give a column. A day picks one family per column (text, bytes or numbers for some columns);
# each file then picks its own width, unit or encoding within it: all of these load.
DAY_TYPES = {
    "request_id": [pa.binary()], "query_id": [pa.binary()], "position": [pa.string()], "click": [pa.string()],
    "score": [pa.string()], "ts": [pa.string()], "group_id": [pa.float64()],
}
FILE_TYPES = {
    "request_id": [pa.large_string()], "query_id": [pa.large_string()], "policy": [pa.large_string()],
    "item_id": [pa.large_string(), pa.dictionary(pa.int32(), pa.string())],
    "position": [pa.int64(), pa.uint8(), pa.int16(), pa.float64()], "original_position": [pa.int64(), pa.float32()],
    "click": [pa.int8(), pa.int64()], "ts": [pa.timestamp("ns", "UTC"), pa.timestamp("us")],
    "group_id": [pa.large_string()],
}
FILE_DEFECTS = ["reserved", "duplicate", "missing", "ts_date", "ts_int", "score_list", "conflict", "bad_utf8",
                "empty", "all_bad", "subfolder", "fifo", "truncated", "bitflip"]
FILE_DEFECT_MESSAGES = {
    "reserved": "reserved columns", "duplicate": "duplicate columns", "missing": "lacks contract columns",
    "ts_date": "column 'ts' is date32", "ts_int": "column 'ts' is int64", "score_list": "column 'score' is list",
    "conflict": "the files of one partition must agree", "bad_utf8": "not UTF-8", "empty": "has no rows",
    "all_bad": "rows rejected", "subfolder": "not a hive-style", "fifo": "not a regular file",
    "truncated": "unreadable landing file", "bitflip": "",
}


@dataclasses.dataclass
class Day:
    """One generated landing day: its files (relative path -> table, or 'fifo' / raw bytes) and what must happen."""

    kind: str
    files: dict[str, object]
    rows: list[tuple[str, dict, str | None]]  # (relative path, row as stored, reason it must be rejected or None)
    refusal: str | None  # text the error must contain (with the refused file's path), or None: the day loads
    refused_file: str | None = None
    may_load: bool = False  # a flipped bit in a file's footer may leave it readable: then it must load exactly


def _rows(rng: random.Random, prefix: str, n_requests: int) -> list[dict]:
    return [{"ts": MIDNIGHT + dt.timedelta(hours=r, seconds=p, microseconds=rng.randrange(10**6)),
             "request_id": f"{prefix}req-{r}", "query_id": f"q-{r}", "policy": "production", "position": p,
             "original_position": SLOTS + 1 - p, "item_id": f"item-{(r * 7 + p) % 13}",
             "group_id": rng.choice(["g0", "g1", "Women's", "age 65+", None]), "score": (r * SLOTS + p) / 7.0,
             "click": (r + p) % 2} for r in range(n_requests) for p in range(1, SLOTS + 1)]


def _to_file_type(values: list, arrow_type: pa.DataType) -> pa.Array:
    """The column as a writer of `arrow_type` stores it (text forms as Python writes them)."""
    if pa.types.is_string(arrow_type) and values and not all(v is None or isinstance(v, str) for v in values):
        return pa.array([None if v is None else (v.isoformat() if isinstance(v, dt.datetime) else repr(v)
                                                 if isinstance(v, float) else str(v)) for v in values], arrow_type)
    if pa.types.is_binary(arrow_type):
        return pa.array([None if v is None else v.encode() if isinstance(v, str) else v for v in values], arrow_type)
    if pa.types.is_dictionary(arrow_type):
        return pa.array(values, pa.string()).dictionary_encode()
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is None:
        return pa.array([None if v is None else v.replace(tzinfo=None) for v in values], arrow_type)
    return pa.array(values, arrow_type)


def _file(rng: random.Random, prefix: str, file_types: dict) -> tuple[pa.Table, list[dict], list[str | None]]:
    """One file: rows with defects (some of them text-only), a few repeated keys, typed as `file_types` says."""
    rows = _rows(rng, prefix, rng.randint(1, 6))
    reasons: list[str | None] = [None] * len(rows)
    for index in rng.sample(range(len(rows)), rng.randint(0, len(rows))):
        options = [d for d in ROW_DEFECTS if not (d[0] == "group_id" and pa.types.is_floating(file_types["group_id"]))]
        for column, defects in TEXT_DEFECTS.items():
            if pa.types.is_string(file_types[column]):
                options += [(column, (v, stored), r) for v, r, stored in defects]
        if pa.types.is_floating(file_types["group_id"]):
            options.append(("group_id", math.nan, "group_id is NaN"))
        column, value, reason = rng.choice(options)
        if value == ("padded", "own"):
            value = (f" {rows[index][column]} ", rows[index][column])
        rows[index] = {**rows[index], column: value}
        reasons[index] = reason
    written = [{c: (v[0] if isinstance(v, tuple) else v) for c, v in row.items()} for row in rows]
    rows = [{c: (v[1] if isinstance(v, tuple) else v) for c, v in row.items()} for row in rows]
    for index in rng.sample(range(len(rows)), min(len(rows), rng.randint(0, 2))):
        if reasons[index] is None:
            rows.append(dict(rows[index]))
            written.append(dict(written[index]))
            reasons.append("duplicate (request_id, position)")
    if pa.types.is_floating(file_types["group_id"]):  # a numeric group column: numbers as labels
        for row, out in zip(rows, written):
            if not (isinstance(row["group_id"], float) and math.isnan(row["group_id"])):
                row["group_id"] = out["group_id"] = None if row["group_id"] is None else float(len(row["group_id"]) % 3)
    columns = {c: _to_file_type([r[c] for r in written], file_types[c]) for c in contract.IMPRESSION_COLUMNS}
    return pa.table(columns), rows, reasons


def _stored_form(row: dict) -> dict:
    """What the raw table must hold for a good row: text group labels as DuckDB writes a number."""
    group = row["group_id"]
    return {**row, "group_id": repr(group) if isinstance(group, float) else group}


def generate(n: int, seed: int = 0) -> list[Day]:
    """`n` days: about half with a file-level defect, the rest with row defects and mixed writers' types."""
    rng = random.Random(seed)
    days = []
    for i in range(n):
        n_files = rng.choice([1, 1, 2, 3])
        defect = rng.choice(FILE_DEFECTS) if rng.random() < 0.45 else None
        files, rows, outcome = {}, [], None
        day_types = {c: contract.IMPRESSION_SCHEMA.field(c).type for c in contract.IMPRESSION_COLUMNS}
        for column in rng.sample(list(DAY_TYPES), rng.randint(0, 2)):
            day_types[column] = rng.choice(DAY_TYPES[column])
        for f in range(n_files):
            file_types = dict(day_types)
            for column in rng.sample(list(FILE_TYPES), rng.randint(0, 3)):
                if day_types[column] == contract.IMPRESSION_SCHEMA.field(column).type:
                    file_types[column] = rng.choice(FILE_TYPES[column])
            table, file_rows, reasons = _file(rng, f"d{i}f{f}-", file_types)
            if rng.random() < 0.1:  # a column nobody filled: pyarrow writes the `null` type
                table = table.set_column(table.column_names.index("group_id"), "group_id", pa.nulls(table.num_rows))
                file_rows = [{**r, "group_id": None} for r in file_rows]
                reasons = [None if r == "group_id is NaN" else r for r in reasons]
            name = rng.choice(["part-{}.parquet", "part-{}.PARQUET", "Part {}.Parquet", "hour=0{}/x.parquet"]).format(f)
            files[name] = table
            rows += [(name, _stored_form(r), reason) for r, reason in zip(file_rows, reasons)]
        target = next(iter(files))
        if defect is not None:
            outcome = _apply_file_defect(rng, defect, files, target)
            if outcome is None:
                defect = None
        if defect is None and any(all(reason is not None for name, _, reason in rows if name == f) for f in files):
            outcome = "rows rejected"  # a file whose every row is bad is refused
        days.append(Day(defect or "rows", files, rows, outcome, target if outcome else None,
                        may_load=defect == "bitflip"))
    return days


def _apply_file_defect(rng: random.Random, defect: str, files: dict, target: str) -> str | None:
    table = files[target]
    if defect == "reserved":
        files[target] = table.append_column("file_row_number", pa.array([1.0] * table.num_rows))
    elif defect == "duplicate":
        files[target] = table.append_column("score", table["score"])
    elif defect == "missing":
        files[target] = table.drop_columns([rng.choice(contract.IMPRESSION_COLUMNS)])
    elif defect == "ts_date":
        if not pa.types.is_timestamp(table["ts"].type):
            return None
        files[target] = table.set_column(0, "ts", table["ts"].cast(pa.date32(), safe=False))
    elif defect == "ts_int":
        files[target] = table.set_column(0, "ts", pa.array(range(table.num_rows), pa.int64()))
    elif defect == "score_list":
        files[target] = table.set_column(table.column_names.index("score"), "score",
                                         pa.array([[v] for v in table["score"].to_pylist()]))
    elif defect == "conflict":  # the same column as text in one file and a number in another
        if pa.types.is_string(table["score"].type):
            return None
        files["zz-other.parquet"] = table.set_column(table.column_names.index("score"), "score",
                                                     pa.array(["0.5"] * table.num_rows))
        return "the files of one partition must agree"
    elif defect == "bad_utf8":  # every file's query_id as bytes (one family), one value not UTF-8
        for name, other in files.items():
            ids = [None if v is None else v if isinstance(v, bytes) else str(v).encode()
                   for v in other["query_id"].to_pylist()]
            if name == target:
                ids[0] = b"\xff\xfe broken"
            files[name] = other.set_column(other.column_names.index("query_id"), "query_id", pa.array(ids, pa.binary()))
    elif defect == "empty":
        files[target] = table.slice(0, 0)
    elif defect == "all_bad":
        files[target] = table.set_column(table.column_names.index("click"), "click",
                                         pa.array(["7" if pa.types.is_string(table["click"].type) else 7]
                                                  * table.num_rows, table["click"].type))
    elif defect == "subfolder":
        files["sub/" + target.split("/")[-1]] = files.pop(target)
        return FILE_DEFECT_MESSAGES[defect]
    elif defect == "fifo":
        files["stream.parquet"] = "fifo"
        return FILE_DEFECT_MESSAGES[defect]
    elif defect in ("truncated", "bitflip"):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        data = bytearray(sink.getvalue().to_pybytes())
        if defect == "truncated":
            data = data[: rng.randint(4, len(data) - 1)]
        else:  # in the footer (metadata): a flip in a data page changes a value no reader can detect
            footer = int.from_bytes(data[-8:-4], "little")
            for _ in range(rng.randint(1, 4)):
                data[len(data) - 8 - rng.randrange(1, footer + 1)] ^= 1 << rng.randrange(8)
        files[target] = bytes(data)
    return FILE_DEFECT_MESSAGES[defect]


def write_day(folder: Path, files: dict) -> None:
    """Replace the contents of `folder` with a generated day's files."""
    for path in sorted(folder.rglob("*"), reverse=True) if folder.exists() else []:
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == "fifo":
            os.mkfifo(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            pq.write_table(content, path)


def _key(values) -> tuple:
    return tuple((v is None, str(v)) for v in values)


def _stored_tuple(row: dict) -> tuple:
    ts = row["ts"]
    return (ts.timestamp() if isinstance(ts, dt.datetime) else ts, *[row[c] for c in contract.IMPRESSION_COLUMNS[1:]])


def _state(con) -> tuple:
    rows = con.execute("SELECT * EXCLUDE (source_file) FROM raw.observational_impressions").fetchall()
    quarantine = con.execute("SELECT * EXCLUDE (quarantined_at) FROM raw.quarantine").fetchall()
    return sorted(rows, key=_key), sorted(quarantine, key=_key)


def load_day(con, landing: Path, state, refusal: str | None, refused: str, refused_file: str
             ) -> tuple[loads.PartitionLoad | None, tuple[str, str] | None]:
    """(the load, None) when the generated day loaded, else (None, (outcome, detail)) judging its refusal: it must
    leave `state(con)` unchanged, be expected (`refusal`) and name the refused file (`refused`, a path)."""
    before = state(con)
    try:
        return loads.load_partition(con, landing, "observational", DAY.isoformat()), None
    except LandingFileError as error:
        if state(con) != before:
            return None, ("lost", f"refused but the warehouse changed: {error}")
        if refusal is None:
            return None, ("unclear", f"refused a day that should load: {error}")
        if refusal not in str(error) or refused not in str(error):
            return None, ("unclear", f"expected {refusal!r} naming {refused_file}: {error}")
        return None, ("handled", "")
    except Exception as error:  # noqa: BLE001 - every other error is what this corpus looks for
        return None, (("lost" if state(con) != before else "unclear"), f"{type(error).__name__}: {error}")


def judge(con, landing: Path, day: Day) -> tuple[str, str]:
    """(outcome, detail) of loading one generated day into `con` (whose partition may hold an earlier day)."""
    folder = partition_dir(landing, "observational", DAY)
    # The refused file is named by its full path: its folder is enough to recognise it.
    load, outcome = load_day(con, landing, _state, day.refusal, str(folder), day.refused_file)
    if outcome is not None:
        return outcome
    if day.refusal is not None and not day.may_load:
        return "silent", f"loaded, but expected a refusal ({day.refusal})"
    stored, quarantine = _state(con)
    stored_rows = collections.Counter(_key((r[0].timestamp(), *r[1:10])) for r in stored)
    good = collections.Counter(_key(_stored_tuple(row)) for _, row, reason in day.rows if reason is None)
    bad = collections.Counter(reason for _, _, reason in day.rows if reason is not None)
    if stored_rows - good:
        return "silent", f"stored rows that should have been rejected or changed: {list((stored_rows - good))[:2]}"
    if good - stored_rows or sum(bad.values()) != len(quarantine):
        return "lost", f"good rows missing: {list((good - stored_rows))[:2]}; quarantined {len(quarantine)} of {sum(bad.values())}"
    if load.rejected_by_reason != dict(bad):
        return "unclear", f"reasons {load.rejected_by_reason} != {dict(bad)}"
    return "handled", ""


def run_corpus(root: Path, n: int, seed: int = 0) -> tuple[collections.Counter, list[tuple[str, str, str]]]:
    """Load `n` generated days one after another into `root/warehouse.duckdb`; returns the outcome counts and,
    for each day not handled, (kind, outcome, detail)."""
    from fair_pipeline.platform import warehouse

    counts, problems = collections.Counter(), []
    landing = Path(root) / "landing"
    folder = partition_dir(landing, "observational", DAY)
    with warehouse.session(Path(root) / "warehouse.duckdb") as con:
        for day in generate(n, seed):
            write_day(folder, day.files)
            outcome, detail = judge(con, landing, day)
            counts[outcome] += 1
            if outcome != "handled":
                problems.append((day.kind, outcome, detail))
    return counts, problems
