"""The Spark rendering of the project's SQL (pure Python: sqlglot, no pyspark; runs everywhere).

Every statement either renders to SQL that sqlglot parses back as Spark, or is listed below with the reason it
stays on DuckDB. Statements are captured by running the stages' SQL functions on a small real warehouse through
a recording connection, so the inventory is the SQL that actually runs, not a hand-kept copy."""
from __future__ import annotations

import datetime as dt
import inspect
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlglot

from fair_pipeline.audit import attribute_cells, cell_audit, exposure_attributes, exposure_sql
from fair_pipeline.audit import sql as audit_sql
from fair_pipeline.eo import sql as eo_sql
from fair_pipeline.ingestion import catalogue_dates
from fair_pipeline.platform import sql_models, sql_schemas, warehouse, windows
from fair_pipeline.platform.engines import DuckDBEngine, build_models, spark_sql
from fair_pipeline.position_bias import sql as position_bias_sql
from fair_pipeline.reporting import sections as report_sections
from fair_pipeline.reporting.model import ReportInputs
from fair_pipeline.selection import candidates as selection_candidates
from fair_pipeline.selection import family_data
from fair_pipeline.training import rankers
from tests.platform import small_warehouse

PACKAGE = Path(__file__).resolve().parents[2] / "fair_pipeline"

# Modules whose SQL is captured below and must render for Spark.
RENDERED_MODULES = {
    "fair_pipeline/audit/sql.py": audit_sql,
    "fair_pipeline/audit/exposure_sql.py": exposure_sql,
    "fair_pipeline/audit/attribute_cells.py": attribute_cells,
    "fair_pipeline/audit/cell_audit.py": cell_audit,
    "fair_pipeline/ingestion/catalogue_dates.py": catalogue_dates,
    "fair_pipeline/eo/sql.py": eo_sql,
    "fair_pipeline/position_bias/sql.py": position_bias_sql,
    "fair_pipeline/platform/windows.py": windows,
    "fair_pipeline/training/rankers.py": rankers,
    "fair_pipeline/selection/candidates.py": selection_candidates,
    "fair_pipeline/selection/family_data.py": family_data,
    "fair_pipeline/platform/sql_schemas.py": sql_schemas,
}
# The engine interface itself: it runs its callers' SQL (rendered for Spark by the Spark engine), none of its own
# beyond identifiers and bound partitions.
ENGINE_MODULES = {
    "fair_pipeline/platform/engines/version_log.py": "the commit log's rows: Spark SQL written for Spark (bound "
        "parameters, no DuckDB dialect), run over a classic session and over Spark Connect by "
        "tests/platform/spark/test_spark_engine.py and test_connect.py",
    "fair_pipeline/platform/engines/base.py": "fetch_rows: the caller's query through Warehouse.query_arrow",
    "fair_pipeline/ingestion/spark_loads.py": "the contract's rules (ingestion/rules.py) on the Spark engine: rendered "
        "below (test_the_ingestion_contract_renders_for_spark) and run against DuckDB's loader by "
        "tests/platform/spark/test_ingestion_parity.py",
    "fair_pipeline/platform/engines/transfer.py": "SELECT * of a raw table (per partition, bound) between engines; "
        "tests/platform/spark/test_parity.py runs it on Spark",
    "fair_pipeline/audit/exposure_offpolicy.py": "sampled_requests: the request sample on the engine; "
        "tests/platform/spark/test_exposure_sql.py runs it on Spark and compares it with DuckDB's",
    "fair_pipeline/ingestion/spark_catalogue.py": "the catalogue's classification (ingestion/catalogue.py's "
        "CLASSIFY_ITEMS) over the files Spark reads, checked against DuckDB's raw.items column types and row count; "
        "tests/platform/spark/test_catalogue_on_spark.py compares the two tables",
}
# Modules whose engine reads are captured below although their functions take no connection.
CAPTURED_MODULES = {
    "fair_pipeline/reporting/sections.py": "the report's mart sections (data_volume, ctr_by_position), run on the "
        "engine through ReportInputs.mart_sql",
    "fair_pipeline/reporting/window_days.py": "the days each partition read, from marts.daily_volume through "
        "ReportInputs.mart_sql",
}

# Modules that run SQL and stay on DuckDB (for now or for good), with the reason. A new module that runs SQL
# must be added to one of the two lists (test_every_module_running_sql_is_accounted_for).
STAYS_ON_DUCKDB = {
    "fair_pipeline/ingestion/loads.py": "the DuckDB loader: the contract's rules (ingestion/rules.py, rendered "
        "for Spark below) over DuckDB's reader (read_parquet with filename, file_row_number), a temp table and "
        "one transaction over raw + quarantine",
    "fair_pipeline/ingestion/catalogue.py": "the item catalogue's validation (catalogue-sized; on the spark engine "
        "raw.items is then copied to Spark)",
    "fair_pipeline/audit/files.py": "`fair-pipeline audit FILE` reads one user file on the local machine",
    "fair_pipeline/audit/pairwise_file.py": "the pairwise pass of `fair-pipeline audit FILE` over the same local "
        "user file (as audit/files.py)",
    "fair_pipeline/audit/streamed.py": "the sweep and cluster passes run on a local DuckDB over the Parquet file "
        "spilled to the local temp directory; its engine input (spill_rows) is audit/sql.py's score_counts / "
        "cluster_counts query, rendered above",
    "fair_pipeline/audit/prefix_stream.py": "the one-pass clustered sweep's feed: a local DuckDB over the Parquet "
        "file spilled to the local temp directory (as audit/streamed.py)",
    "fair_pipeline/reporting/stored.py": "reads the stages' result stores (local by design) for the report",
    "fair_pipeline/audit/store.py": "small result store (audit results per partition), local by design",
    "fair_pipeline/training/store.py": "small result store (fits per partition), local by design",
    "fair_pipeline/selection/store.py": "small result store (selections), local by design",
    "fair_pipeline/selection/session.py": "elicitation sessions (a few rows per session), local by design",
    "fair_pipeline/platform/partition_store.py": "the result stores' shared partition writer, local by design",
    "fair_pipeline/platform/warehouse.py": "the DuckDB warehouse itself (connection, DDL, information_schema)",
    "fair_pipeline/platform/engines/duckdb_engine.py": "the DuckDB engine (Spark has its own implementation)",
    "fair_pipeline/platform/engines/spark_engine.py": "the Spark engine: runs only SQL rendered by spark_sql",
    "fair_pipeline/reporting/model.py": "ReportInputs.sql reads the result stores (local); its mart_sql hands "
        "reporting/sections.py's mart queries to the engine (captured below)",
    "fair_pipeline/reporting/cell_sections.py": "ReportInputs.sql over the audit's result store "
        "(marts.fairness_audit_cell_*, written by write_audit to the local DuckDB; its engine reads are "
        "audit/sql.py's queries over audit/cell_audit.py's cell rows, rendered above)",
    "fair_pipeline/reporting/trend.py": "reads the audit's result store (marts.fairness_audit_*, local by design)",
    "fair_pipeline/reporting/exposure_section.py": "ReportInputs.sql over the audit's result store "
        "(marts.fairness_audit_exposure_*, written by write_audit to the local DuckDB; its engine reads are "
        "audit/exposure_sql.py's, rendered above)",
    "fair_pipeline/ingestion/extras.py": "source-specific extras (landing/_extras) are loaded by the DuckDB loader "
        "only; the Spark loader refuses a day with extras, naming the file",
    "fair_pipeline/ingestion/extras_corpus.py": "the extras corpus: loads generated days into a local DuckDB "
        "warehouse through the DuckDB loader (a test/benchmark harness)",
    "fair_pipeline/ingestion/landing_corpus.py": "the landing fuzz corpus: loads generated days into a local "
        "DuckDB warehouse through the DuckDB loader and compares its tables (a test/benchmark harness)",
}

# Statements of the rendered modules that are engine metadata: the Spark engine answers them itself
# (Warehouse.table_exists / table_columns), so they never reach Spark as SQL.
ENGINE_METADATA = re.compile(r"information_schema\.", re.IGNORECASE)

_RUNS_SQL = re.compile(r"\.execute\(|\.sql\(|\.query_df\(|\.query_arrow\(|\.stream_batches\(|fetch_rows\(|mart_sql\(")


class RecordingConnection:
    """A DuckDB connection that records every statement it runs."""

    def __init__(self, con):
        self._con = con
        self.statements: list[tuple[str, object]] = []

    def execute(self, sql, params=None):
        self.statements.append((sql, params))
        return self._con.execute(sql, params)

    def __getattr__(self, name):  # register / unregister of frames: no SQL
        return getattr(self._con, name)


@pytest.fixture(scope="module")
def stage_statements(tmp_path_factory) -> list[str]:
    home = tmp_path_factory.mktemp("spark_sql")
    landing = small_warehouse.simulate_landing(home / "landing")
    path = home / "warehouse.duckdb"
    small_warehouse.load_raw(path, landing)
    first, last = (dt.date.fromisoformat(day) for day in (small_warehouse.PARTITIONS[0], small_warehouse.PARTITIONS[-1]))
    called: set[str] = set()
    with warehouse.session(path) as con:
        build_models(DuckDBEngine(con), small_warehouse.PARTITIONS)
        recorder = RecordingConnection(con)

        def call(module, name, *args, **kwargs):
            called.add(f"{module.__name__}.{name}")
            return getattr(module, name)(recorder, *args, **kwargs)

        window = call(audit_sql, "evaluation_window", "randomized_clicks", 2, last)
        call(audit_sql, "partition_evaluation_window", "relevance", 1, last)
        for name in audit_sql.LABEL_SOURCES:
            source = audit_sql.label_source(name, landing, window, ["shuffle"])
            call(audit_sql, "row_summary", source)
            call(audit_sql, "score_counts", source)
            for variance in filter(None, audit_sql.VARIANCES.values()):  # "conditional" needs no cluster pass
                call(audit_sql, "cluster_counts", source, variance)
            call(audit_sql, "item_counts", source, ["item_id"])
            call(audit_sql, "query_rows", source, 5)
            call(audit_sql, "queries_in_window", source)
        call(eo_sql, "read_click_counts", first, last)
        call(eo_sql, "read_weighted_sums", first, last, np.full(small_warehouse.CONFIG.slots, 0.5))
        for table in (position_bias_sql.SCORE_BINS_TABLE, position_bias_sql.SWAP_CELLS_TABLE):
            call(position_bias_sql, "window_aggregates", table, first, last, "shuffle")
        call(position_bias_sql, "estimate_position_bias_sql", "adjacent_swap", first, last)
        features = call(rankers, "feature_columns")
        curve = pd.DataFrame({"position": np.arange(1, small_warehouse.CONFIG.slots + 1), "weight": 1.0})
        previous = dt.date.fromisoformat(small_warehouse.PARTITIONS[-2])
        training = call(rankers, "partition_window", first, previous, last)
        call(rankers, "training_window", 1, last, 1)
        call(rankers, "training_data", training, curve, features)
        call(rankers, "heldout_click_aggregates", training, features)
        call(rankers, "truth_items", landing, features)
        # both clusterings: the item, request and item x request passes
        call(exposure_sql, "logged_exposure_parity", training, 1 / np.log2(1 + curve["position"].to_numpy()))
        call(exposure_attributes, "attribute_exposure", training, 1 / np.log2(1 + curve["position"].to_numpy()),
             ["group_id"])
        engine = DuckDBEngine(recorder)  # the audit by attribute cells: the catalogue's cells, joined to the rows
        items = attribute_cells.catalogue_attributes(engine, last, ["group_id"])
        mapping, unknown = attribute_cells.item_cells(items, ["group_id"])
        engine.register_frame(cell_audit.ITEM_CELLS, mapping)
        cells = cell_audit.cell_source(audit_sql.label_source("randomized_clicks", landing, window, ["shuffle"]),
                                       unknown)
        assert cell_audit.items_per_cell(engine, cells).sum() > 0
        audit_sql.score_counts(recorder, cells)
        audit_sql.cluster_counts(recorder, cells, ("item_id", "query_id"))
        audit_sql.item_counts(recorder, cells, ["item_id"])
        audit_sql.query_rows(recorder, cells, 5)
        engine.unregister_frame(cell_audit.ITEM_CELLS)
        call(catalogue_dates, "items_as_of", last)
        call(catalogue_dates, "delivered_columns", last, features)
        ranker = selection_candidates.Ranker("r0", 0.0, tuple(features[:2]), np.array([1.0, -0.5]), 0.1, first,
                                             first, None)
        with pytest.raises(selection_candidates.SelectionInputError):  # no ranker table in this warehouse
            call(selection_candidates, "load_rankers")
        call(selection_candidates, "catalogue_group_labels")
        list(call(selection_candidates, "ranker_weighted_sums", [ranker], 0.05, curve))
        call(selection_candidates, "build_candidates", [ranker], [0.0], curve,
             selection_candidates.WeightedCDFTransformer(), 0.05, 1)
        call(family_data, "fit_item_counts", ranker, "randomized_clicks", landing, ["shuffle"])
        call(family_data, "click_pairs", ranker, curve)
        call(family_data, "build_family_candidates", [ranker], label="randomized_clicks", landing=landing,
             policies=["shuffle"], position_curve=curve, selection_rate=0.5)
        inputs = ReportInputs(home=home, warehouse_path=path, marts=DuckDBEngine(recorder))
        report_sections.data_volume(inputs)
        report_sections.ctr_by_position(inputs)
        models = sql_models.discover_models()
        for model in models.values():
            sql_schemas.schema_violations(DuckDBEngine(recorder), model)  # the dbt-like tests, run on either engine
        tables = ["staging.stg_observational_impressions"]
        call(windows, "partition_dates", tables, last)
        call(windows, "newest_partitions", tables, 1, last)
        call(windows, "holdout_window", tables, 1, last, 1)
        call(windows, "window_before", tables, 1, last)
        call(windows, "newest_partition", tables)
        call(windows, "is_newest_partition", last, tables)
        call(windows, "calendar_window", tables, first, last, min_days=1)
        call(windows, "window_through", tables, 1, last)
    for module in RENDERED_MODULES.values():
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_"):
                continue
            first_parameter = next(iter(inspect.signature(function).parameters), None)
            if first_parameter in ("con", "connection"):
                assert f"{module.__name__}.{name}" in called, (
                    f"{module.__name__}.{name} runs SQL but the inventory does not call it: add it to stage_statements")
    return list(dict.fromkeys(sql for sql, _ in recorder.statements))


def _parses_as_spark(rendered: spark_sql.SparkStatement) -> None:
    """Parses back as Spark SQL, with no DuckDB parameter and no schema-qualified table left."""
    tree = sqlglot.parse_one(rendered.sql, read="spark")
    assert "$" not in rendered.sql, rendered.sql
    qualified = [t.sql("spark") for t in tree.find_all(sqlglot.exp.Table) if t.args.get("db") is not None]
    assert not qualified, f"schema-qualified tables left (Spark sees session views schema__table): {qualified}"


def test_every_sql_model_renders_for_spark():
    models = sql_models.discover_models()
    for model in models.values():
        sql, _ = sql_models.render_sql(model.text, models)
        rendered = spark_sql.render(sql)
        _parses_as_spark(rendered)
        assert set(rendered.named) == set(model.parameters), model.name


def test_every_stage_statement_renders_or_is_engine_metadata(stage_statements):
    assert len(stage_statements) >= 20, "the inventory captured too few statements to be the real SQL"
    rendered = 0
    for sql in stage_statements:
        if ENGINE_METADATA.search(sql):
            continue
        statement = spark_sql.render(sql)
        _parses_as_spark(statement)
        rendered += 1
    assert rendered >= 15


def test_the_truth_file_is_a_registered_input_not_a_table_named_after_the_parameter(stage_statements):
    truth_reads = [sql for sql in stage_statements if "read_parquet($truth)" in sql]
    assert truth_reads, "the audit's truth join was not captured"
    for sql in truth_reads:
        statement = spark_sql.render(sql)
        assert statement.file_inputs == (("__file_truth", "truth"),)
        assert "parquet." not in statement.sql.lower() and "`truth`" not in statement.sql
        assert "truth" not in statement.named  # the path is bound by registering the file, not as a value


def test_every_module_running_sql_is_accounted_for():
    running = {str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*.py")
               if _RUNS_SQL.search(path.read_text()) and path.name != "spark_sql.py"}
    unaccounted = running - set(RENDERED_MODULES) - set(CAPTURED_MODULES) - set(ENGINE_MODULES) - set(STAYS_ON_DUCKDB)
    assert not unaccounted, f"modules run SQL but are in neither RENDERED_MODULES nor STAYS_ON_DUCKDB: {sorted(unaccounted)}"
    stale = (set(RENDERED_MODULES) | set(CAPTURED_MODULES) | set(ENGINE_MODULES) | set(STAYS_ON_DUCKDB)) - running
    assert not stale, f"listed modules no longer run SQL: {sorted(stale)}"


@pytest.mark.parametrize("sql,message", [
    ("SELECT hash(item_id) FROM raw.items", "32-bit"),
    ("CREATE TEMP TABLE _items AS SELECT * FROM raw.items", "lazy TEMP VIEW"),
    ("INSERT INTO marts.t SELECT * FROM raw.items", "positional INSERT"),
    ("DELETE FROM raw.items WHERE partition_date = $partition_date", "DELETE"),
    ("BEGIN TRANSACTION", "TRANSACTION"),
    ("SELECT 1; SELECT 2", "2 statements"),
    ("SELECT * FROM read_parquet($files, union_by_name = true)", "without options"),
    ("SELECT * FROM read_parquet('landing/x.parquet')", "read_parquet\\(\\$parameter\\)"),
    ("SELECT * FROM read_csv($file)", "table function"),
    ("SELECT list_aggregate(x, 'sum') FROM t", "list_aggregate"),
    ("SELECT $a FROM t WHERE b = ?", "mixes"),
    ("DESCRIBE raw.items", "Describe"),
])
def test_untranslatable_statements_are_refused_with_the_reason(sql, message):
    with pytest.raises(spark_sql.SparkSqlError, match=message):
        spark_sql.render(sql)


def test_known_traps_are_rewritten():
    statement = spark_sql.render("SELECT isfinite(score) AS f, isinf(score) AS i FROM raw.observational_impressions "
                                 "WHERE partition_date = $partition_date AND list_contains($policies, policy)")
    assert statement.named == ("partition_date", "policies")
    assert "ISFINITE" not in statement.sql.upper().replace("(CASE", "") and "IS_INF" not in statement.sql.upper()
    assert "FROM raw__observational_impressions" in statement.sql and "ARRAY_CONTAINS(:policies, policy)" in statement.sql
    assert spark_sql.render("SELECT a FROM t WHERE b BETWEEN ? AND ?").positional == 2
    named = spark_sql.render("INSERT INTO marts.t BY NAME SELECT 1 AS a")
    assert "BY NAME" in named.sql


def test_renders_are_cached_per_sql_text_and_renderer_version():
    sql = "SELECT count(*) AS n FROM raw.items"
    assert spark_sql.render(sql) is spark_sql.render(sql)
    assert spark_sql.cache_key(sql)[1] == spark_sql.RENDERER_VERSION
    assert spark_sql.cache_key(sql) != spark_sql.cache_key(sql + " ")


def test_the_ingestion_contract_renders_for_spark():
    """The landing contract's statements, as the Spark loader sends them (every file type the rules may cast)."""
    from fair_pipeline.ingestion import rules, spark_loads

    for file_type in ("VARCHAR", "DOUBLE", "BIGINT", "BLOB"):
        typed = rules.typed_sql({c: file_type for c in rules.TARGET_TYPES}, spark_loads.ROWS_VIEW, "filename",
                                "stored_file")
        statements = [rules.rejected_sql(typed, spark_loads._DUPLICATE_KEY),
                      rules.accepted_sql(typed, spark_loads.REJECTED_VIEW),
                      f"{spark_loads._OTHER_SOURCES_QUARANTINE} UNION ALL {rules.quarantine_sql(typed, spark_loads.REJECTED_VIEW)}",
                      rules.rejected_by_file_sql(spark_loads.REJECTED_VIEW), spark_loads._REASON_COUNTS]
        utf8 = rules.invalid_utf8_sql({c: file_type for c in rules.TARGET_TYPES}, spark_loads.ROWS_VIEW, "filename")
        statements += [utf8] if utf8 else []
        for sql in statements:
            rendered = spark_sql.render(sql)
            _parses_as_spark(rendered)
            assert "MATERIALIZED" not in rendered.sql.upper()
