"""The paper's reference models (Nandy et al., section 4.1): vanilla and MI-penalized logistic regressions on
Adult and COMPAS, what the `benchmark_models` asset fits, audits and registers as `fair-benchmark-<dataset>`.

`data` builds the model-ready splits from the shipped files, `fits` fits and audits the lambda path (no Dagster,
no DuckDB), `registry` registers every fit and moves `champion` by the Holm rule. The asset, its tables
(`marts.benchmark_*`) and registry names keep the word "benchmark": they name what users already store. The
performance scripts are a different thing: `benchmarks/` at the top of the repository.
"""
