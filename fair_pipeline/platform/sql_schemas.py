"""The schema file beside each SQL model, as dbt projects keep them: `dbt_like_sql/<layer>/<name>.yml` describes
the table and its columns and declares its tests, which run as queries on either engine.

    description: what one row is
    unique_key: [columns that identify a row]          # test: no two rows share these values
    other_columns: what further columns hold            # optional: columns the schema does not list are allowed
    columns:
      - {name: partition_date, description: ..., tests: [not_null]}

`schema_violations(engine, model)` counts the rows that break each test (0 everywhere: the table is as
described); `check_columns` compares the listed columns with the table's.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from fair_pipeline.platform.sql_models import SqlModel, SqlModelError
from fair_pipeline.platform.warehouse import quote_identifier

COLUMN_TESTS = ("not_null",)


@dataclasses.dataclass(frozen=True)
class ModelSchema:
    path: Path
    description: str
    unique_key: tuple[str, ...]
    columns: dict[str, str]  # name -> description
    not_null: tuple[str, ...]
    other_columns: str = ""


def schema_path(model: SqlModel) -> Path:
    return model.path.with_suffix(".yml")


def load_schema(model: SqlModel) -> ModelSchema:
    """The model's schema file, validated; a missing file or a malformed entry is an error naming the file."""
    path = schema_path(model)
    if not path.is_file():
        raise SqlModelError(f"{model.path}: no schema file {path.name} beside it (description, columns and unique_key)")
    data = yaml.safe_load(path.read_text()) or {}
    unknown = set(data) - {"description", "unique_key", "columns", "other_columns"}
    if unknown or not isinstance(data.get("description"), str) or not isinstance(data.get("columns"), list):
        raise SqlModelError(f"{path}: needs `description` (text) and `columns` (a list); unknown keys "
                            f"{sorted(unknown)}")
    columns, not_null = {}, []
    for entry in data["columns"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry.get("description"):
            raise SqlModelError(f"{path}: every column needs a `name` and a `description`, got {entry!r}")
        tests = entry.get("tests", [])
        if entry["name"] in columns or set(tests) - set(COLUMN_TESTS) or set(entry) - {"name", "description", "tests"}:
            raise SqlModelError(f"{path}: column {entry['name']!r} is listed twice, or has keys or tests other than "
                                f"description and {list(COLUMN_TESTS)}: {entry!r}")
        columns[entry["name"]] = str(entry["description"])
        not_null += [entry["name"]] if "not_null" in tests else []
    key = tuple(data.get("unique_key") or ())
    if not key or set(key) - set(columns):
        raise SqlModelError(f"{path}: unique_key {list(key)} must name listed columns")
    return ModelSchema(path, data["description"], key, columns, tuple(not_null), str(data.get("other_columns") or ""))


def check_columns(schema: ModelSchema, table_columns: list[str]) -> list[str]:
    """What differs between the schema's columns and the table's, one line each (empty: they agree)."""
    problems = [f"{schema.path}: column {name!r} is not in the table" for name in schema.columns
                if name not in table_columns]
    if not schema.other_columns:
        problems += [f"{schema.path}: the table's column {name!r} is not described" for name in table_columns
                     if name not in schema.columns]
    return problems


def schema_test_queries(model: SqlModel, schema: ModelSchema) -> dict[str, str]:
    """{test name: a query returning the number of rows that break it}, in the SQL both engines run."""
    table = f"{model.layer}.{model.name}"
    queries = {f"not_null({name})": f"SELECT count(*) FROM {table} WHERE {quote_identifier(name)} IS NULL"
               for name in schema.not_null}
    key = ", ".join(quote_identifier(name) for name in schema.unique_key)
    queries[f"unique({', '.join(schema.unique_key)})"] = (
        f"SELECT count(*) FROM (SELECT {key} FROM {table} GROUP BY {key} HAVING count(*) > 1) AS repeated")
    return queries


def schema_violations(engine, model: SqlModel, schema: ModelSchema | None = None) -> dict[str, int]:
    """{test name: rows (not_null) or repeated keys (unique) that break it} on `engine` (a warehouse engine)."""
    schema = schema or load_schema(model)
    return {name: int(engine.query_df(sql).iloc[0, 0]) for name, sql in schema_test_queries(model, schema).items()}
