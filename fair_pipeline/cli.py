"""`fair-pipeline` command line: simulate logs, run the whole pipeline, backfill, import real logs."""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from fair_pipeline.platform import settings


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from error


DEFAULT_PARTITIONS = 2  # `run` trains and audits this many newest partitions (the report's trend needs two)


def _say(message: str) -> None:
    print(f"[fair-pipeline] {message}", flush=True)


def _default_start(days: int) -> dt.date:
    """The last `days` complete UTC days, so the newest simulated day is the schedule's next partition."""
    return dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=days)


def _add_simulation_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per SimulationConfig knob (dest = the field name), defaults from the config itself."""
    from fair_pipeline.ingestion.simulator import SimulationConfig

    defaults = SimulationConfig()
    parser.add_argument("--start", type=_date, help="first day (default: `--days` days before today, UTC)")
    parser.add_argument("--days", type=int, default=7, help="number of days (default 7)")
    helps = {
        "requests_per_day": "production requests per day",
        "shuffle_share": "shuffled requests / production requests",
        "adjacent_swap_share": "adjacent-swap requests / production requests",
        "slots": "K, ranked slots per request",
        "power_eta": "eta of w_j = (1/j)^eta (with --bias-curve power)",
        "n_items": "item population size",
        "n_features": "item features f0..f{n-1} (R = f0 + f1)",
        "p_group": "P(C = 1)",
        "p_relevant_group0": "P(Y(1) = 1 | C = 0)",
        "p_relevant_group1": "P(Y(1) = 1 | C = 1)",
        "relevance_effect": "coefficient of Y(1) in R",
        "group_effect": "coefficient of C in R",
        "bias_curve": "true position bias: 1/log2(1+j) or (1/j)^eta",
        "seed": "same seed, same bytes",
        "relevance_sd": "standard deviation of the Gaussian part of R",
        "score_noise_sd": "standard deviation of the score noise s - R",
    }
    for field in dataclasses.fields(SimulationConfig):
        flag = "--items" if field.name == "n_items" else "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        kwargs = {"choices": ["log2", "power"]} if field.name == "bias_curve" else {"type": type(default)}
        parser.add_argument(flag, dest=field.name, default=default, help=helps.get(field.name, field.name), **kwargs)


def _simulation_config(args: argparse.Namespace):
    from fair_pipeline.ingestion.simulator import SimulationConfig

    return SimulationConfig(**{field.name: getattr(args, field.name) for field in dataclasses.fields(SimulationConfig)})


def _simulate(args: argparse.Namespace) -> dict[str, int]:
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing

    config = _simulation_config(args)
    start = args.start or _default_start(args.days)
    landing = settings.landing_dir()
    _say(f"simulating {args.days} day(s) from {start} into {landing} ({dataclasses.asdict(config)})")
    began = time.perf_counter()
    written = simulate_to_landing(config, landing, start, args.days, progress=_say)
    seconds = time.perf_counter() - began
    total = sum(written.values())
    _say(f"wrote {total:,} impressions ({written}) in {seconds:.1f}s = {total / seconds / 1e6:.2f}M impressions/s")
    return written


def cmd_simulate(args: argparse.Namespace) -> int:
    _simulate(args)
    return 0


def _contiguous_ranges(dates: list[str]) -> list[tuple[str, str]]:
    ranges: list[list[dt.date]] = []
    for day in map(dt.date.fromisoformat, dates):
        if ranges and day - ranges[-1][1] == dt.timedelta(days=1):
            ranges[-1][1] = day
        else:
            ranges.append([day, day])
    return [(a.isoformat(), b.isoformat()) for a, b in ranges]


def _prepare_stores() -> bool:
    from fair_pipeline import runner
    from fair_pipeline.platform.tracking import TrackingUnavailableError, ensure_experiments

    runner.ensure_dagster_home()
    try:
        ensure_experiments()  # create the MLflow store once, before any step logs to it
    except TrackingUnavailableError as error:
        _say(f"cannot use MLflow: {error}")
        return False
    return True


def _report(what: str, result, began: float) -> bool:
    from fair_pipeline import runner

    if not result.success:
        _say(f"{what}: run {result.run_id} FAILED after {time.perf_counter() - began:.0f}s:\n{runner.failure_summary(result)}")
        return False
    _say(f"{what}: run {result.run_id} succeeded in {time.perf_counter() - began:.0f}s")
    return True


def _ingest(start: str, end: str) -> bool:
    from fair_pipeline import runner

    _say(f"ingesting the logs of partitions {start}..{end} (one Dagster run)")
    began = time.perf_counter()
    return _report(f"logs {start}..{end}", runner.ingest_range(start, end), began)


def _train_and_audit(day: str) -> bool:
    from fair_pipeline import runner

    _say(f"partition {day}: position bias, EO transform, rankers, audit, selection, report (trained before {day}, "
         f"evaluated on {day})")
    began = time.perf_counter()
    return _report(f"partition {day}", runner.train_and_audit(day), began)


def _benchmarks_if_outdated() -> bool:
    from fair_pipeline import runner

    if not runner.benchmarks_outdated():
        return True
    _say("static benchmark models (Adult, COMPAS): missing or their code changed, materializing them once")
    began = time.perf_counter()
    return _report("benchmark models", runner.run_benchmarks(), began)


def _print_where(ok: bool) -> None:
    _say("results:")
    print(f"  warehouse (DuckDB): {settings.warehouse_path()}")
    print(f"  Dagster instance:   {settings.dagster_home()}")
    print(f"  MLflow store:       {settings.mlflow_tracking_uri()}")
    print(f"  reports:            {settings.reports_dir()}")
    print("  open the UI:        fair-pipeline ui   (Dagster on http://127.0.0.1:3000, MLflow on http://127.0.0.1:5000)")
    _print_report_summary()
    if not ok:
        print("  some runs failed: see the messages above and the run's event log in the UI")


def _print_report_summary() -> None:
    """The fairness findings of the newest report, on one screen."""
    import json

    from fair_pipeline.reporting.build import FINDINGS_NAME, HTML_NAME
    from fair_pipeline.reporting.latest import latest_report_dir

    report_dir = latest_report_dir(settings.reports_dir())
    findings_path = report_dir / FINDINGS_NAME
    if not findings_path.exists():
        print("  fairness report:    not built (see the run's failures above)")
        return
    data = json.loads(findings_path.read_text())
    print(f"  fairness report:    {report_dir / HTML_NAME}  (generated {data['generated_at']}; every partition's "
          f"report under {settings.reports_dir()}/<date>/, {settings.reports_dir() / 'latest'} is the newest)")
    _say("fairness findings (headlines; each section of the report lists every test):")
    # Group gaps larger than their margin δ first, then the other headlines; a significant gap within ±δ is not
    # shouted as SIGNIFICANT (the same order and counts as the report's summary).
    labels = {"gap larger than δ": "GAP > δ", "significant": "SIGNIFICANT", "not significant": "not significant",
              "within ±δ": "significant, within ±δ", "equivalent": "equivalent within ±δ", "inconclusive": "inconclusive",
              "not estimable": "not estimable", "info": "fact"}
    headlines = [item for item in data["findings"] if item.get("headline", True)]
    for status in labels:
        for item in headlines:
            if item["status"] == status:
                print(f"  [{labels[status]}] {item['section']}: {item['text']}")
    if data.get("verdict_summary"):
        print(f"  {data['verdict_summary']} (δ = practical margin per metric)")
    tests = [item for item in data["findings"] if item["status"] in ("significant", "not significant")]
    if tests:
        significant = sum(item["status"] == "significant" for item in tests)
        print(f"  {len(tests)} other tests in the report: {significant} significant at the 5% level, "
              f"{len(tests) - significant} not significant")
    if data["missing"]:
        names = ", ".join(f"{m['section']} ({m['stage']})" for m in data["missing"])
        print(f"  not yet available (stage never ran): {names}")


def cmd_run(args: argparse.Namespace) -> int:
    from fair_pipeline import runner

    settings.home().mkdir(parents=True, exist_ok=True)
    if not runner.landed_partitions() or args.start:
        if args.no_simulate:
            _say(f"no landing files under {settings.landing_dir()} and --no-simulate given")
            return 2
        _simulate(args)
    dates = runner.landed_partitions()
    if not _prepare_stores():
        return 1
    ok = True
    for start, end in _contiguous_ranges(dates):
        ok = _ingest(start, end) and ok
    ok = _benchmarks_if_outdated() and ok
    days, _ = runner.trainable(dates[-args.partitions:], dates)
    if not days:
        _say(f"no partition to train and audit: partition D trains on the days before D, and the logs hold only "
             f"{', '.join(dates)}")
        ok = False
    for day in days if ok else []:
        ok = _train_and_audit(day) and ok
    _print_where(ok)
    return 0 if ok else 1


def _backfill_problem(start: dt.date, end: dt.date) -> str | None:
    """Why a backfill of start..end cannot run, in one line, or None."""
    from fair_pipeline.ingestion.landing import missing_sources

    if end < start:
        return f"--end {end} is before --start {start}"
    day = start
    while day <= end:
        missing = missing_sources(settings.landing_dir(), day)
        if missing:
            return (f"no landing files for partition {day} ({', '.join(missing)}) under {settings.landing_dir()}: "
                    "simulate or import logs first (fair-pipeline simulate --start ... --days ...)")
        day += dt.timedelta(days=1)
    return None


def cmd_backfill(args: argparse.Namespace) -> int:
    from fair_pipeline import runner

    problem = _backfill_problem(args.start, args.end)
    if problem:
        _say(f"error: {problem}")
        return 2
    if not _prepare_stores():
        return 1
    start, end = args.start.isoformat(), args.end.isoformat()
    if not _ingest(start, end):
        return 1
    days = [d for d in runner.landed_partitions() if start <= d <= end]
    trainable, first = runner.trainable(days, runner.landed_partitions())
    for day in first:
        _say(f"partition {day}: no earlier day to train on (partition D trains on the days before D): only its logs "
             "were ingested")
    ok = True
    for day in trainable:
        ok = _train_and_audit(day) and ok
    if ok:
        _say(f"backfilled {start}..{end}: registry aliases move only for the newest partition with data "
             "(fair-pipeline promote --partition D moves them explicitly)")
    return 0 if ok else 1


def cmd_promote(args: argparse.Namespace) -> int:
    from fair_pipeline.selection.promotion import PromotionError, promote

    if not _prepare_stores():
        return 1
    try:
        result = promote(args.partition, force=args.force)
    except PromotionError as error:
        _say(f"error: {error}")
        return 2
    _say(result)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    from fair_pipeline.ui import serve

    settings.home().mkdir(parents=True, exist_ok=True)
    return serve(args.dagster_port, args.mlflow_port, _say, host=args.host)


def cmd_import_open_bandit(args: argparse.Namespace) -> int:
    from fair_pipeline.datasets.open_bandit import write_open_bandit_landing

    landing = settings.landing_dir()
    summary = write_open_bandit_landing(landing)
    for source in summary.sources.values():
        _say(
            f"{source.log} -> {source.source} ({source.policy}): {source.rows:,} rows, {source.requests:,} requests, "
            f"{source.clicks} clicks over {len(source.dates)} days {source.dates[0]}..{source.dates[-1]}"
        )
    _say(f"{summary.n_items} items; landing files under {landing}. Next: fair-pipeline run --no-simulate")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fair-pipeline",
        description="End-to-end fair ranking on Dagster + DuckDB + MLflow. Every file lives under "
        f"${settings.HOME_ENV} (default ./data).",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser("simulate", help="write simulated click logs (Nandy et al. 2.2) as landing files")
    _add_simulation_arguments(simulate)
    simulate.set_defaults(func=cmd_simulate)

    run = commands.add_parser("run", help="the main job: simulate a week if no logs are present, then materialize everything")
    _add_simulation_arguments(run)
    run.add_argument("--no-simulate", action="store_true", help="fail instead of simulating when no logs are present")
    run.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                     help="train, audit and report the newest N daily partitions (each trained on the days before "
                     f"it; default {DEFAULT_PARTITIONS})")
    run.set_defaults(func=cmd_run)

    backfill = commands.add_parser(
        "backfill", help="ingest a date range of landing files (one run), then train, audit and report each day of it "
        "(one run per partition); registry aliases never move for an older partition")
    backfill.add_argument("--start", type=_date, required=True, help="first partition (YYYY-MM-DD)")
    backfill.add_argument("--end", type=_date, required=True, help="last partition (YYYY-MM-DD), inclusive")
    backfill.set_defaults(func=cmd_backfill)

    promote = commands.add_parser(
        "promote", help="move fair-ranker@champion to the model selected for a partition (refuses an older partition "
        "than the newest with data unless --force)")
    promote.add_argument("--partition", type=_date, required=True, help="the model_selection partition (YYYY-MM-DD)")
    promote.add_argument("--force", action="store_true", help="promote even if a newer partition has data (a rollback)")
    promote.set_defaults(func=cmd_promote)

    ui = commands.add_parser("ui", help="start the Dagster UI (with the daemon) and the MLflow UI; Ctrl-C stops both")
    ui.add_argument("--dagster-port", type=int, default=3000, help="Dagster webserver port (default 3000)")
    ui.add_argument("--mlflow-port", type=int, default=5000, help="MLflow UI port (default 5000)")
    ui.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, this machine only)")
    ui.set_defaults(func=cmd_ui)

    obd = commands.add_parser("import-open-bandit", help="write the shipped Open Bandit sample as landing files")
    obd.set_defaults(func=cmd_import_open_bandit)

    from fair_pipeline.audit.files import add_audit_arguments, run_audit
    from fair_pipeline.selection.session import add_elicit_arguments, run_elicit

    audit = commands.add_parser("audit", help="fairness audit of any Parquet/CSV file: partial AUCs, xAUC, pairwise accuracies")
    add_audit_arguments(audit)
    audit.set_defaults(func=run_audit)

    elicit = commands.add_parser("elicit", help="elicit a fairness metric by answering pairwise comparisons (resumable)")
    add_elicit_arguments(elicit)
    elicit.set_defaults(func=run_elicit)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as error:
        _say(f"error: {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
