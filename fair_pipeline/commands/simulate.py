"""`fair-pipeline simulate`: simulated click logs (Nandy et al. 2.2) written as landing files."""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import time

from fair_pipeline.commands.arguments import add_simulation_arguments, simulation_config
from fair_pipeline.commands.console import say
from fair_pipeline.platform import settings



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_simulation_arguments(parser)


def default_start(days: int) -> dt.date:
    """The last `days` complete UTC days, so the newest simulated day is the schedule's next partition."""
    return dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=days)


def simulate(args: argparse.Namespace) -> dict[str, int]:
    """Landing files of the simulation flags in `args`; impressions written per source."""
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing

    config = simulation_config(args)
    start = args.start or default_start(args.days)
    landing = settings.landing_dir()
    say(f"simulating {args.days} day(s) from {start} into {landing} ({dataclasses.asdict(config)})")
    began = time.perf_counter()
    written = simulate_to_landing(config, landing, start, args.days, progress=say)
    seconds = time.perf_counter() - began
    total = sum(written.values())
    say(f"wrote {total:,} impressions ({written}) in {seconds:.1f}s = {total / seconds / 1e6:.2f}M impressions/s")
    return written


def run(args: argparse.Namespace) -> int:
    simulate(args)
    return 0
