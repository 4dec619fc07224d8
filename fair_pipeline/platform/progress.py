"""One terminal line per finished Dagster step (asset), with its elapsed time, from the run's event stream.

The CLI runs the pipeline in process and quiets Dagster's console logger; this logger receives the same
records, keeps only step start / success / failure events and prints e.g.

    [ 4] position_bias/curve                 done   12.3s  (total 41s)

On a terminal a "running" line is shown while a step works and is overwritten when it ends, so a long step
(the audit) is never silent; in a log file only the finished lines appear.
"""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import dagster as dg

PROGRESS_LOGGER = "progress"
_STEP_EVENTS = (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE)


def root_cause(error: Any) -> str:
    """First line of the innermost error of a Dagster SerializableErrorInfo (the user's exception, not the
    "Error occurred while executing op" wrapper), e.g. `ValueError: column 'score' is missing`."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    lines = (error.message or "").strip().splitlines()
    return lines[0] if lines else error.cls_name or "unknown error"


def step_label(step_key: str) -> str:
    """`position_bias__curve` -> `position_bias/curve` (the asset key the step materializes)."""
    return step_key.replace("__", "/")


class StepProgress(logging.Handler):
    """Turns Dagster's step events into progress lines; `clock` is injectable for tests."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 warnings: bool = False):
        super().__init__(level=logging.DEBUG)
        self.warnings = warnings
        self.stream = stream or sys.stdout
        self.clock = clock
        self.began = clock()
        self.started: dict[str, float] = {}
        self.finished = 0
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        if self.warnings and record.levelno == logging.WARNING:
            message = str(meta.get("orig_message") or record.getMessage()).strip().splitlines()
            self._write(f"     warning: {message[0] if message else ''}")
            return
        if event is None or event.step_key is None or event.event_type not in _STEP_EVENTS:
            return
        now = self.clock()
        step = event.step_key
        if event.event_type == dg.DagsterEventType.STEP_START:
            self.started[step] = now
            if self.interactive:
                self._write(f"\r[{self.finished + 1:>2}] {step_label(step):<40} running ...", end="")
        else:
            self.finished += 1
            failed = event.event_type == dg.DagsterEventType.STEP_FAILURE
            elapsed = now - self.started.pop(step, now)
            line = (f"[{self.finished:>2}] {step_label(step):<40} {'FAILED' if failed else 'done':<6} {elapsed:6.1f}s"
                    f"  (total {now - self.began:.0f}s)")
            if failed and event.step_failure_data and event.step_failure_data.error:
                line += f"\n     cause: {root_cause(event.step_failure_data.error)}"
            self._write(("\r\033[K" if self.interactive else "") + line)

    def _write(self, text: str, end: str = "\n") -> None:
        self.stream.write(text + end)
        self.stream.flush()


def progress_logger(stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                    warnings: bool = False) -> dg.LoggerDefinition:
    """A Dagster logger definition printing one line per finished step to `stream` (default stdout), and with
    `warnings` one line per warning the run logs (when Dagster's console logger is quiet)."""

    @dg.logger(description="one line per finished step, with elapsed time (the fair-pipeline CLI)")
    def progress(_init_context) -> logging.Logger:
        log = logging.Logger("fair_pipeline.progress", level=logging.DEBUG)
        log.addHandler(StepProgress(stream, clock, warnings))
        return log

    return progress


def with_progress(job: dg.JobDefinition, run_config: dict[str, Any], logger: dg.LoggerDefinition | None,
                  verbose: bool = True) -> tuple[dg.JobDefinition, dict[str, Any]]:
    """The job with `logger` added next to its own loggers, and the run config enabling it; unless
    `verbose`, Dagster's console logger is silent: the progress lines replace it, a failed step's line names its
    cause, and a warning is one line when `logger` prints warnings (its stack traces would bury the CLI's last
    line, e.g. the one saying the disk is full)."""
    loggers = dict(run_config.get("loggers", {}))
    if not verbose:
        loggers["console"] = {"config": {"log_level": "CRITICAL"}}
    if logger is not None:
        job = job.with_logger_defs({**job.loggers, PROGRESS_LOGGER: logger})
        loggers[PROGRESS_LOGGER] = {}
    return job, {**run_config, "loggers": loggers}
