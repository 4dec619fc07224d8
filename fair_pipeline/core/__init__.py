"""Pure math on arrays and small aggregates: no Dagster, no DuckDB imports allowed here."""
