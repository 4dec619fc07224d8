"""Executes the raw-layer steps of the `ingest_logs` job for one partition with the multiprocess executor (used by
test_concurrency.py to start runs from separate processes, as the backfill daemon does). Only the three raw
assets run: independent warehouse writers that the executor starts at once (six with the two runs), which the
`duckdb` pool must serialize; the staging and marts steps would add 18 more step processes of a few seconds of
imports each and no other kind of conflict."""
import sys

import dagster as dg

from fair_pipeline import runner
from fair_pipeline.definitions import ingest_logs_job_def

if __name__ == "__main__":
    runner.ensure_dagster_home()
    with dg.execute_job(
        dg.reconstructable(ingest_logs_job_def),
        instance=dg.DagsterInstance.get(),
        tags={"dagster/partition": sys.argv[1]},
        asset_selection=[dg.AssetKey(["raw", name]) for name in ("items", "observational_impressions", "randomized_impressions")],
        run_config={"execution": {"config": {"max_concurrent": 3}}},  # the project's forkserver executor
    ) as result:
        sys.exit(0 if result.success else 1)
