"""One Dagster asset per dbt_like_sql model (see `fair_pipeline.platform.sql_models` for the file conventions),
built on the warehouse resource's engine (DuckDB, or Spark with `engine: spark`), described by its schema file
(`fair_pipeline.platform.sql_schemas`)."""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dagster as dg
import duckdb

from fair_pipeline.platform import sql_models
from fair_pipeline.platform.asset_defaults import OWNERS, POOL
from fair_pipeline.platform.engines import DuckDBEngine, build_model
from fair_pipeline.platform.partitions import daily_partitions, single_run
from fair_pipeline.platform.read_history import CODE, READ_SINCE, carried_since, code_of, previous_parts
from fair_pipeline.platform.resources import DuckDBWarehouse
from fair_pipeline.platform.sql_schemas import ModelSchema, load_schema



def build_partition(con: duckdb.DuckDBPyConnection, model: sql_models.SqlModel, sql: str, partition: str) -> int:
    """Replace one partition of a partitioned model in one transaction; returns its row count."""
    return build_model(DuckDBEngine(con), model, sql, True, [partition]).total_rows


def _description(model: sql_models.SqlModel, schema: ModelSchema) -> str:
    return (f"{schema.description}\n\nSource: `{model.path.relative_to(model.path.parents[2])}` -> table "
            f"`{model.table}`; columns and tests: `{schema.path.name}`.")


def _column_schema(schema: ModelSchema) -> dg.TableSchema:
    return dg.TableSchema(columns=[
        dg.TableColumn(name, description=text,
                       constraints=dg.TableColumnConstraints(nullable=name not in schema.not_null))
        for name, text in schema.columns.items()])


def build_sql_asset(model: sql_models.SqlModel, models: dict[str, sql_models.SqlModel]) -> dg.AssetsDefinition:
    sql, deps = sql_models.render_sql(model.text, models)
    partitioned = sql_models.is_partitioned(model, models)
    schema = load_schema(model)

    @dg.asset(
        key=list(model.key),
        deps=[dg.AssetKey(list(dep)) for dep in deps],
        partitions_def=daily_partitions if partitioned else None,
        backfill_policy=single_run if partitioned else None,
        pool=POOL,
        group_name=model.group,
        kinds={"duckdb", "sql", "view" if model.is_view else "table"},
        owners=OWNERS,
        code_version=model.code_version,
        description=_description(model, schema),
        metadata={"dagster/column_schema": _column_schema(schema)},
    )
    def _asset(context: dg.AssetExecutionContext, warehouse: DuckDBWarehouse) -> dg.MaterializeResult:
        with warehouse.connect() as con:
            built = build_model(warehouse.engine_for(con), model, sql, partitioned,
                                list(context.partition_keys) if partitioned else [])
        metadata = {"dagster/row_count": built.total_rows, "sql": dg.MetadataValue.md(f"```sql\n{sql.strip()}\n```")}
        if built.rows_by_partition:
            metadata["rows_by_partition"] = dg.MetadataValue.json(built.rows_by_partition)
        if not partitioned:  # what later partitions read of it changes with its code only (`read_history`)
            previous, previous_id = previous_parts(context.instance, context.asset_key,
                                                   lambda materialization: {CODE: code_of(materialization)})
            metadata[READ_SINCE] = dg.MetadataValue.json(carried_since({CODE: model.code_version}, previous, previous_id))
        return dg.MaterializeResult(metadata=metadata)

    return _asset


def build_sql_assets() -> list[dg.AssetsDefinition]:
    models = sql_models.discover_models()
    return [build_sql_asset(models[name], models) for name in sql_models.topological_order(models)]
