"""Platform: what every stage stands on, and nothing stage-specific.

Settings and paths (`settings`: FAIR_PIPELINE_HOME, the warehouse file, the MLflow store), the DuckDB
warehouse connection (`warehouse`), the warehouse engines (`engines`: one `Warehouse` interface, DuckDB by
default, Spark with `--engine spark` for the SQL models and every stage's reads of them, and the sqlglot rendering
of the DuckDB-dialect SQL for Spark), the Dagster
resources (`resources`), the dbt-like SQL models turned into assets (`sql_models`, `sql_assets`:
`dbt_like_sql/<layer>/<name>.sql` -> table `<layer>.<name>`), daily partitions and the windows trained stages read (`partitions`, `windows`), and the MLflow tracking resource
with its registry aliases (`tracking`). Inputs: environment variables and the SQL files. Outputs: connections,
resources, the `staging`/`marts` tables. Imports no stage (import-linter's layers contract).
Tests: tests/platform/.
"""
