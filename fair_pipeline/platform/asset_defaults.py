"""What every asset of the pipeline shares, in one place: its owners, the `duckdb` pool (DuckDB allows one writer
per file, so the instance limits the pool to 1) and its kinds. A stage's asset is declared with `pipeline_asset`
and its docstring is its description in the Dagster UI."""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
from collections.abc import Callable, Iterable

import dagster as dg

OWNERS = ["team:fairness"]
POOL = "duckdb"
# A trained or audited stage: Python on the warehouse's aggregates, results in DuckDB, a run in MLflow.
STAGE_KINDS = ("python", "duckdb", "mlflow")


def pipeline_asset(*, kinds: Iterable[str] = STAGE_KINDS, **options) -> Callable[..., dg.AssetsDefinition]:
    """`dg.asset` with the pipeline's owners, pool and kinds (each may be overridden); without `description` the
    decorated function's docstring describes the asset."""
    return dg.asset(owners=options.pop("owners", OWNERS), pool=options.pop("pool", POOL), kinds=set(kinds), **options)


__all__ = ["OWNERS", "POOL", "STAGE_KINDS", "pipeline_asset"]
