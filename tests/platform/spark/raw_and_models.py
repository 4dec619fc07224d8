"""Ingest landed days and build every SQL model on one engine, then write every partitioned table's rows (and each
day's quarantine reasons) as JSON: what the Spark Connect and storage tests run on both engines, in a process of its
own (a Spark Connect client, or a driver on a standalone cluster, and the test session's classic SparkSession do not
share a process):

    python -m tests.platform.spark.raw_and_models ENGINE HOME OUT [MASTER] [--warehouse URI] [--landing URI]
                                                  [--no-ingest] [--opened OUT] [--forbid DIR]
    python -m tests.platform.spark.raw_and_models spark HOME OUT MASTER --warehouse URI --die-in-commit DAY LANDING

`--landing URI` has the Spark loader read the days' files from that URI (listed through the session's Hadoop
FileSystem) instead of HOME/landing (which still holds the item catalogue); `--no-ingest` builds the models over the
raw tables as they are; `--opened OUT` first writes the tables as the warehouse serves them when the engine opens it;
`--forbid DIR` ends the process if it touches DIR itself (`forbidden_paths`); `--die-in-commit DAY LANDING`, after
the usual run, reloads DAY's observational files from another landing directory and ends the process (exit 3, no
clean-up) when the new versions of the day's raw rows and quarantine rows are written and their commit is next."""
from __future__ import annotations

import argparse
import json
import math
import os
from decimal import Decimal
from pathlib import Path

from fair_pipeline.ingestion import contract, landing_uris, loads, spark_catalogue, spark_loads
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.ingestion.landing import landed_dates
from fair_pipeline.platform import sql_models, warehouse
from fair_pipeline.platform.engines import DuckDBEngine, build_models, fetch_rows
from tests.platform.spark.forbidden_paths import forbid

DIED_IN_COMMIT = 3
_QUARANTINE_REASONS = """
SELECT CAST(partition_date AS VARCHAR) AS day, source, reason, count(*) AS n FROM raw.quarantine
WHERE partition_date IS NOT NULL GROUP BY ALL ORDER BY ALL
"""


def _plain(value):
    """JSON for what the engines return beyond JSON's types: DuckDB sums integers into HUGEINT (a Decimal here) where
    Spark returns a bigint, so a whole Decimal is compared as the integer it is; dates as ISO text."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)) or a == b
    return a == b


def assert_same_tables(expected: dict, actual: dict) -> None:
    """Every table of one engine's JSON equals the other's: columns, row counts, values (floats to 1e-9)."""
    assert set(actual) == set(expected) and expected["raw.observational_impressions"]["rows"][0][0] > 0
    for table, want_table in expected.items():
        got_table = actual[table]
        assert got_table.get("columns") == want_table.get("columns"), table
        assert len(got_table["rows"]) == len(want_table["rows"]), table
        for want, got in zip(want_table["rows"], got_table["rows"]):
            assert all(_same(w, g) for w, g in zip(want, got)), (table, want, got)


# Two tasks per shuffle, one per core of the cluster or of the Connect server's local[2] (the default, 8, runs waves of
# tiny tasks over these few hundred rows), launched without waiting for a slot local to their data (3 s per stage by
# default; the executors share one machine). What the tests compare is the tables, not how many tasks wrote them.
SHUFFLE_PARTITIONS = 2
SMALL_TASKS = {"spark.locality.wait": "0s"}


def _spark_engine(home: Path, master: str, location: str):
    from fair_pipeline.platform.engines.spark_engine import SparkEngine, spark_session

    session = spark_session(master=master, shuffle_partitions=SHUFFLE_PARTITIONS, config=SMALL_TASKS)
    return SparkEngine(session, location or home / "spark_warehouse")


def ingest_and_build(engine_name: str, home: Path, master: str = "", location: str = "",
                     ingest: bool = True, landing_uri: str = "", opened: Path | None = None) -> dict[str, list]:
    landing = home / "landing"
    days = landed_dates(landing, "observational")
    with warehouse.session(home / "warehouse.duckdb") as con:
        load_items(con, landing)
        if engine_name == "duckdb":
            engine = DuckDBEngine(con)
            for day in days:
                for source in contract.SOURCES:
                    loads.load_partition(con, landing, source, day)
        else:
            engine = _spark_engine(home, master, location)
            if opened is not None:
                opened.write_text(json.dumps(tables_as_json(engine)))
            spark_catalogue.write_items(engine, con, landing)  # the executors read the catalogue files
            if landing_uri:
                assert landing_uris.landed_dates(engine.files, landing_uri, "observational") == days
            for day in days if ingest else ():
                for source in contract.SOURCES:
                    spark_loads.load_partition(engine, landing_uri or landing, source, day)
        build_models(engine, days)
        return tables_as_json(engine)


def tables_as_json(engine) -> dict[str, dict]:
    tables = {}
    models = sql_models.discover_models()
    for model in models.values():
        if model.is_view or not sql_models.is_partitioned(model, models):
            continue
        columns = engine.table_columns(model.key)
        rows = fetch_rows(engine, f"SELECT * FROM {model.key[0]}.{model.key[1]}")
        tables[".".join(model.key)] = {"columns": columns,
                                       "rows": sorted((json.loads(json.dumps(r, default=_plain)) for r in rows), key=str)}
    for table in (("raw", "observational_impressions"), ("raw", "randomized_impressions")):
        tables[".".join(table)] = {"rows": [list(fetch_rows(engine, f"SELECT count(*) FROM {table[0]}.{table[1]}")[0])]}
    tables["raw.quarantine reasons"] = {"rows": [list(r) for r in fetch_rows(engine, _QUARANTINE_REASONS)]}
    return tables


def die_in_commit(home: Path, master: str, location: str, day: str, landing: str) -> None:
    from fair_pipeline.platform.engines import version_log

    engine = _spark_engine(home, master, location)

    def die(spark, root, commit_id, entries):
        assert {e.name for e in entries} == {"raw.observational_impressions", "raw.quarantine"}, entries
        os._exit(DIED_IN_COMMIT)

    version_log._write_commit = die
    spark_loads.load_partition(engine, landing, "observational", day)
    raise SystemExit("the load ended without the injected death")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=["duckdb", "spark"])
    parser.add_argument("home", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("master", nargs="?", default="")
    parser.add_argument("--warehouse", default="")
    parser.add_argument("--landing", default="")
    parser.add_argument("--no-ingest", action="store_true")
    parser.add_argument("--opened", type=Path)
    parser.add_argument("--forbid", type=Path, help="a directory this process must not touch (forbidden_paths)")
    parser.add_argument("--die-in-commit", nargs=2, metavar=("DAY", "LANDING"))
    args = parser.parse_args()
    if args.forbid:
        forbid(args.forbid)
    tables = ingest_and_build(args.engine, args.home, args.master, args.warehouse, ingest=not args.no_ingest,
                              landing_uri=args.landing, opened=args.opened)
    args.out.write_text(json.dumps(tables))
    if args.die_in_commit:
        die_in_commit(args.home, args.master, args.warehouse, args.die_in_commit[0], args.die_in_commit[1])


if __name__ == "__main__":
    main()
