"""Builds one dbt_like_sql model on any `Warehouse`: a view, the given daily partitions, or a full table.

The one code path of the Dagster SQL-model assets (DuckDB) and of Spark builds, so both engines run the
same statements with the same parameters."""
from __future__ import annotations

import dataclasses

from fair_pipeline.platform import sql_models
from fair_pipeline.platform.engines.base import Warehouse, WarehouseWriteError


@dataclasses.dataclass(frozen=True)
class ModelBuild:
    total_rows: int
    rows_by_partition: dict[str, int]


def build_model(engine: Warehouse, model: sql_models.SqlModel, sql: str, partitioned: bool,
                partition_keys: list[str]) -> ModelBuild:
    """`sql` is the model rendered by `sql_models.render_sql`; `partition_keys` are the days to (re)build."""
    try:
        if model.is_view:
            engine.create_view(model.key, sql)
            if not partitioned:
                return ModelBuild(engine.row_count(model.key), {})
            rows = {key: engine.row_count(model.key, key) for key in partition_keys}
        elif partitioned:
            rows = {key: engine.replace_partition(model.key, sql, sql_models.bind_parameters(model, key), key)
                    for key in partition_keys}
        else:
            return ModelBuild(engine.replace_table(model.key, sql, sql_models.bind_parameters(model)), {})
    except WarehouseWriteError as error:
        raise sql_models.SqlModelError(f"{model.path}: {error}") from error
    return ModelBuild(sum(rows.values()), rows)


def build_models(engine: Warehouse, partition_keys: list[str],
                 models: dict[str, sql_models.SqlModel] | None = None) -> dict[str, int]:
    """Every SQL model in dependency order (partitioned ones for `partition_keys`); rows per model."""
    models = models if models is not None else sql_models.discover_models()
    rows = {}
    for name in sql_models.topological_order(models):
        model = models[name]
        sql, _ = sql_models.render_sql(model.text, models)
        partitioned = sql_models.is_partitioned(model, models)
        rows[name] = build_model(engine, model, sql, partitioned, partition_keys if partitioned else []).total_rows
    return rows
