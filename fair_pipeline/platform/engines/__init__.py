"""Warehouse engines: one interface (`Warehouse`), two implementations.

`DuckDBEngine` (default) is the warehouse file. `SparkEngine`
(`engines.spark_engine`, needs the `[spark]` extra and Java 17) keeps Parquet tables partitioned by
partition_date under a URI (`warehouse_files`; default `$FAIR_PIPELINE_HOME/spark_warehouse`), each write a new
version made live by a commit log written and read through Spark itself (`spark_tables`, `version_log`), and runs the same dbt_like_sql models, rendered
from the DuckDB dialect by `engines.spark_sql` (pure Python: sqlglot, no pyspark). `build_model` builds one
SQL model on either, `build_models` all of them. `select.open_engine` opens the engine a run is configured with
(the `warehouse` resource's `engine`); the stages read raw, staging and marts tables through it, and `as_warehouse`
wraps a plain DuckDB connection (tests, notebooks). pyspark is imported only by `spark_engine`, so nothing here
needs it.
"""
from fair_pipeline.platform.engines.base import Params, Table, Warehouse, WarehouseWriteError, fetch_rows, table_name
from fair_pipeline.platform.engines.build import ModelBuild, build_model, build_models
from fair_pipeline.platform.engines.duckdb_engine import DuckDBEngine, as_warehouse

__all__ = ["DuckDBEngine", "ModelBuild", "Params", "Table", "Warehouse", "WarehouseWriteError", "as_warehouse",
           "build_model", "build_models", "fetch_rows", "table_name"]
