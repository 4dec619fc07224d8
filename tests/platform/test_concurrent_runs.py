"""Two `fair-pipeline backfill` processes at once on one home, over overlapping ranges: both must
finish, neither may take the other for dead, and the warehouse and registry must end as one backfill leaves them.

The ranges are 2026-01-01..02 and 2026-01-01..03: both ingest days 1 and 2 at the same time and both train and audit
partition 2 at the same time; the second also trains partition 3, the newest. Each range starts at the first day, so
neither backfill trains on a day only the other one ingests. The steps that write the warehouse share the `duckdb`
pool's one slot, so the two processes interleave step by step."""
from __future__ import annotations

import dataclasses
import subprocess
import time

import dagster as dg
import duckdb
import pytest

from benchmarks import kill_harness

pytestmark = pytest.mark.slow

SIZES = dataclasses.replace(kill_harness.Sizes(), days=3)
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
RANGES = [(DAYS[0], DAYS[1]), (DAYS[0], DAYS[2])]
# 268 s for both on the shared 2-core machine under load (a CI run and other tests); a wedged pair never ends.
RUN_TIMEOUT_S = 1200


@pytest.mark.timeout(2 * RUN_TIMEOUT_S)
def test_two_backfills_at_once_over_overlapping_ranges_lose_and_duplicate_nothing(tmp_path):
    landing = kill_harness.simulate(tmp_path / "landing_home", SIZES)
    home = kill_harness.fresh_home(tmp_path / "home", landing)
    # The instance's storage exists before the two start (as in any home that has run before): two commands
    # racing to create a brand-new home are not what this test is about.
    kill_harness.instance_for(home).dispose()

    began = time.monotonic()
    processes = [subprocess.Popen([*kill_harness.CLI, "backfill", "--start", start, "--end", end],
                                  cwd=kill_harness.REPO, env=kill_harness.environment(home),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for start, end in RANGES]
    try:
        outputs = [p.communicate(timeout=RUN_TIMEOUT_S)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    print(f"two concurrent backfills: {time.monotonic() - began:.0f}s")

    for (start, end), process, out in zip(RANGES, processes, outputs):
        assert process.returncode == 0, f"backfill {start}..{end}:\n{out[-4000:]}"
        assert f"[fair-pipeline] backfilled {start}..{end}:" in out, out[-4000:]
        # A live run of the other process is never taken for a dead one.
        assert kill_harness.CLEANUP not in out, out[-4000:]

    with kill_harness.instance_for(home) as instance:
        assert kill_harness.unfinished_runs(instance) == []
        pool = instance.event_log_storage.get_concurrency_info("duckdb")
        assert pool.claimed_slots == [] and pool.pending_steps == []
        runs = [r.dagster_run for r in instance.get_run_records()]
        assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        trained = sorted(r.tags.get("dagster/partition") for r in runs if r.job_name == "train_and_audit")
        assert trained == [DAYS[1], DAYS[1], DAYS[2]]
        assert sum(r.job_name == "ingest_logs" for r in runs) == 2

    # Every raw partition holds exactly its landing files' rows: none lost, none loaded twice.
    for source in kill_harness.SOURCES:
        landed = kill_harness.landed_partition_rows(home, source)
        assert sorted(landed) == DAYS
        assert kill_harness.stored_partition_rows(home, source) == landed, source
        with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
            rows, keys = con.execute(
                f"SELECT count(*), count(DISTINCT (partition_date, request_id, position)) FROM raw.{source}_impressions"
            ).fetchone()
        assert rows == keys, f"raw.{source}_impressions holds repeated (partition, request, position) rows"

    assert kill_harness.running_mlflow_runs(home) == 0
    # The home had no champion before, so it must now name a finished version of the newest partition.
    assert kill_harness.champion_problem(home) is None
    from fair_pipeline.platform.tracking import FAIR_RANKER

    champion = kill_harness.mlflow_client(home).get_model_version_by_alias(FAIR_RANKER, "champion")
    assert champion.tags.get("fair_pipeline.partition") == DAYS[-1], champion.tags
