"""Where a run's results are and what the newest report found: one screen, or everything with --verbose."""
from __future__ import annotations

import json
import os

from fair_pipeline.commands.console import say
from fair_pipeline.platform import settings

DAGSTER_PORT = 3000  # fair_pipeline.ui's default (not imported: it loads MLflow)


def ui_hint() -> str:
    home = f"--home {settings.home()} " if os.environ.get(settings.HOME_ENV) else ""
    return f"fair-pipeline {home}ui   (Dagster on http://127.0.0.1:{DAGSTER_PORT}, MLflow on {settings.mlflow_ui_url()})"


def print_where(ok: bool, verbose: bool = False, failures: list[str] | None = None, since: float | None = None) -> None:
    """The stores, the report's findings and how to open the UIs; after failed runs, the first one's cause. A report
    older than `since` (the command's start, a time.time()) was not built by this command and is never shown as its
    result."""
    if verbose:
        say("results:")
        print(f"  warehouse (DuckDB): {settings.warehouse_path()}")
        print(f"  Dagster instance:   {settings.dagster_home()}")
        print(f"  MLflow store:       {settings.mlflow_tracking_uri()}")
        print(f"  reports:            {settings.reports_dir()}")
    print_report_summary(verbose, since)
    if ok:  # after a failure the alias did not move; the lines left say what failed
        print(f"  deployed:           {deployed()}")
    print(f"  open the UIs:       {ui_hint()}")
    if not ok:  # the last line: the first failure's cause, else where to look
        if failures:
            say(f"failed: {failures[0]}")
        else:
            print("  some runs failed: see the messages above and the run's event log in the UI")


def print_report_summary(verbose: bool = False, since: float | None = None) -> None:
    """The fairness findings of the newest report (reporting.summary decides what a quiet summary shows), if this
    command built it (see `print_where`)."""
    from fair_pipeline.reporting.build import FINDINGS_NAME, HTML_NAME
    from fair_pipeline.reporting.latest import latest_report_dir
    from fair_pipeline.reporting.summary import terminal_summary_lines

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
    say("fairness findings (headlines; each section of the report lists every test):")
    for line in terminal_summary_lines(data, verbose):
        print(line)


def deployed() -> str:
    """What `fair-ranker@champion` serves now, as the registry (the authority on aliases) holds it."""
    from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, TAG_MODEL_PARTITION
    from fair_pipeline.platform.tracking.registry import version_by_alias
    from fair_pipeline.platform.tracking.store import Store, local_sqlite_path, store_errors

    uri = settings.mlflow_tracking_uri()
    local = local_sqlite_path(uri)
    if local is not None and not local.exists():  # no store yet: nothing registered, and nothing to create here
        return f"nothing ({FAIR_RANKER}@{CHAMPION} is not set)"
    try:
        version = version_by_alias(Store(uri, attempts=1), FAIR_RANKER, CHAMPION)
    except store_errors() as error:  # the run's results stand; only this line cannot say
        return f"unknown: the MLflow store {uri} did not answer ({type(error).__name__})"
    if version is None:
        return f"nothing ({FAIR_RANKER}@{CHAMPION} is not set)"
    return (f"{FAIR_RANKER}@{CHAMPION} = version {version.version} (partition "
            f"{version.tags.get(TAG_MODEL_PARTITION, '?')}, candidate {version.tags.get('candidate', '?')})")
