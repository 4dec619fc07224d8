"""Executes the `ingest_logs` job for one partition with the multiprocess executor (used by
test_concurrency.py to start runs from separate processes, as the backfill daemon does)."""
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
        run_config={"execution": {"config": {"multiprocess": {"max_concurrent": 3, "start_method": {"forkserver": {}}}}}},
    ) as result:
        sys.exit(0 if result.success else 1)
