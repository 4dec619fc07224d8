"""Added cost of the new candidate families in the daily model_selection.

Simulates a small home (3 days, the selection tests' size unless given), runs the daily job once for the newest
partition, then re-materializes model_selection alone for that partition, alternating `families=[]` (ranker
candidates and EO transforms only) and all new families, and prints the CPU and wall time of each run side by
side (best of `repeats`), their ratio, and the CPU of the family fits + rating the asset reports itself
(`families_cpu_seconds`).

    python benchmarks/bench_selection_families.py [home_dir] [requests_per_day] [repeats]

Run from the repository root; `home_dir` (default: a new temp dir) must be empty or absent. SIMULATION data.
"""
from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

START = dt.date(2026, 1, 1)
DAYS = 3


def main(home: Path, requests_per_day: int = 150, repeats: int = 3) -> int:
    os.environ["FAIR_PIPELINE_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    import dagster as dg

    from fair_pipeline import runner
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
    from fair_pipeline.ingestion.simulator import SimulationConfig
    from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
    from fair_pipeline.platform.tracking import MLflowTracking
    from fair_pipeline.selection import families as fam
    from fair_pipeline.selection.assets import model_selection

    config = SimulationConfig(n_items=2_000, requests_per_day=requests_per_day, shuffle_share=0.5,
                              adjacent_swap_share=0.5, slots=20, seed=11)
    last = str(START + dt.timedelta(days=DAYS - 1))
    simulate_to_landing(config, home / "landing", START, DAYS)
    instance = dg.DagsterInstance.ephemeral()
    for result in (runner.ingest_range(str(START), last, instance=instance), runner.train_and_audit(last, instance=instance)):
        if not result.success:
            print(runner.failure_summary(result))
            return 1
    resources = {"warehouse": DuckDBWarehouse(path=str(home / "warehouse.duckdb")),
                 "landing": LandingZone(path=str(home / "landing")),
                 "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}",
                                          artifact_root=str(home / "mlartifacts"))}
    op = model_selection.key.to_python_identifier()

    def run(families):
        cpu, wall = time.process_time(), time.perf_counter()
        result = dg.materialize([model_selection], resources=resources, partition_key=last, instance=instance,
                                run_config={"ops": {op: {"config": {"families": families, "register_champion": False}}}})
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        meta = result.asset_materializations_for_node(op)[0].metadata
        return cpu, wall, meta["families_cpu_seconds"].value, meta["candidates"].value, meta["winner_family"].value

    runs = {"without new families": [], "with all new families": []}
    for _ in range(repeats):  # alternate, so both see the same machine load
        runs["without new families"].append(run([]))
        runs["with all new families"].append(run(list(fam.NEW_FAMILIES)))
    print(f"model_selection of partition {last}, {requests_per_day} requests/day (SIMULATION), best of {repeats}")
    print(f"{'run':<24}{'cpu s':>8}{'wall s':>8}{'family cpu s':>14}{'candidates':>12}  winner family")
    best = {}
    for name, values in runs.items():
        cpu, wall = min(v[0] for v in values), min(v[1] for v in values)
        fam_cpu = min(v[2] for v in values)
        best[name] = (cpu, wall)
        print(f"{name:<24}{cpu:>8.2f}{wall:>8.2f}{fam_cpu:>14.2f}{values[0][3]:>12}  {values[-1][4]}")
    (c0, w0), (c1, w1) = best["without new families"], best["with all new families"]
    print(f"added: cpu {c1 - c0:+.2f} s (ratio {c1 / c0:.2f}), wall {w1 - w0:+.2f} s (ratio {w1 / w0:.2f})")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    target = Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="families_bench_"))
    if target.exists() and any(target.iterdir()):
        sys.exit(f"{target} is not empty; give an empty or new directory")
    sys.exit(main(target, *(int(a) for a in args[1:3])))
