"""Ingest landed days and build every SQL model on one engine, then write every partitioned table's rows as JSON:
what the Spark Connect test runs on both engines (`python -m tests.platform.spark.raw_and_models ENGINE HOME OUT
[MASTER]`; a process of its own, since a Spark Connect client and the test session's classic SparkSession do not
share a process)."""
from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

from fair_pipeline.ingestion import contract, loads, spark_loads
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.ingestion.landing import landed_dates
from fair_pipeline.platform import sql_models, warehouse
from fair_pipeline.platform.engines import DuckDBEngine, build_models, fetch_rows
from fair_pipeline.platform.engines.transfer import copy_table


def _plain(value):
    """JSON for what the engines return beyond JSON's types: DuckDB sums integers into HUGEINT (a Decimal here) where
    Spark returns a bigint, so a whole Decimal is compared as the integer it is; dates as ISO text."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)


def ingest_and_build(engine_name: str, home: Path, master: str = "") -> dict[str, list]:
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
            from fair_pipeline.platform.engines.spark_engine import SparkEngine, spark_session

            engine = SparkEngine(spark_session(master=master), home / "spark_warehouse")
            copy_table(DuckDBEngine(con), engine, ("raw", "items"))
            for day in days:
                for source in contract.SOURCES:
                    spark_loads.load_partition(engine, landing, source, day)
        build_models(engine, days)
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
    return tables


if __name__ == "__main__":
    engine_name, home, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out.write_text(json.dumps(ingest_and_build(engine_name, home, *(sys.argv[4:5]))))
