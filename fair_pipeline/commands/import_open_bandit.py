"""`fair-pipeline import-open-bandit`: the shipped Open Bandit sample written as landing files."""
from __future__ import annotations

import argparse

from fair_pipeline.commands.console import say
from fair_pipeline.platform import settings


# The dataset module's CAMPAIGNS + EVERY (not imported here: building the parser must not load pandas).
CAMPAIGN_CHOICES = ("all", "men", "women", "every")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--campaign", choices=CAMPAIGN_CHOICES, default="all",
                        help="which campaign of the sample to write (each is a surface of its own, query_id "
                             "obd-<campaign>); 'every' writes all three side by side (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from fair_pipeline.datasets.open_bandit import write_open_bandit_landing

    landing = settings.landing_dir()
    summary = write_open_bandit_landing(landing, campaign=args.campaign)
    say(f"campaign(s) {', '.join(summary.campaigns)}:")
    for source in summary.sources.values():
        say(f"{source.log} -> {source.source} ({source.policy}): {source.rows:,} rows, {source.requests:,} requests, "
            f"{source.clicks} clicks over {len(source.dates)} days {source.dates[0]}..{source.dates[-1]}")
    say(f"{summary.n_items} items; landing files under {landing}. Next: fair-pipeline run --no-simulate")
    return 0
