"""`fair-pipeline` itself: parse, run the chosen command with --home applied, and end an error in one line that
names its cause (after the traceback for an unexpected one)."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from fair_pipeline.commands.console import say
from fair_pipeline.commands.parser import build_parser, chosen_command
from fair_pipeline.platform import settings

# What a command sets for itself and the processes it starts; restored when it returns, so a command run
# in-process (tests, notebooks) leaves no --home, DAGSTER_HOME or quiet MLflow logging behind for later ones.
COMMAND_ENVIRONMENT = (settings.HOME_ENV, "DAGSTER_HOME", "MLFLOW_LOGGING_LEVEL", settings.ENGINE_ENV,
                       settings.SPARK_MASTER_ENV,
                       settings.SPARK_DRIVER_MEMORY_ENV, settings.SPARK_CONF_ENV, settings.SPARK_WAREHOUSE_ENV,
                       settings.LANDING_ENV, settings.START_DATE_ENV)
COMMAND_LOGGERS = ("mlflow", "alembic", "mlflow.store.db.utils")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = chosen_command(argv)
    args = build_parser(with_arguments=[command] if command else []).parse_args(argv)
    with _restored_environment():
        return _run_command(args)


@contextlib.contextmanager
def _restored_environment():
    levels = {name: logging.getLogger(name).level for name in COMMAND_LOGGERS}
    try:
        with settings.restored_variables(*COMMAND_ENVIRONMENT):
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _cause(error: BaseException) -> str:
    """The innermost error's type and first line: what to fix."""
    while error.__cause__ is not None:
        error = error.__cause__
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _run_command(args) -> int:
    if args.home:
        os.environ[settings.HOME_ENV] = args.home
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError) as error:
        say(f"error: {error}")
        return 2
    except KeyboardInterrupt:  # Ctrl-C is the user's choice, not a failure: one line, no traceback
        say("interrupted (Ctrl-C); run the same command again to continue")
        return 130
    except Exception as error:  # noqa: BLE001 - the traceback first, then one line naming the cause
        import traceback

        from fair_pipeline.platform.disk_space import disk_full_line, is_io_failure

        disk_full = disk_full_line(settings.home(), error)
        if not (disk_full and is_io_failure(error)):  # a full disk: the one line says all there is to do
            traceback.print_exc()
        say(f"failed: {disk_full} ({_cause(error)})" if disk_full else f"failed: {_cause(error)}")
        return 1
