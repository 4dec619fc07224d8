"""The `fair-pipeline` argument parser. Every command is listed with its help line; only the chosen command's
module is imported to add its arguments (they import numpy, DuckDB, ... for their defaults), so
`fair-pipeline --help` stays quick."""
from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterable, Sequence

from fair_pipeline import __version__
from fair_pipeline.commands.arguments import DefaultsFormatter
from fair_pipeline.platform import settings

# Command name -> (its module in fair_pipeline.commands, its help line), in the order `--help` lists them. Each
# module has add_arguments(parser) and run(args) -> exit code; the help lines are here so that listing the
# commands imports none of them.
COMMANDS = {
    "simulate": ("simulate", "write simulated click logs (Nandy et al. 2.2) as landing files"),
    "run": ("run", "the main job: simulate the newest day and its training window if no logs are present, then materialize everything"),
    "backfill": ("backfill", "ingest a date range of landing files (one run), then train, audit and report each day "
                             "of it (one run per partition); registry aliases never move for an older partition"),
    "promote": ("promote", "move fair-ranker@champion to the model selected for a partition (refuses an older "
                           "partition than the newest with data unless --force)"),
    "ui": ("ui", "start the Dagster UI (with the daemon) and the MLflow UI; Ctrl-C stops both"),
    "import-open-bandit": ("import_open_bandit", "write the shipped Open Bandit sample as landing files"),
    "audit": ("audit", "fairness audit of any Parquet/CSV file: partial AUCs, xAUC, pairwise accuracies"),
    "elicit": ("elicit", "elicit a fairness metric by answering pairwise comparisons (resumable)"),
}


def command_module(name: str):
    return importlib.import_module(f"fair_pipeline.commands.{COMMANDS[name][0]}")


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", metavar="DIR",
                        help=f"root of every generated file; sets ${settings.HOME_ENV} (default: ${settings.HOME_ENV}, "
                             "else ./data)")


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command named in `argv` (after the global options), or None (`--help`, `--version`, a typo)."""
    before = argparse.ArgumentParser(add_help=False)
    _add_global_options(before)
    before.add_argument("words", nargs=argparse.REMAINDER)
    words = before.parse_known_args(list(argv))[0].words
    return words[0] if words and words[0] in COMMANDS else None


def build_parser(with_arguments: Iterable[str] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The parser of every command; the commands in `with_arguments` (all by default) with their arguments,
    the others with their name and help only."""
    parser = argparse.ArgumentParser(
        prog="fair-pipeline",
        description="End-to-end fair ranking on Dagster + DuckDB + MLflow. Every file lives under --home "
        f"(${settings.HOME_ENV}, default ./data). `fair-pipeline COMMAND --help` lists a command's options.",
        formatter_class=DefaultsFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = set(with_arguments)
    for name, (_, help_line) in COMMANDS.items():
        command = commands.add_parser(name, help=help_line, description=help_line, formatter_class=DefaultsFormatter)
        if name in chosen:
            module = command_module(name)
            module.add_arguments(command)
            command.set_defaults(run=module.run)
    return parser
