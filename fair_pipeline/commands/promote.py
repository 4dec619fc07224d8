"""`fair-pipeline promote --partition D`: move fair-ranker@champion to the model selected for partition D."""
from __future__ import annotations

import argparse

from fair_pipeline.commands.arguments import date
from fair_pipeline.commands.console import say
from fair_pipeline.commands.jobs import prepare_stores



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", type=date, required=True, help="the model_selection partition (YYYY-MM-DD)")
    parser.add_argument("--force", action="store_true", help="promote even if a newer partition has data (a rollback)")


def run(args: argparse.Namespace) -> int:
    from fair_pipeline.selection.promotion import PromotionError, promote

    if not prepare_stores():
        return 1
    try:
        result = promote(args.partition, force=args.force)
    except PromotionError as error:
        say(f"error: {error}")
        return 2
    say(result)
    return 0
