"""One Dagster asset per dbt_like_sql model (see `fair_pipeline.platform.sql_models` for the file conventions)."""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dagster as dg
import duckdb

from fair_pipeline.platform import sql_models
from fair_pipeline.platform.partitions import daily_partitions, single_run
from fair_pipeline.platform.resources import DuckDBWarehouse
from fair_pipeline.platform.warehouse import quote_identifier, table_exists, transaction

OWNERS = ["team:fairness"]


def _qualified(model: sql_models.SqlModel) -> str:
    return f"{quote_identifier(model.layer)}.{quote_identifier(model.name)}"


def _query_columns(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> list[str]:
    return [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM ({sql})", params).fetchall()]


def build_partition(con: duckdb.DuckDBPyConnection, model: sql_models.SqlModel, sql: str, partition: str) -> int:
    """Replace one partition of a partitioned model in one transaction; returns its row count."""
    params = sql_models.bind_parameters(model, partition)
    table = _qualified(model)
    with transaction(con):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(model.layer)}")
        if not table_exists(con, model.layer, model.name):
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM ({sql}) LIMIT 0", params)
        expected = _query_columns(con, sql, params)
        actual = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
        if expected != actual:
            raise sql_models.SqlModelError(
                f"{model.path}: the model now returns columns {expected} but {model.table} has {actual}; "
                f"drop {model.table} (derived data) and backfill its partitions"
            )
        con.execute(f"DELETE FROM {table} WHERE partition_date = $partition_date", {"partition_date": partition})
        before = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM ({sql})", params)
        inserted = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before
        in_partition = con.execute(
            f"SELECT count(*) FROM {table} WHERE partition_date = $partition_date", {"partition_date": partition}
        ).fetchone()[0]
        if inserted != in_partition:
            raise sql_models.SqlModelError(
                f"{model.path}: wrote {inserted - in_partition} rows whose partition_date is not {partition}; "
                "filter every partitioned input on $partition_date"
            )
        return inserted


def build_view(con: duckdb.DuckDBPyConnection, model: sql_models.SqlModel, sql: str) -> None:
    with transaction(con):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(model.layer)}")
        con.execute(f"CREATE OR REPLACE VIEW {_qualified(model)} AS {sql}")


def _view_rows(con: duckdb.DuckDBPyConnection, model: sql_models.SqlModel, partition: str) -> int:
    return con.execute(
        f"SELECT count(*) FROM {_qualified(model)} WHERE partition_date = $partition_date", {"partition_date": partition}
    ).fetchone()[0]


def build_full(con: duckdb.DuckDBPyConnection, model: sql_models.SqlModel, sql: str) -> int:
    with transaction(con):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(model.layer)}")
        con.execute(f"CREATE OR REPLACE TABLE {_qualified(model)} AS {sql}", sql_models.bind_parameters(model))
        return con.execute(f"SELECT count(*) FROM {_qualified(model)}").fetchone()[0]


def _description(model: sql_models.SqlModel) -> str:
    comments = [
        line.strip()[2:].strip()
        for line in model.text.splitlines()
        if line.strip().startswith("--") and not line.strip()[2:].strip().startswith("config:")
    ]
    summary = " ".join(comments) or f"SQL model {model.table}."
    return f"{summary}\n\nSource: `{model.path.relative_to(model.path.parents[2])}` -> DuckDB table `{model.table}`."


def build_sql_asset(model: sql_models.SqlModel, models: dict[str, sql_models.SqlModel]) -> dg.AssetsDefinition:
    sql, deps = sql_models.render_sql(model.text, models)
    partitioned = sql_models.is_partitioned(model, models)

    @dg.asset(
        key=list(model.key),
        deps=[dg.AssetKey(list(dep)) for dep in deps],
        partitions_def=daily_partitions if partitioned else None,
        backfill_policy=single_run if partitioned else None,
        pool="duckdb",
        group_name=model.group,
        kinds={"duckdb", "sql", "view" if model.is_view else "table"},
        owners=OWNERS,
        code_version=model.code_version,
        description=_description(model),
    )
    def _asset(context: dg.AssetExecutionContext, warehouse: DuckDBWarehouse) -> dg.MaterializeResult:
        with warehouse.connect() as con:
            if model.is_view:
                build_view(con, model, sql)
                rows = {key: _view_rows(con, model, key) for key in context.partition_keys} if partitioned else {}
                total = sum(rows.values()) if partitioned else con.execute(f"SELECT count(*) FROM {_qualified(model)}").fetchone()[0]
            elif partitioned:
                rows = {key: build_partition(con, model, sql, key) for key in context.partition_keys}
                total = sum(rows.values())
            else:
                total = build_full(con, model, sql)
                rows = {}
        metadata = {"dagster/row_count": total, "sql": dg.MetadataValue.md(f"```sql\n{sql.strip()}\n```")}
        if rows:
            metadata["rows_by_partition"] = dg.MetadataValue.json(rows)
        return dg.MaterializeResult(metadata=metadata)

    return _asset


def build_sql_assets() -> list[dg.AssetsDefinition]:
    models = sql_models.discover_models()
    return [build_sql_asset(models[name], models) for name in sql_models.topological_order(models)]
