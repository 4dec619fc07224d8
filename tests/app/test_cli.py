"""The `fair-pipeline` command line as a newcomer meets it: help, --version, --home, messages, summary, progress."""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fair_pipeline.commands import arguments, jobs, main, results
from fair_pipeline.commands import run as run_command
from fair_pipeline.commands import simulate as simulate_command
from fair_pipeline.commands.parser import COMMANDS, command_module
from fair_pipeline.platform import settings

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("dagster", "mlflow", "duckdb", "pandas", "numpy", "sklearn", "scipy")
SLOWEST = ("dagster", "mlflow", "sklearn")  # seconds each; a command's own help may load numpy
# (scipy.stats, half a second, is kept out of the audit's imports: its normal functions come from scipy.special)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parsers = {name: argparse.ArgumentParser(prog=f"fair-pipeline {name}") for name in COMMANDS}
    for name, parser in parsers.items():
        command_module(name).add_arguments(parser)
    return parsers


@pytest.mark.parametrize("argv, forbidden", [(["--help"], HEAVY), (["--version"], HEAVY), (["run", "--help"], (*SLOWEST, "duckdb", "pandas", "pyarrow")),
                                             (["simulate", "--help"], (*SLOWEST, "duckdb", "pandas", "pyarrow")),
                                             (["backfill", "--help"], HEAVY),
                                             (["audit", "--help"], (*SLOWEST, "scipy.stats")),
                                             (["elicit", "--help"], (*SLOWEST, "scipy", "pandas"))])
def test_help_and_version_import_no_heavy_library(argv, forbidden):
    # `fair-pipeline --help` took 7-10 s because it imported everything; assert on what is imported, not on time.
    code = ("import sys\nfrom fair_pipeline.commands import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted({{n for m in sys.modules for n in (m, m.split('.')[0])}} & {set(forbidden)!r}))")
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "LOADED []"


def test_every_option_with_a_default_shows_it_in_its_help():
    formatter = arguments.DefaultsFormatter("x")
    checked = 0
    for name, parser in _subcommands().items():
        for action in parser._actions:
            if not action.option_strings or action.default in (None, argparse.SUPPRESS) or action.default is False:
                continue
            text = formatter._get_help_string(action)
            assert "default" in text.lower(), f"{name} {action.option_strings[0]}: {text!r}"
            checked += 1
    assert checked >= 30  # simulate and run (16 knobs each + --days), ui, audit, elicit


def test_run_help_shows_the_simulation_defaults(capsys):
    from fair_pipeline.ingestion.simulator import SimulationConfig

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    defaults = SimulationConfig()
    assert f"production requests per day (default: {defaults.requests_per_day})" in out
    assert f"K, ranked slots per request (default: {defaults.slots})" in out
    assert f"same seed, same bytes (default: {defaults.seed})" in out  # a default of 0 is still shown


def test_backfill_dates_and_audit_confidence_have_help():
    commands = _subcommands()
    options = {(name, opt): action for name in ("backfill", "audit") for action in commands[name]._actions
               for opt in action.option_strings}
    for key in [("backfill", "--start"), ("backfill", "--end"), ("audit", "--confidence")]:
        assert options[key].help, key
    assert "(default: 0.95)" in arguments.DefaultsFormatter("x")._expand_help(options[("audit", "--confidence")])


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"fair-pipeline {version('fair_pipeline')}"


def test_home_sets_the_environment_and_every_file_lands_under_it(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path / "elsewhere"))
    home = tmp_path / "mine"
    assert main(["--home", str(home), "simulate", "--start", "2026-01-01", "--days", "2", "--requests-per-day", "20",
                     "--items", "50", "--slots", "5"]) == 0
    assert os.environ[settings.HOME_ENV] == str(tmp_path / "elsewhere")  # the command's own, not left behind
    landed = sorted(p.relative_to(home).parts[0] for p in home.rglob("*") if p.is_file())
    assert landed and set(landed) == {"landing"}
    assert not (tmp_path / "elsewhere").exists()


def test_a_command_run_in_process_leaves_no_environment_behind(tmp_path, monkeypatch):
    """A quiet command sets MLFLOW_LOGGING_LEVEL for the processes it starts; a later --verbose command in
    another process must still see MLflow's INFO lines (a leaked WARNING hid them from the kill tests)."""
    import logging

    for name in ("MLFLOW_LOGGING_LEVEL", "DAGSTER_HOME", settings.HOME_ENV):
        monkeypatch.delenv(name, raising=False)
    loggers = ("mlflow", "mlflow.store.db.utils")
    levels = [logging.getLogger(name).level for name in loggers]
    assert main(["--home", str(tmp_path), "elicit", "--list"]) == 0
    assert main(["--home", str(tmp_path), "promote", "--partition", "2026-01-01"]) != 0
    assert {name: os.environ.get(name) for name in ("MLFLOW_LOGGING_LEVEL", "DAGSTER_HOME", settings.HOME_ENV)} == {
        "MLFLOW_LOGGING_LEVEL": None, "DAGSTER_HOME": None, settings.HOME_ENV: None}
    assert [logging.getLogger(name).level for name in loggers] == levels


def test_elicit_list_on_the_default_database_says_there_is_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    assert main(["elicit", "--list"]) == 0
    assert capsys.readouterr().out.strip() == (f"no elicitation sessions in {tmp_path / 'elicitation.duckdb'}; "
                                               "start one with `fair-pipeline elicit`")


def _args(start: str | None, days: int = 3) -> argparse.Namespace:
    return argparse.Namespace(start=None if start is None else arguments.date(start), days=days)


LANDED = ["2019-11-24", "2019-11-25", "2019-11-26", "2019-11-27", "2019-11-28", "2019-11-29", "2019-11-30"]


def test_no_simulate_runs_the_landed_partitions_inside_start_and_days(capsys):
    # `run --no-simulate --start 2019-11-24 --days 3` said "no landing files ..." although 7 partitions were landed.
    assert run_command.partitions_to_run(_args("2019-11-24"), LANDED) == ["2019-11-24", "2019-11-25", "2019-11-26"]
    assert run_command.partitions_to_run(_args("2019-11-29", days=5), LANDED) == ["2019-11-29", "2019-11-30"]
    assert run_command.partitions_to_run(_args(None), LANDED) == LANDED
    assert capsys.readouterr().out == ""


def test_no_simulate_outside_the_landed_dates_names_what_is_landed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    assert run_command.partitions_to_run(_args("2020-01-01"), LANDED) is None
    out = capsys.readouterr().out
    assert "no landed partition in 2020-01-01..2020-01-03" in out
    assert "7 partitions are landed: 2019-11-24..2019-11-30" in out
    assert run_command.partitions_to_run(_args("2020-01-01"), []) is None
    assert f"no landing files under {tmp_path / 'landing'} and --no-simulate given" in capsys.readouterr().out


def test_simulator_flags_are_refused_when_logs_already_landed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.setattr(run_command, "landed", lambda: ["2026-01-01", "2026-01-02"])
    monkeypatch.setattr(run_command, "simulate", lambda args: pytest.fail("must not simulate"))
    assert main(["run", "--requests-per-day", "500"]) == 2
    out = capsys.readouterr().out
    assert "error: --requests-per-day given, but logs already landed under" in out and "Pass --start" in out


def test_run_no_simulate_with_nothing_landed_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    assert main(["run", "--no-simulate", "--start", "2019-11-24", "--days", "3"]) == 2
    assert "no landing files under" in capsys.readouterr().out


def test_an_unexpected_error_ends_with_one_line_naming_the_cause(monkeypatch, capsys):
    def broken(args):
        try:
            raise OSError("disk full")
        except OSError as error:
            raise RuntimeError("could not write the landing files") from error

    monkeypatch.setattr(simulate_command, "run", broken)
    assert main(["simulate", "--days", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[-1] == "[fair-pipeline] failed: OSError: disk full"
    assert "Traceback" in captured.err


def test_ctrl_c_ends_with_one_line_and_no_traceback(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate_command, "run", interrupted)
    assert main(["simulate", "--days", "1"]) == 130
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == ["[fair-pipeline] interrupted (Ctrl-C); run the same command again "
                                                 "to continue"]
    assert "Traceback" not in captured.err


def _findings(n_gaps: int, n_facts: int, missing: list[dict]) -> dict:
    findings = [{"section": "xAUC", "status": "gap larger than δ", "text": f"model m{i}: gap " + "x" * 300,
                 "headline": True, "verdict": "gap larger than δ"} for i in range(n_gaps)]
    findings += [{"section": "Volume", "status": "info", "text": f"fact {i}", "headline": True, "verdict": None}
                 for i in range(n_facts)]
    findings += [{"section": "xAUC", "status": "not significant", "text": "detail", "headline": False, "verdict": None}]
    return {"generated_at": "2026-01-01 00:00 UTC", "findings": findings, "missing": missing,
            "verdict_summary": f"{n_gaps} comparisons: {n_gaps} gaps larger than δ"}


def test_quiet_summary_fits_on_one_screen_and_verbose_shows_everything(tmp_path, monkeypatch, capsys):
    from fair_pipeline.reporting.build import FINDINGS_NAME

    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    settings.reports_dir().mkdir(parents=True)
    (settings.reports_dir() / FINDINGS_NAME).write_text(json.dumps(_findings(30, 40, [])))
    results.print_where(True)
    quiet = capsys.readouterr().out.splitlines()
    assert len(quiet) <= 20, quiet
    assert sum("[GAP > δ]" in line for line in quiet) == 6
    assert "  … 64 more headline(s) in the report (or run with --verbose)" in quiet  # 30 + 40 - 6
    assert sum("x" * 300 in line for line in quiet) == 6 and not any(line.endswith("…") for line in quiet)  # never cut
    assert any("fairness_report.html" in line for line in quiet) and any("fair-pipeline --home" in line for line in quiet)
    results.print_where(True, verbose=True)
    verbose = capsys.readouterr().out
    assert verbose.count("[GAP > δ]") == 30 and verbose.count("[fact]") == 40 and "x" * 300 in verbose


def test_a_section_that_ran_but_was_not_estimable_is_not_called_never_ran():
    from fair_pipeline.reporting.summary import terminal_summary_lines

    missing = [{"section": "Position-bias curve", "stage": "position_bias",
                "reason": "the position-bias stage ran but no position was estimable (no randomized traffic)"}]
    lines = terminal_summary_lines(_findings(1, 0, missing))
    assert ("  not in the report: Position-bias curve (position_bias): the position-bias stage ran but no position was "
            "estimable (no randomized traffic)") in lines
    assert not any("never ran" in line for line in lines)


def test_progress_prints_one_line_per_step_with_its_elapsed_time():
    import dagster as dg

    from fair_pipeline.platform.progress import progress_logger, with_progress

    @dg.asset
    def first(context):
        context.log.warning("extras schema changed\nsecond line")
        return 1

    @dg.asset
    def second(first):
        raise ValueError("column 'score' is missing\nmore detail")

    job = dg.Definitions(assets=[first, second]).resolve_implicit_global_asset_job_def()
    ticks = iter(range(100))
    stream = io.StringIO()
    job, run_config = with_progress(job, {}, progress_logger(stream, clock=lambda: float(next(ticks)), warnings=True),
                                    verbose=False)
    assert run_config["loggers"]["console"] == {"config": {"log_level": "CRITICAL"}}
    result = job.execute_in_process(run_config=run_config, raise_on_error=False, instance=dg.DagsterInstance.ephemeral())
    assert not result.success
    # clock: 0 at start, 1/2 first's start/success, 3/4 second's start/failure; the warning in one line, no trace
    assert stream.getvalue().splitlines() == [
        "     warning: extras schema changed",
        f"[ 1] {'first':<40} {'done':<6} {1.0:6.1f}s  (total 2s)",
        f"[ 2] {'second':<40} {'FAILED':<6} {1.0:6.1f}s  (total 4s)",
        "     cause: ValueError: column 'score' is missing",
    ]


def test_a_failed_run_ends_the_output_with_its_cause(tmp_path, monkeypatch, capsys):
    import types

    from fair_pipeline import runner

    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.setattr(runner, "failure_summary", lambda result: "marts__fairness_audit: ValueError: no positives\nmore")
    runs = jobs.JobRuns()
    assert not runs.report("partition 2026-01-02", types.SimpleNamespace(success=False, run_id="r1"), 0.0)
    results.print_where(False, failures=runs.failures)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "[fair-pipeline] failed: partition 2026-01-02: marts__fairness_audit: ValueError: no positives"


def test_a_quiet_summary_names_a_few_missing_sections_and_counts_many():
    from fair_pipeline.reporting.summary import MISSING_SHOWN, terminal_summary_lines

    few = [{"section": f"S{i}", "stage": "eo_transform", "reason": "ran but not estimable"} for i in range(MISSING_SHOWN)]
    assert sum(line.startswith("  not in the report: S") for line in terminal_summary_lines(_findings(0, 0, few))) == MISSING_SHOWN
    many = few + [{"section": "extra", "stage": "audit", "reason": "never ran"}]
    quiet = terminal_summary_lines(_findings(0, 0, many))
    assert f"  {MISSING_SHOWN + 1} sections not in the report (stages without output); run with --verbose for why" in quiet
    assert sum(line.startswith("  not in the report:") for line in terminal_summary_lines(_findings(0, 0, many), verbose=True)) == 5


def test_a_report_older_than_the_command_is_never_shown_as_its_result(tmp_path, monkeypatch, capsys):
    import time

    from fair_pipeline.reporting.build import FINDINGS_NAME

    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    settings.reports_dir().mkdir(parents=True)
    findings = settings.reports_dir() / FINDINGS_NAME
    findings.write_text(json.dumps(_findings(2, 1, [])))
    os.utime(findings, (time.time() - 3600, time.time() - 3600))  # yesterday's successful run
    results.print_where(False, since=time.time())
    out = capsys.readouterr().out
    assert "fairness report:    NOT updated by this command" in out and "from an earlier run" in out
    assert "[GAP > δ]" not in out and "fairness findings" not in out
    results.print_where(True, since=time.time() - 7200)  # built by this command: shown with its findings
    assert "[GAP > δ]" in capsys.readouterr().out


def test_the_final_lines_name_what_the_registry_serves_and_a_fresh_home_gets_no_store(tmp_path, monkeypatch):
    from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, TAG_MODEL_PARTITION, store_client

    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert results.deployed() == f"nothing ({FAIR_RANKER}@{CHAMPION} is not set)"
    assert not (tmp_path / "mlflow.db").exists()  # printing a line never creates a store
    client = store_client(settings.mlflow_tracking_uri())
    client.create_registered_model(FAIR_RANKER)
    for partition in ("2026-01-02", "2026-01-03"):
        client.create_model_version(FAIR_RANKER, (tmp_path / "model").as_uri(),
                                    tags={TAG_MODEL_PARTITION: partition, "candidate": f"{partition}/eo_weighted"})
    assert results.deployed() == f"nothing ({FAIR_RANKER}@{CHAMPION} is not set)"
    client.set_registered_model_alias(FAIR_RANKER, CHAMPION, "1")  # a rollback: not the newest version
    assert results.deployed() == (f"{FAIR_RANKER}@{CHAMPION} = version 1 (partition 2026-01-02, "
                                  "candidate 2026-01-02/eo_weighted)")
