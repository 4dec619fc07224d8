"""`fair-pipeline import-open-bandit`: the shipped Open Bandit sample written as landing files."""
from __future__ import annotations

import argparse

from fair_pipeline.commands.console import say
from fair_pipeline.platform import settings



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options: the sample and its landing layout are fixed."""


def run(args: argparse.Namespace) -> int:
    from fair_pipeline.datasets.open_bandit import write_open_bandit_landing

    landing = settings.landing_dir()
    summary = write_open_bandit_landing(landing)
    for source in summary.sources.values():
        say(f"{source.log} -> {source.source} ({source.policy}): {source.rows:,} rows, {source.requests:,} requests, "
            f"{source.clicks} clicks over {len(source.dates)} days {source.dates[0]}..{source.dates[-1]}")
    say(f"{summary.n_items} items; landing files under {landing}. Next: fair-pipeline run --no-simulate")
    return 0
