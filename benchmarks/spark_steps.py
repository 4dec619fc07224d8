"""The driver process of `bench_spark_cluster.py --steps`: some of the main job's assets again, on a home it ran.

    python benchmarks/spark_steps.py --home HOME --assets marts__eo_transforms,marts__eo_evaluation
                                     [--engine spark --spark-master URL --spark-conf KEY=VALUE ...]

Takes the engine flags of `fair-pipeline run`, prepares the same stores, and materializes only the named assets
(Dagster step keys) of the train-and-audit job for the newest landed day, as one run, reading every other asset
as stored: so a changed step is measured again at each day size without ingesting, training and auditing again.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import dagster as dg

    from fair_pipeline import runner
    from fair_pipeline.commands.arguments import add_engine_arguments, apply_engine
    from fair_pipeline.commands.jobs import prepare_stores
    from fair_pipeline.platform import settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--assets", required=True, help="Dagster step keys (marts__eo_evaluation), comma-separated")
    add_engine_arguments(parser)
    args = parser.parse_args(argv)
    os.environ[settings.HOME_ENV] = args.home
    apply_engine(args)
    if not prepare_stores():
        return 1
    days = runner.landed_partitions()
    if not days:
        print(f"no landed day under {settings.landing_dir()}", file=sys.stderr)
        return 2
    keys = [dg.AssetKey(key.split("__")) for key in args.assets.split(",")]
    result = runner.train_and_audit(days[-1], assets=keys)
    if not result.success:
        print(runner.failure_summary(result), file=sys.stderr)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
