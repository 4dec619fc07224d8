"""The Dagster runs a command chains (ingest a range, train and audit a partition, the reference models), each
reported in one line, and the failures of this command (`JobRuns.failures`, repeated as its last line)."""
from __future__ import annotations

import dataclasses
import logging
import os
import time

from fair_pipeline.commands.console import say
from fair_pipeline.platform import settings


def quiet_libraries() -> None:
    """Without --verbose, MLflow's own INFO lines (store creation, migrations) stay out of the terminal."""
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # read when mlflow is first imported
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # It logs a failed query with its traceback, then raises it: the step's failure line already names the cause.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


def prepare_stores(verbose: bool = False) -> bool:
    """The Dagster instance and the MLflow store, created once before any run logs to them; False (after saying
    why) when MLflow cannot be used."""
    from fair_pipeline import runner
    from fair_pipeline.platform import run_recovery
    from fair_pipeline.platform.tracking import TrackingUnavailableError, ensure_experiments

    run_recovery.begin_command()
    if not verbose:
        quiet_libraries()
    runner.ensure_dagster_home()
    try:
        ensure_experiments()
    except TrackingUnavailableError as error:
        say(f"cannot use MLflow: {error}")
        return False
    return True


@dataclasses.dataclass
class JobRuns:
    """The runs of one command: each says how it went; a failed one's cause is kept in `failures`."""

    verbose: bool = False
    failures: list[str] = dataclasses.field(default_factory=list)

    def _display(self) -> dict:
        """How a run shows itself: one progress line per step, Dagster's console logger only with --verbose."""
        from fair_pipeline.platform.progress import progress_logger

        return {"progress": progress_logger(warnings=not self.verbose), "verbose": self.verbose}

    def report(self, what: str, result, began: float) -> bool:
        """Say how the run `result` of `what` went; False (its cause kept) when it failed."""
        from fair_pipeline import runner
        from fair_pipeline.platform import run_recovery

        if run_recovery.interrupted():  # Ctrl-C or SIGTERM during this job: start no other
            say(f"{what}: interrupted (SIGINT/SIGTERM): not starting another run")
            raise SystemExit(130)
        if not result.success:
            from fair_pipeline.platform.disk_space import disk_full_line

            summary = runner.failure_summary(result)
            say(f"{what}: run {result.run_id} FAILED after {time.perf_counter() - began:.0f}s:\n{summary}")
            disk_full = disk_full_line(settings.home(), summary)
            if disk_full:  # the step's own error may not say so (SQLite: "disk I/O error")
                say(f"failed: {disk_full}")
            self.failures.append(f"{what}: {disk_full or summary.splitlines()[0]}")
            return False
        say(f"{what}: run {result.run_id} succeeded in {time.perf_counter() - began:.0f}s")
        return True

    def ingest(self, start: str, end: str) -> bool:
        from fair_pipeline import runner

        say(f"ingesting the logs of partitions {start}..{end} (one Dagster run)")
        began = time.perf_counter()
        return self.report(f"logs {start}..{end}", runner.ingest_range(start, end, **self._display()), began)

    def train_and_audit(self, day: str) -> bool:
        from fair_pipeline import runner

        say(f"partition {day}: position bias, EO transform, rankers, audit, selection, report (trained before {day}, "
            f"evaluated on {day})")
        began = time.perf_counter()
        return self.report(f"partition {day}", runner.train_and_audit(day, **self._display()), began)

    def reference_models_if_outdated(self) -> bool:
        from fair_pipeline import runner

        if not runner.benchmarks_outdated():
            return True
        say("static benchmark models (Adult, COMPAS): missing or their code changed, materializing them once")
        began = time.perf_counter()
        return self.report("benchmark models", runner.run_benchmarks(**self._display()), began)
