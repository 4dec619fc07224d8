"""Argument types and flags that several commands share, and the help formatter that shows defaults."""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os

from fair_pipeline.platform import settings


class DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or any(action.default is none for none in (None, False, argparse.SUPPRESS))
                or "default" in text.lower()):
            return text
        return f"{text} (default: %(default)s)"


def date(text: str) -> dt.date:
    """argparse type: a YYYY-MM-DD date."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from error


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print Dagster's and MLflow's log lines and every headline finding")


SIMULATION_HELP = {
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
    "groups": "K, number of groups (K > 2: the group lists below, or their defaults)",
    "group_shares": "P(C = c) per group, ';'-separated (default: equal; p_group with 2 groups)",
    "group_relevance": "P(Y(1) = 1 | C = c) per group, ';'-separated (default: p_relevant_group0..1 evenly)",
    "group_effects": "term of group c in R, ';'-separated (default: 0..group_effect evenly)",
    "group_labels": "group_id text per group, ';'-separated (default: 0..K-1)",
    "group_attributes": "JSON {attribute: [values]}: the groups are their crossed cells and each attribute an "
                        "items-table column (--groups = the number of cells)",
}


def add_simulation_arguments(parser: argparse.ArgumentParser) -> None:
    """--start/--days and one flag per SimulationConfig knob (dest = the field name), defaults from the config."""
    from fair_pipeline.ingestion.simulation_config import SimulationConfig

    defaults = SimulationConfig()
    parser.add_argument("--start", type=date, help="first day (default: `--days` days before today, UTC)")
    # The newest day trains on the window_days() days before it: one more day simulated completes its window.
    parser.add_argument("--days", type=int, default=settings.window_days() + 1,
                        help="number of days (the newest day and its training window, $FAIR_PIPELINE_WINDOW_DAYS)")
    for field in dataclasses.fields(SimulationConfig):
        flag = "--items" if field.name == "n_items" else "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        kwargs = {"choices": ["log2", "power"]} if field.name == "bias_curve" else {"type": type(default)}
        parser.add_argument(flag, dest=field.name, default=default, help=SIMULATION_HELP.get(field.name, field.name),
                            **kwargs)


def changed_simulation_flags(args: argparse.Namespace) -> list[str]:
    """The simulation flags whose value differs from its default (given on the command line)."""
    from fair_pipeline.ingestion.simulation_config import SimulationConfig

    defaults = SimulationConfig()
    return ["--items" if f.name == "n_items" else "--" + f.name.replace("_", "-")
            for f in dataclasses.fields(SimulationConfig) if getattr(args, f.name) != getattr(defaults, f.name)]


def simulation_config(args: argparse.Namespace):
    """The SimulationConfig of the parsed simulation flags."""
    from fair_pipeline.ingestion.simulation_config import SimulationConfig

    return SimulationConfig(**{field.name: getattr(args, field.name) for field in dataclasses.fields(SimulationConfig)})


def _spark_setting(text: str) -> str:
    try:
        settings.parse_spark_conf([text])
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return text


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=list(settings.ENGINES), default=None,
                        help="where ingestion and the SQL models run and the later stages read raw, staging and marts "
                             "tables (the small result stores stay in DuckDB; docs/spark.md) (default: "
                             f"${settings.ENGINE_ENV}, else {settings.DEFAULT_ENGINE})")
    parser.add_argument("--spark-master", metavar="URL", default=None,
                        help="Spark master with --engine spark: local[N], spark://host:port, yarn, k8s://..., or a Spark "
                             f"Connect server sc://host:port (default: ${settings.SPARK_MASTER_ENV}, else "
                             f"{settings.DEFAULT_SPARK_MASTER})")
    parser.add_argument("--spark-driver-memory", metavar="SIZE", default=None,
                        help="the Spark driver's JVM heap, e.g. 2g (not with sc://: the Connect server owns its driver) "
                             f"(default: ${settings.SPARK_DRIVER_MEMORY_ENV}, else {settings.DEFAULT_SPARK_DRIVER_MEMORY})")
    parser.add_argument("--spark-warehouse", metavar="URI", default=None,
                        help="where the Spark engine keeps its tables: file:///..., hdfs://..., any scheme the "
                             "session's Hadoop client knows, or a path (over sc:// a file:// location the server "
                             f"shares) (default: ${settings.SPARK_WAREHOUSE_ENV}, else HOME/spark_warehouse)")
    parser.add_argument("--landing", metavar="LOCATION", default=None,
                        help="where the landing files are: a folder, or with --engine spark a URI (file:///..., "
                             "hdfs://..., any scheme the session's Hadoop client knows) listed and read through Spark "
                             f"(default: ${settings.LANDING_ENV}, else HOME/landing)")
    parser.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=None, type=_spark_setting,
                        help="a Spark setting for the session, e.g. spark.executor.memory=4g; repeatable (default: "
                             f"${settings.SPARK_CONF_ENV}, KEY=VALUE lines)")


def apply_engine(args: argparse.Namespace) -> None:
    """--engine and the Spark flags for this command's runs (main restores the variables); checked before any run."""
    from fair_pipeline.platform.engines.select import require_engine

    if args.engine:
        os.environ[settings.ENGINE_ENV] = args.engine
    if args.spark_master:
        os.environ[settings.SPARK_MASTER_ENV] = args.spark_master
    if args.spark_driver_memory:
        os.environ[settings.SPARK_DRIVER_MEMORY_ENV] = args.spark_driver_memory
    if args.spark_warehouse:
        os.environ[settings.SPARK_WAREHOUSE_ENV] = args.spark_warehouse
    if args.landing:
        os.environ[settings.LANDING_ENV] = args.landing
    if args.spark_conf:
        os.environ[settings.SPARK_CONF_ENV] = "\n".join(f"{k}={v}" for k, v in settings.parse_spark_conf(args.spark_conf).items())
    require_engine(settings.engine())
    if settings.engine() == "duckdb":
        settings.landing_dir()  # a URI that is not a folder of this machine is refused here, by name
