"""`fair-pipeline promote [--partition D]`: move fair-ranker@champion to the model selected for partition D (by
default the newest partition with data, which also undoes a rollback)."""
from __future__ import annotations

import argparse

from fair_pipeline.commands.arguments import date
from fair_pipeline.commands.console import say
from fair_pipeline.commands.jobs import prepare_stores
from fair_pipeline.platform import settings



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", type=date,
                        help="the model_selection partition (YYYY-MM-DD); default: the newest partition with data")
    parser.add_argument("--force", action="store_true", help="promote even if a newer partition has data (a rollback)")


def run(args: argparse.Namespace) -> int:
    from fair_pipeline.selection.promotion import PromotionError, newest_partition_with_data, promote

    if not prepare_stores():
        return 1
    try:
        day = args.partition or (newest_partition_with_data() if settings.warehouse_path().exists() else None)
        if day is None:
            say("error: no partition has data yet (the warehouse holds no ingested day): nothing to promote")
            return 2
        result = promote(day, force=args.force)
    except PromotionError as error:
        say(f"error: {error}")
        return 2
    say(result)
    return 0
