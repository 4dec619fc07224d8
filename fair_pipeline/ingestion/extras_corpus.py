"""Generated landing days with extras files (`landing/_extras/...`), for the landing corpus: each day's extras must
be refused whole (an error naming the file, nothing changed) or stored with exactly the bad rows in
raw.extras_quarantine, each with its reason, and the day's impressions loaded either way.

Kinds of day: `extras_keys` (keys of other days, positions not shown, NULL keys, repeated keys, beside good rows),
`extras_drift` (a payload column whose type changes from day to day, over one warehouse: widened by
`extras.widened_type` or the file's rows quarantined naming the column), `extras_key_type` (position as text),
`extras_reserved` (a `partition_date` or `FILE_ROW_NUMBER` column) and `extras_unkeyed` (no position column).
The outcomes are the same as the impression corpus's: handled, silent, lost, unclear.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.extras import QUARANTINE, widened_type
from fair_pipeline.ingestion.landing import partition_dir
from fair_pipeline.ingestion.landing_corpus import load_day

DAY = dt.date(2026, 1, 1)
SLOTS = 4
KINDS = ("extras_keys", "extras_drift", "extras_key_type", "extras_reserved", "extras_unkeyed")
NOT_SHOWN = "(request_id, position) not among the day's impressions"
REASONS = {"other_day": NOT_SHOWN, "not_shown": NOT_SHOWN, "null_request": "missing key (request_id, position)",
           "null_position": "missing key (request_id, position)", "repeated": "duplicate (request_id, position)"}
# The payload column's types across days (DuckDB's name for each as read from Parquet).
DRIFT_TYPES = {"int32": (pa.int32(), "INTEGER"), "int64": (pa.int64(), "BIGINT"), "uint32": (pa.uint32(), "UINTEGER"),
               "float32": (pa.float32(), "FLOAT"), "float64": (pa.float64(), "DOUBLE"), "string": (pa.string(), "VARCHAR"),
               "timestamp_ms": (pa.timestamp("ms"), "TIMESTAMP"), "timestamp_us": (pa.timestamp("us"), "TIMESTAMP"),
               "timestamp_ns": (pa.timestamp("ns"), "TIMESTAMP_NS")}


@dataclasses.dataclass
class ExtrasDay:
    """A day's impressions table, its extras files (name -> table) and what must happen: `expected[v]` is the
    reason row `v` (the payload column `v` numbers rows) must be quarantined with, None to be stored; or the text
    of a refusal naming `refused_file`."""

    kind: str
    impressions: pa.Table
    files: dict[str, pa.Table]
    expected: dict[int, str | None]
    refusal: str | None = None
    refused_file: str | None = None
    drift_type: str | None = None


def _impressions(rng: random.Random, prefix: str, n_requests: int) -> pa.Table:
    rows = [{"ts": dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc), "request_id": f"{prefix}r{r}",
             "query_id": f"q{r}", "policy": "production", "position": p, "original_position": None,
             "item_id": f"i{rng.randrange(50)}", "group_id": rng.choice(["a", "b"]), "score": rng.random(),
             "click": rng.randint(0, 1)} for r in range(n_requests) for p in range(1, SLOTS + 1)]
    return pa.Table.from_pylist(rows, contract.IMPRESSION_SCHEMA)


def _drift_value(name: str, k: int):
    if name.startswith("timestamp"):
        return dt.datetime(2026, 1, 1) + dt.timedelta(seconds=k)
    return str(k) if name == "string" else float(k) + 0.5 if name.startswith("float") else k


def generate(n: int, seed: int = 0) -> list[ExtrasDay]:
    rng = random.Random(seed)
    days = []
    for i in range(n):
        kind = rng.choice(KINDS)
        prefix = f"e{i}-"
        impressions = _impressions(rng, prefix, rng.randint(2, 6))
        keys = [(r, p) for r, p in zip(impressions["request_id"].to_pylist(), impressions["position"].to_pylist())]
        good = rng.sample(keys, rng.randint(1, len(keys)))
        rows = [(r, p, None) for r, p in good]
        if kind == "extras_keys":
            for defect in rng.sample(list(REASONS), rng.randint(1, len(REASONS))):
                r, p = rng.choice(good)
                rows.insert(rng.randrange(len(rows) + 1), {
                    "other_day": (f"e{i + 1}-r0", 1), "not_shown": (r, SLOTS + 1), "null_request": (None, p),
                    "null_position": (r, None)}.get(defect, (r, p)) + (REASONS[defect],))
            # A repeated key's later copy is the one quarantined: put every copy after its first.
            seen, ordered = set(), []
            for r, p, reason in rows:
                if reason == REASONS["repeated"] and (r, p) not in seen:
                    reason = None
                elif reason is None and (r, p) in seen:
                    reason = REASONS["repeated"]
                if reason is None:
                    seen.add((r, p))
                ordered.append((r, p, reason))
            rows = ordered
        table = pa.table({"request_id": pa.array([r for r, _, _ in rows], pa.string()),
                          "position": pa.array([p for _, p, _ in rows], pa.int64()),
                          "v": pa.array(range(len(rows)), pa.int64())})
        expected = {v: reason for v, (_, _, reason) in enumerate(rows)}
        day = ExtrasDay(kind, impressions, {"part-0.parquet": table}, expected)
        if kind == "extras_drift":
            day.drift_type = rng.choice(list(DRIFT_TYPES))
            arrow_type, _ = DRIFT_TYPES[day.drift_type]
            day.files["part-0.parquet"] = table.append_column(
                "payload", pa.array([_drift_value(day.drift_type, k) for k in range(len(rows))], arrow_type))
        elif kind == "extras_key_type":
            day.files["part-0.parquet"] = table.set_column(1, "position", pa.array([str(p) for _, p, _ in rows]))
            day.expected = dict.fromkeys(expected, "key column 'position' is VARCHAR; expected an integer")
        elif kind == "extras_reserved":
            name = rng.choice(["partition_date", "Partition_Date", "FILE_ROW_NUMBER"])
            day.files["part-0.parquet"] = table.append_column(name, pa.array(["x"] * len(rows)))
            day.refusal, day.refused_file = "has reserved columns", "part-0.parquet"
        elif kind == "extras_unkeyed":
            day.files["part-0.parquet"] = table.drop_columns(["position"])
            day.refusal, day.refused_file = "lacks key columns ['position']", "part-0.parquet"
        days.append(day)
    return days


def _state(con) -> tuple:
    impressions = con.execute("SELECT count(*) FROM raw.observational_impressions").fetchone()[0]
    stored = con.execute("SELECT count(*) FROM raw.observational_extras").fetchone()[0] if _has_extras(con) else 0
    quarantined = con.execute(f"SELECT count(*) FROM {QUARANTINE}").fetchone()[0] if _has_quarantine(con) else 0
    return impressions, stored, quarantined


def _has_extras(con) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'raw' AND "
                            "table_name = 'observational_extras'").fetchone()[0])


def _has_quarantine(con) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'raw' AND "
                            "table_name = 'extras_quarantine'").fetchone()[0])


def judge(con, landing: Path, day: ExtrasDay, stored_types: dict[str, str]) -> tuple[str, str]:
    """(outcome, detail) of loading one day; `stored_types` is the payload column's type in the table so far (the
    oracle's model of the table, updated here)."""
    folder = partition_dir(Path(landing) / contract.EXTRAS_DIR, "observational", DAY)
    refused = str(folder / day.refused_file) if day.refused_file else str(folder)
    load, outcome = load_day(con, landing, _state, day.refusal, refused, day.refused_file)
    if outcome is not None:
        return outcome
    if day.refusal is not None:
        return "silent", f"loaded, but expected a refusal ({day.refusal})"
    expected = dict(day.expected)
    if day.kind == "extras_drift":
        incoming = DRIFT_TYPES[day.drift_type][1]
        have = stored_types.get("payload", incoming)
        wider = widened_type(have, incoming)
        if wider is None:
            reason = f"column 'payload' is {incoming} here but {have} in the raw table (no widening rule)"
            expected = dict.fromkeys(expected, reason)
        else:
            stored_types["payload"] = wider
    if load.accepted != day.impressions.num_rows:
        return "lost", f"impressions {load.accepted} of {day.impressions.num_rows} stored"
    stored = {row[0] for row in con.execute("SELECT v FROM raw.observational_extras").fetchall()} if _has_extras(con) else set()
    quarantined = {json.loads(values)["v"]: reason
                   for values, reason in con.execute(f"SELECT row_values, reason FROM {QUARANTINE}").fetchall()}
    should_store = {v for v, reason in expected.items() if reason is None}
    if stored - should_store:
        return "silent", f"stored extras rows that should be quarantined: {sorted(stored - should_store)[:3]}"
    if should_store - stored or set(quarantined) != set(expected) - should_store:
        return "lost", f"rows neither stored nor quarantined: {sorted(set(expected) - stored - set(quarantined))[:3]}"
    wrong = {v: (quarantined[v], expected[v]) for v in quarantined if quarantined[v] != expected[v]}
    if wrong:
        return "unclear", f"reasons differ (got, expected): {list(wrong.values())[:2]}"
    return "handled", ""


def write_day(landing: Path, day: ExtrasDay) -> None:
    """Replace the landing day's impressions and extras with `day`'s files."""
    impressions = partition_dir(Path(landing), "observational", DAY)
    extras = partition_dir(Path(landing) / contract.EXTRAS_DIR, "observational", DAY)
    for folder in (impressions, extras):
        folder.mkdir(parents=True, exist_ok=True)
        for path in folder.iterdir():
            path.unlink()
    pq.write_table(day.impressions, impressions / "part-0.parquet")
    for name, table in day.files.items():
        pq.write_table(table, extras / name)


def run_corpus(root: Path, n: int, seed: int = 0) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    """Load `n` generated extras days one after another into `root/warehouse.duckdb`; the outcome counts and, for
    each day not handled, (kind, outcome, detail)."""
    import collections

    from fair_pipeline.platform import warehouse

    counts, problems, stored_types = collections.Counter(), [], {}
    landing = Path(root) / "landing"
    with warehouse.session(Path(root) / "warehouse.duckdb") as con:
        for day in generate(n, seed):
            write_day(landing, day)
            outcome, detail = judge(con, landing, day, stored_types)
            counts[outcome] += 1
            if outcome != "handled":
                problems.append((day.kind, outcome, detail))
    return counts, problems
