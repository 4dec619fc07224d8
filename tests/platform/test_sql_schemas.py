"""Every dbt_like_sql model has a schema file that describes its table: the listed columns are the table's, and
its tests (not_null, unique key) hold on the DuckDB-built models (tests/platform/spark/test_parity.py runs the
same tests on Spark); a broken row makes a test fail, and a malformed schema file is an error naming it."""
from __future__ import annotations

import shutil

import pytest

from fair_pipeline.platform import settings, sql_models, warehouse
from fair_pipeline.platform.engines import DuckDBEngine, build_models
from fair_pipeline.platform.sql_schemas import check_columns, load_schema, schema_violations
from tests.platform import small_warehouse

MODELS = sql_models.discover_models()


@pytest.fixture(scope="module")
def duck(tmp_path_factory):
    home = tmp_path_factory.mktemp("schemas")
    landing = small_warehouse.simulate_landing(home / "landing")
    small_warehouse.load_raw(home / "warehouse.duckdb", landing)
    with warehouse.session(home / "warehouse.duckdb") as con:
        engine = DuckDBEngine(con)
        build_models(engine, small_warehouse.PARTITIONS)
        yield engine


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_schema_describes_the_table_and_its_tests_hold(duck, name):
    model = MODELS[name]
    schema = load_schema(model)
    assert schema.description and all(schema.columns.values())
    table = duck.query_df(f"SELECT * FROM {model.table} LIMIT 0")
    assert check_columns(schema, list(table.columns)) == []
    assert duck.query_df(f"SELECT count(*) AS n FROM {model.table}")["n"].iloc[0] > 0  # the tests saw rows
    assert schema_violations(duck, model, schema) == dict.fromkeys(schema_violations(duck, model, schema), 0)


def test_a_repeated_key_and_a_null_are_counted(duck):
    model = MODELS["position_swap_cells"]
    duck.con.execute(f"CREATE TEMP TABLE saved AS SELECT * FROM {model.table}")
    try:
        duck.con.execute(f"INSERT INTO {model.table} SELECT * FROM {model.table} LIMIT 2")
        duck.con.execute(f"INSERT INTO {model.table} SELECT partition_date, NULL, position, original_position, "
                         f"impressions, clicks FROM {model.table} LIMIT 1")
        violations = schema_violations(duck, model)
        assert violations["unique(partition_date, policy, position, original_position)"] == 2
        assert violations["not_null(policy)"] == 1 and violations["not_null(clicks)"] == 0
    finally:
        duck.con.execute(f"DELETE FROM {model.table}")
        duck.con.execute(f"INSERT INTO {model.table} SELECT * FROM saved")


def test_an_undescribed_column_and_a_missing_one_are_named():
    schema = load_schema(MODELS["daily_volume"])
    problems = check_columns(schema, ["partition_date", "source", "accepted_rows", "clicks", "extra"])
    assert problems == [f"{schema.path}: column 'rejected_rows' is not in the table",
                        f"{schema.path}: the table's column 'extra' is not described"]
    items = load_schema(MODELS["stg_items"])  # other_columns: the catalogue's feature columns are allowed
    assert check_columns(items, ["item_id", "group_id", "catalogue_date", "valid_from", "valid_until", "group_label",
                                 "f0"]) == []


@pytest.mark.parametrize("text, message", [
    (None, "no schema file daily_volume.yml"),
    ("description: x\ncolumns: []\n", r"unique_key \[\] must name listed columns"),
    ("description: x\nunique_key: [a]\ncolumns:\n  - {name: a}\n", "every column needs a `name` and a `description`"),
    ("description: x\nunique_key: [a]\ncolumns:\n  - {name: a, description: y, tests: [unique]}\n",
     "has keys or tests other than"),
    ("columns: []\n", "needs `description`"),
])
def test_a_malformed_or_missing_schema_file_is_an_error_naming_it(tmp_path, text, message):
    shutil.copytree(settings.SQL_ROOT, tmp_path / "sql")
    path = tmp_path / "sql" / "marts" / "daily_volume.yml"
    path.unlink()
    if text is not None:
        path.write_text(text)
    model = sql_models.discover_models(tmp_path / "sql")["daily_volume"]
    with pytest.raises(sql_models.SqlModelError, match=message) as error:
        load_schema(model)
    assert "daily_volume" in str(error.value)
