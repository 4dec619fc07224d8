"""`fair-pipeline` command line: simulate logs, run the whole pipeline, backfill, import real logs.

Only argparse and the settings module are imported up front: each command's arguments and code (numpy,
DuckDB, Dagster, MLflow, scikit-learn) load when that command is chosen, so `fair-pipeline --help` is quick.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import os
import sys
import time
from collections.abc import Callable, Sequence

from fair_pipeline import __version__
from fair_pipeline.platform import settings


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from error


# `run` trains and audits the newest partition; each more costs about as much as the whole job's training
# (`--partitions N`, or `backfill`, for the report's trend over several days).
DEFAULT_PARTITIONS = 1


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
    parser.add_argument("--days", type=int, default=7, help="number of days")
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


def _quiet_libraries() -> None:
    """Without --verbose, MLflow's own INFO lines (store creation, migrations) stay out of the terminal."""
    import logging

    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # read when mlflow is first imported
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _prepare_stores(verbose: bool = False) -> bool:
    from fair_pipeline import runner
    from fair_pipeline.platform import run_recovery
    from fair_pipeline.platform.tracking import TrackingUnavailableError, ensure_experiments

    run_recovery.begin_command()
    if not verbose:
        _quiet_libraries()
    runner.ensure_dagster_home()
    try:
        ensure_experiments()  # create the MLflow store once, before any step logs to it
    except TrackingUnavailableError as error:
        _say(f"cannot use MLflow: {error}")
        return False
    return True


def _display(verbose: bool) -> dict:
    """How a run shows itself: one progress line per step, Dagster's console logger only with --verbose."""
    from fair_pipeline.platform.progress import progress_logger

    return {"progress": progress_logger(), "verbose": verbose}


_FAILURES: list[str] = []  # one cause per failed run of this command, repeated as its last line


def _report(what: str, result, began: float) -> bool:
    from fair_pipeline import runner
    from fair_pipeline.platform import run_recovery

    if run_recovery.interrupted():  # Ctrl-C or SIGTERM during this job: start no other
        _say(f"{what}: interrupted (SIGINT/SIGTERM): not starting another run")
        raise SystemExit(130)
    if not result.success:
        from fair_pipeline.platform.disk_space import disk_full_line

        summary = runner.failure_summary(result)
        _say(f"{what}: run {result.run_id} FAILED after {time.perf_counter() - began:.0f}s:\n{summary}")
        disk_full = disk_full_line(settings.home(), summary)
        if disk_full:  # the step's own error may not say so (SQLite: "disk I/O error")
            _say(f"failed: {disk_full}")
        _FAILURES.append(f"{what}: {disk_full or summary.splitlines()[0]}")
        return False
    _say(f"{what}: run {result.run_id} succeeded in {time.perf_counter() - began:.0f}s")
    return True


def _ingest(start: str, end: str, verbose: bool = False) -> bool:
    from fair_pipeline import runner

    _say(f"ingesting the logs of partitions {start}..{end} (one Dagster run)")
    began = time.perf_counter()
    return _report(f"logs {start}..{end}", runner.ingest_range(start, end, **_display(verbose)), began)


def _train_and_audit(day: str, verbose: bool = False) -> bool:
    from fair_pipeline import runner

    _say(f"partition {day}: position bias, EO transform, rankers, audit, selection, report (trained before {day}, "
         f"evaluated on {day})")
    began = time.perf_counter()
    return _report(f"partition {day}", runner.train_and_audit(day, **_display(verbose)), began)


def _benchmarks_if_outdated(verbose: bool = False) -> bool:
    from fair_pipeline import runner

    if not runner.benchmarks_outdated():
        return True
    _say("static benchmark models (Adult, COMPAS): missing or their code changed, materializing them once")
    began = time.perf_counter()
    return _report("benchmark models", runner.run_benchmarks(**_display(verbose)), began)


def _ui_hint() -> str:
    home = f"--home {settings.home()} " if os.environ.get(settings.HOME_ENV) else ""
    return f"fair-pipeline {home}ui   (Dagster on http://127.0.0.1:{DAGSTER_PORT}, MLflow on {settings.mlflow_ui_url()})"


def _print_where(ok: bool, verbose: bool = False, since: float | None = None) -> None:
    """Where the results are and what was found: one screen, or everything with --verbose. A report older than
    `since` (the command's start, a time.time()) was not built by this command and is never shown as its result."""
    if verbose:
        _say("results:")
        print(f"  warehouse (DuckDB): {settings.warehouse_path()}")
        print(f"  Dagster instance:   {settings.dagster_home()}")
        print(f"  MLflow store:       {settings.mlflow_tracking_uri()}")
        print(f"  reports:            {settings.reports_dir()}")
    _print_report_summary(verbose, since)
    print(f"  open the UIs:       {_ui_hint()}")
    if not ok:
        print("  some runs failed: see the messages above and the run's event log in the UI")
        if _FAILURES:
            _say(f"failed: {_FAILURES[0]}")


def _print_report_summary(verbose: bool = False, since: float | None = None) -> None:
    """The fairness findings of the newest report (reporting.summary decides what a quiet summary shows), if this
    command built it (see `_print_where`)."""
    import json

    from fair_pipeline.reporting.build import FINDINGS_NAME, HTML_NAME
    from fair_pipeline.reporting.latest import latest_report_dir
    from fair_pipeline.reporting.summary import summary_lines

    report_dir = latest_report_dir(settings.reports_dir())
    findings_path = report_dir / FINDINGS_NAME
    if not findings_path.exists():
        print("  fairness report:    not built (see the run's failures above)")
        return
    data = json.loads(findings_path.read_text())
    if since is not None and findings_path.stat().st_mtime < since:
        print(f"  fairness report:    NOT updated by this command (see the run's failures above); the newest one is "
              f"from an earlier run (generated {data['generated_at']}): {report_dir / HTML_NAME}")
        return
    print(f"  fairness report:    {report_dir / HTML_NAME}  (generated {data['generated_at']})")
    if verbose:
        print(f"  every partition's report under {settings.reports_dir()}/<date>/, "
              f"{settings.reports_dir() / 'latest'} is the newest")
    _say("fairness findings (headlines; each section of the report lists every test):")
    for line in summary_lines(data, verbose):
        print(line)


def _window(start: dt.date, days: int) -> set[str]:
    return {(start + dt.timedelta(days=offset)).isoformat() for offset in range(days)}


def _partitions_to_run(args: argparse.Namespace, landed: list[str]) -> list[str] | None:
    """With --no-simulate, the landed partitions to materialize (all of them, or those in --start/--days);
    None, after saying why, when there are none."""
    if not landed:
        _say(f"no landing files under {settings.landing_dir()} and --no-simulate given; "
             "write some first (fair-pipeline simulate, or fair-pipeline import-open-bandit)")
        return None
    if args.start is None:
        return landed
    wanted = _window(args.start, args.days)
    chosen = [day for day in landed if day in wanted]
    if not chosen:
        end = args.start + dt.timedelta(days=args.days - 1)
        _say(f"no landed partition in {args.start}..{end} under {settings.landing_dir()} and --no-simulate given; "
             f"{len(landed)} partitions are landed: {landed[0]}..{landed[-1]}")
        return None
    return chosen


def cmd_run(args: argparse.Namespace) -> int:
    from fair_pipeline import runner

    began = time.time()
    if args.partitions < 1:
        _say(f"error: --partitions {args.partitions} must be at least 1")
        return 2
    settings.home().mkdir(parents=True, exist_ok=True)
    if args.no_simulate:
        dates = _partitions_to_run(args, runner.landed_partitions())
        if dates is None:
            return 2
    else:
        if not runner.landed_partitions() or args.start:
            _simulate(args)
        dates = runner.landed_partitions()
    if not _prepare_stores(args.verbose):
        return 1
    ok = True
    for start, end in _contiguous_ranges(dates):
        ok = _ingest(start, end, args.verbose) and ok
    ok = _benchmarks_if_outdated(args.verbose) and ok
    days, _ = runner.trainable(dates[-args.partitions:], runner.landed_partitions())
    if not days:
        _say(f"no partition to train and audit: partition D trains on the days before D, and the logs hold only "
             f"{', '.join(dates)}")
        ok = False
    for day in days if ok else []:
        ok = _train_and_audit(day, args.verbose) and ok
    _print_where(ok, args.verbose, since=began)
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
    if not _prepare_stores(args.verbose):
        return 1
    start, end = args.start.isoformat(), args.end.isoformat()
    if not _ingest(start, end, args.verbose):
        return 1
    days = [d for d in runner.landed_partitions() if start <= d <= end]
    trainable, first = runner.trainable(days, runner.landed_partitions())
    for day in first:
        _say(f"partition {day}: no earlier day to train on (partition D trains on the days before D): only its logs "
             "were ingested")
    ok = True
    for day in trainable:
        ok = _train_and_audit(day, args.verbose) and ok
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


DAGSTER_PORT = 3000  # fair_pipeline.ui's default (not imported: it loads MLflow)


class _DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or any(action.default is none for none in (None, False, argparse.SUPPRESS))
                or "default" in text.lower()):
            return text
        return f"{text} (default: %(default)s)"


class _LazyCommands(argparse._SubParsersAction):
    """Sub-commands whose arguments are added only when the command is chosen (their modules import
    numpy, DuckDB, ...); `populate_all` adds them all (tests, and `help` of every command)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._populate: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def add_command(self, name: str, populate: Callable[[argparse.ArgumentParser], None], **kwargs) -> argparse.ArgumentParser:
        parser = self.add_parser(name, formatter_class=_DefaultsFormatter, **kwargs)
        self._populate[name] = populate
        return parser

    def populate(self, name: str) -> argparse.ArgumentParser:
        parser = self._name_parser_map[name]
        if name in self._populate:
            self._populate.pop(name)(parser)
        return parser

    def populate_all(self) -> dict[str, argparse.ArgumentParser]:
        return {name: self.populate(name) for name in list(self._name_parser_map)}

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] in self._name_parser_map:
            self.populate(values[0])
        super().__call__(parser, namespace, values, option_string)


def _verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print Dagster's and MLflow's log lines and every headline finding")


def _simulate_arguments(parser: argparse.ArgumentParser) -> None:
    _add_simulation_arguments(parser)
    parser.set_defaults(func=cmd_simulate)


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=list(settings.ENGINES), default=None,
                        help="where the SQL models run and the later stages read marts (ingestion and the small result "
                             f"stores stay in DuckDB; docs/spark.md) (default: ${settings.ENGINE_ENV}, else "
                             f"{settings.DEFAULT_ENGINE})")
    parser.add_argument("--spark-master", metavar="URL", default=None,
                        help=f"Spark master URL with --engine spark (default: ${settings.SPARK_MASTER_ENV}, else "
                             f"{settings.DEFAULT_SPARK_MASTER})")


def _apply_engine(args: argparse.Namespace) -> None:
    """--engine / --spark-master for this command's runs (restored when it returns); checked before any run."""
    from fair_pipeline.platform.engines.select import require_engine

    if not hasattr(args, "engine"):  # a command that runs no pipeline job
        return
    if args.engine:
        os.environ[settings.ENGINE_ENV] = args.engine
    if args.spark_master:
        os.environ[settings.SPARK_MASTER_ENV] = args.spark_master
    require_engine(settings.engine())


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    _add_simulation_arguments(parser)
    _engine_arguments(parser)
    parser.add_argument("--no-simulate", action="store_true",
                        help="never simulate: materialize the landed partitions (those in --start/--days if given), "
                             "fail if there are none")
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                        help="train, audit and report the newest N daily partitions (each trained on the days before it)")
    _verbose_flag(parser)
    parser.set_defaults(func=cmd_run)


def _backfill_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", type=_date, required=True, help="first partition (YYYY-MM-DD), landed already")
    parser.add_argument("--end", type=_date, required=True, help="last partition (YYYY-MM-DD), inclusive")
    _engine_arguments(parser)
    _verbose_flag(parser)
    parser.set_defaults(func=cmd_backfill)


def _promote_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", type=_date, required=True, help="the model_selection partition (YYYY-MM-DD)")
    parser.add_argument("--force", action="store_true", help="promote even if a newer partition has data (a rollback)")
    parser.set_defaults(func=cmd_promote)


def _ui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dagster-port", type=int, default=DAGSTER_PORT, help="Dagster webserver port")
    parser.add_argument("--mlflow-port", type=int, default=settings.mlflow_ui_port(),
                        help=f"MLflow UI port; the default is the port of ${settings.MLFLOW_UI_URL_ENV} (the MLflow "
                             f"URL that Dagster's metadata links to), else {settings.DEFAULT_MLFLOW_UI_PORT}: "
                             "%(default)s")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (127.0.0.1: this machine only)")
    parser.set_defaults(func=cmd_ui)


def _open_bandit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=cmd_import_open_bandit)


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    from fair_pipeline.audit.files import add_audit_arguments, run_audit

    add_audit_arguments(parser)
    parser.set_defaults(func=run_audit)


def _elicit_arguments(parser: argparse.ArgumentParser) -> None:
    from fair_pipeline.selection.elicit_arguments import add_elicit_arguments

    add_elicit_arguments(parser)
    parser.set_defaults(func=_run_elicit)


def _run_elicit(args: argparse.Namespace) -> int:
    from fair_pipeline.selection.session import run_elicit  # the solvers (scipy, pandas): not for --help

    return run_elicit(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fair-pipeline",
        description="End-to-end fair ranking on Dagster + DuckDB + MLflow. Every file lives under --home "
        f"(${settings.HOME_ENV}, default ./data). `fair-pipeline COMMAND --help` lists a command's options.",
        formatter_class=_DefaultsFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--home", metavar="DIR",
                        help=f"root of every generated file; sets ${settings.HOME_ENV} (default: ${settings.HOME_ENV}, "
                             "else ./data)")
    commands = parser.add_subparsers(dest="command", required=True, action=_LazyCommands, metavar="COMMAND")
    commands.add_command("simulate", _simulate_arguments,
                         help="write simulated click logs (Nandy et al. 2.2) as landing files")
    commands.add_command("run", _run_arguments,
                         help="the main job: simulate a week if no logs are present, then materialize everything")
    commands.add_command("backfill", _backfill_arguments,
                         help="ingest a date range of landing files (one run), then train, audit and report each day of "
                              "it (one run per partition); registry aliases never move for an older partition")
    commands.add_command("promote", _promote_arguments,
                         help="move fair-ranker@champion to the model selected for a partition (refuses an older "
                              "partition than the newest with data unless --force)")
    commands.add_command("ui", _ui_arguments,
                         help="start the Dagster UI (with the daemon) and the MLflow UI; Ctrl-C stops both")
    commands.add_command("import-open-bandit", _open_bandit_arguments,
                         help="write the shipped Open Bandit sample as landing files")
    commands.add_command("audit", _audit_arguments,
                         help="fairness audit of any Parquet/CSV file: partial AUCs, xAUC, pairwise accuracies")
    commands.add_command("elicit", _elicit_arguments,
                         help="elicit a fairness metric by answering pairwise comparisons (resumable)")
    return parser


def _cause(error: BaseException) -> str:
    """The innermost error's type and first line: what to fix."""
    while error.__cause__ is not None:
        error = error.__cause__
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# What a command sets for itself and the processes it starts; restored when it returns, so a command run
# in-process (tests, notebooks) leaves no --home, DAGSTER_HOME or quiet MLflow logging behind for later ones.
_COMMAND_ENVIRONMENT = (settings.HOME_ENV, "DAGSTER_HOME", "MLFLOW_LOGGING_LEVEL", settings.ENGINE_ENV,
                        settings.SPARK_MASTER_ENV)
_COMMAND_LOGGERS = ("mlflow", "alembic")


@contextlib.contextmanager
def _restored_environment():
    import logging

    levels = {name: logging.getLogger(name).level for name in _COMMAND_LOGGERS}
    try:
        with settings.restored_variables(*_COMMAND_ENVIRONMENT):
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _FAILURES.clear()
    with _restored_environment():
        return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    if args.home:
        os.environ[settings.HOME_ENV] = args.home
    try:
        _apply_engine(args)
        return args.func(args)
    except (ValueError, FileNotFoundError) as error:
        _say(f"error: {error}")
        return 2
    except Exception as error:  # noqa: BLE001 - the traceback first, then one line naming the cause
        import traceback

        from fair_pipeline.platform.disk_space import disk_full_line

        traceback.print_exc()
        disk_full = disk_full_line(settings.home(), error)
        _say(f"failed: {disk_full} ({_cause(error)})" if disk_full else f"failed: {_cause(error)}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
