"""`fair-pipeline backfill --start D1 --end D2`: ingest a range of landed days in one run, then train, audit and
report each day of it that has an earlier day to train on, one run per partition."""
from __future__ import annotations

import argparse
import datetime as dt

from fair_pipeline.commands.arguments import add_engine_arguments, add_verbose_flag, apply_engine, date
from fair_pipeline.commands.console import say
from fair_pipeline.commands.jobs import JobRuns, prepare_stores
from fair_pipeline.commands.run import changed_landing, contiguous_ranges, landed, say_unread_entries



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", type=date, required=True, help="first partition (YYYY-MM-DD), landed already")
    parser.add_argument("--end", type=date, required=True, help="last partition (YYYY-MM-DD), inclusive")
    add_engine_arguments(parser)
    add_verbose_flag(parser)


def backfill_problem(start: dt.date, end: dt.date) -> str | None:
    """Why a backfill of start..end cannot run, in one line, or None."""
    from fair_pipeline.ingestion import landing_source

    if end < start:
        return f"--end {end} is before --start {start}"
    source = landing_source.configured()
    day = start
    while day <= end:
        missing = source.missing_sources(day)
        if missing:
            return (f"no landing files for partition {day} ({', '.join(missing)}) under {source.location}: "
                    "simulate or import logs first (fair-pipeline simulate --start ... --days ...)")
        day += dt.timedelta(days=1)
    return None


def run(args: argparse.Namespace) -> int:
    apply_engine(args)
    say_unread_entries()
    problem = backfill_problem(args.start, args.end)
    if problem:
        say(f"error: {problem}")
        return 2
    landed()  # the definitions' first partition, for a landing URI (`run.landed`)
    from fair_pipeline import runner

    if not prepare_stores(args.verbose):
        return 1
    jobs = JobRuns(args.verbose)
    start, end = args.start.isoformat(), args.end.isoformat()
    days = [d for d in runner.landed_partitions() if start <= d <= end]
    changed = changed_landing(days)
    if not changed:
        say(f"logs {start}..{end}: unchanged since their last ingestion (landing fingerprints): not ingested again")
    for first_day, last_day in contiguous_ranges(changed):
        if not jobs.ingest(first_day, last_day):
            return 1
    trainable, first = runner.trainable(days, runner.landed_partitions())
    for day in first:
        say(f"partition {day}: not enough data to train on in its window (the {runner.window_days()} days before "
            "it): only its logs were ingested")
    ok = True
    for day in trainable:
        if runner.up_to_date(day):
            say(f"partition {day}: up to date (nothing it reads changed since it was built): not run again")
            continue
        ok = jobs.train_and_audit(day) and ok
    if ok:
        say(f"backfilled {start}..{end}: registry aliases move only for the newest partition with data "
            "(fair-pipeline promote --partition D moves them explicitly)")
    return 0 if ok else 1
