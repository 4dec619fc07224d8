"""`fair-pipeline run`: the main job. Simulate the newest day and its training window if no logs are landed, ingest
every landed range, then train, audit and report the newest partitions, one run each (and, with --benchmarks, fit
the static reference models if their code changed)."""
from __future__ import annotations

import argparse
import datetime as dt
import os

from fair_pipeline.commands.arguments import (add_engine_arguments, add_simulation_arguments, add_verbose_flag,
                                             apply_engine, changed_simulation_flags)
from fair_pipeline.commands.console import say
from fair_pipeline.commands.jobs import JobRuns, prepare_stores
from fair_pipeline.commands.results import print_where
from fair_pipeline.commands.simulate import simulate
from fair_pipeline.platform import settings


# `run` trains and audits the newest partition; each more costs about as much as the whole job's training
# (`--partitions N`, or `backfill`, for the report's trend over several days).
DEFAULT_PARTITIONS = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_simulation_arguments(parser)
    add_engine_arguments(parser)
    parser.add_argument("--no-simulate", action="store_true",
                        help="never simulate: materialize the landed partitions (those in --start/--days if given), "
                             "fail if there are none")
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                        help="train, audit and report the newest N daily partitions (each trained on the days before it)")
    parser.add_argument("--benchmarks", action="store_true",
                        help="also fit the static benchmark models (Adult, COMPAS) if missing or their code changed, "
                             "after the daily partitions (a few minutes; the UI's daemon fits them in the background)")
    add_verbose_flag(parser)


def contiguous_ranges(dates: list[str]) -> list[tuple[str, str]]:
    """(first, last) of each run of consecutive days in the sorted `dates`."""
    ranges: list[list[dt.date]] = []
    for day in map(dt.date.fromisoformat, dates):
        if ranges and day - ranges[-1][1] == dt.timedelta(days=1):
            ranges[-1][1] = day
        else:
            ranges.append([day, day])
    return [(a.isoformat(), b.isoformat()) for a, b in ranges]


def partitions_to_run(args: argparse.Namespace, landed: list[str]) -> list[str] | None:
    """With --no-simulate, the landed partitions to materialize (all of them, or those in --start/--days);
    None, after saying why, when there are none."""
    if not landed:
        say(f"no landing files under {settings.landing_location()} and --no-simulate given; "
            "write some first (fair-pipeline simulate, or fair-pipeline import-open-bandit)")
        return None
    if args.start is None:
        return landed
    wanted = {(args.start + dt.timedelta(days=offset)).isoformat() for offset in range(args.days)}
    chosen = [day for day in landed if day in wanted]
    if not chosen:
        end = args.start + dt.timedelta(days=args.days - 1)
        say(f"no landed partition in {args.start}..{end} under {settings.landing_location()} and --no-simulate given; "
            f"{len(landed)} partitions are landed: {landed[0]}..{landed[-1]}")
        return None
    return chosen


def changed_landing(dates: list[str]) -> list[str]:
    """The landed days to ingest: those whose landing fingerprint changed since their last ingestion (or never
    ingested); with only the item catalogues changed, the newest day (its ingestion loads the catalogues too)."""
    from fair_pipeline import runner

    changed, catalogue = runner.landing_changes(dates)
    return changed or (dates[-1:] if catalogue else [])


def landed() -> list[str]:
    """The days landed for every source (read without loading the definitions; a landing URI on the spark engine is
    listed through Spark). For such a landing the definitions' first partition is the first day listed here
    ($FAIR_PIPELINE_START_DATE, unless set), since loading them lists nothing."""
    from fair_pipeline.ingestion import landing_source

    source = landing_source.configured()
    days = source.complete_days()
    if source.through_spark and days:
        os.environ.setdefault(settings.START_DATE_ENV, days[0])
    return days


def say_unread_entries() -> None:
    """Name what the run will not read in a folder landing (a URI's listing names what it refuses when it loads)."""
    from fair_pipeline.commands.unread import say_unread
    from fair_pipeline.ingestion import landing_source

    source = landing_source.configured()
    if not source.through_spark:
        say_unread(source.path)


def run(args: argparse.Namespace) -> int:
    import time

    began = time.time()
    apply_engine(args)
    if args.partitions < 1:
        say(f"error: --partitions {args.partitions} must be at least 1")
        return 2
    settings.home().mkdir(parents=True, exist_ok=True)
    if args.no_simulate:
        dates = partitions_to_run(args, landed())
        if dates is None:
            return 2
    else:
        ignored = changed_simulation_flags(args) if landed() and not args.start else []
        if ignored:  # the landed logs would be used as they are, and the flags would change nothing
            say(f"error: {', '.join(ignored)} given, but logs already landed under {settings.landing_location()} and no "
                "--start: nothing would be simulated. Pass --start to simulate new days with these settings, or "
                "drop the flags (or use --no-simulate) to run on the landed logs")
            return 2
        if not landed() or args.start:
            simulate(args)
        dates = landed()
    # Loaded only now: the definitions' partitions start at the first landed day, simulated ones included.
    from fair_pipeline import runner

    say_unread_entries()

    if not prepare_stores(args.verbose):
        return 1
    jobs = JobRuns(args.verbose)
    ok = True
    to_ingest = changed_landing(dates)
    for start, end in contiguous_ranges(to_ingest):
        ok = jobs.ingest(start, end) and ok
    benchmarks = args.benchmarks and runner.benchmarks_outdated()
    days, _ = runner.trainable(dates[-args.partitions:], runner.landed_partitions())
    if not days:
        say(f"no partition to train and audit: partition D trains on the {runner.window_days()} days before D, and "
            f"the logs hold only {', '.join(dates)}")
        ok = False
    stale = [day for day in days if not runner.up_to_date(day)] if ok else []
    if ok and not (to_ingest or benchmarks or stale):
        say(f"nothing new: the {len(dates)} landed days and the item catalogues are as last ingested and partition(s) "
            f"{', '.join(days)} are up to date, so nothing was materialized (newest report: {settings.reports_dir()})")
        return 0
    for day in stale:
        ok = jobs.train_and_audit(day) and ok
    if args.benchmarks:  # after the day's report: a new home's first report never waits for them
        ok = jobs.reference_models_if_outdated() and ok
    print_where(ok, args.verbose, jobs.failures, since=began)
    return 0 if ok else 1
