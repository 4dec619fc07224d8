"""Paths and knobs. FAIR_PIPELINE_HOME (default ./data) roots every generated file.

Functions, not module constants: tests and the CLI change the environment at run time.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

HOME_ENV = "FAIR_PIPELINE_HOME"
DUCKDB_MEMORY_LIMIT_ENV = "FAIR_PIPELINE_DUCKDB_MEMORY_LIMIT"
DUCKDB_TEMP_DIR_ENV = "FAIR_PIPELINE_DUCKDB_TEMP_DIR"
ENGINE_ENV = "FAIR_PIPELINE_ENGINE"  # duckdb | spark: where the SQL models run and the later stages read marts
SPARK_MASTER_ENV = "FAIR_PIPELINE_SPARK_MASTER"
SPARK_DRIVER_MEMORY_ENV = "FAIR_PIPELINE_SPARK_DRIVER_MEMORY"
SPARK_CONF_ENV = "FAIR_PIPELINE_SPARK_CONF"  # KEY=VALUE lines, one Spark setting a line
SPARK_WAREHOUSE_ENV = "FAIR_PIPELINE_SPARK_WAREHOUSE"  # a URI (file://, hdfs://, ...) or a path
START_DATE_ENV = "FAIR_PIPELINE_START_DATE"  # the first daily partition (platform.partitions)
LANDING_ENV = "FAIR_PIPELINE_LANDING"  # a folder, or a URI (file://, hdfs://, ...) that the spark engine reads
ENGINES = ("duckdb", "spark")
DEFAULT_ENGINE = "duckdb"
DEFAULT_SPARK_MASTER = "local[*]"
# The driver holds plans, task results (aggregates) and catalogue-sized tables, never a day's rows: 1g is enough at
# every day size measured (docs/spark.md).
DEFAULT_SPARK_DRIVER_MEMORY = "1g"
# DuckDB's own default is 80% of the machine's RAM; a fixed cap makes the pipeline's peak memory independent of
# the day's size (joins, aggregates and sorts above it spill to the temp directory instead). 384MB: at 250k
# requests/day the audit and model-selection steps peaked at 1.39 GiB with 512MB, too close to 1.5 GB once the
# ~0.5-0.7 GB the Python side holds (libraries, Dagster, MLflow) is added; loading a 12.5M-row day takes 5% more
# CPU at 384MB than at 512MB (benchmarks in docs/warehouse_memory.md).
DEFAULT_DUCKDB_MEMORY_LIMIT = "384MB"
# Trained stages read this many calendar days (the partition mappings are built from it) and need this many of
# them to hold data; the CLI simulates one more day than the window, so the newest day's window is complete.
WINDOW_DAYS_ENV = "FAIR_PIPELINE_WINDOW_DAYS"
MIN_WINDOW_DAYS_ENV = "FAIR_PIPELINE_MIN_WINDOW_DAYS"
DEFAULT_WINDOW_DAYS = 7
DEFAULT_MIN_WINDOW_DAYS = 1
MLFLOW_UI_URL_ENV = "FAIR_PIPELINE_MLFLOW_UI_URL"  # where people open MLflow (links in Dagster's metadata)
DEFAULT_MLFLOW_UI_PORT = 5000
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # fair_pipeline/
REPO_ROOT = PACKAGE_ROOT.parent
SQL_ROOT = REPO_ROOT / "dbt_like_sql"
EXTERNAL_DATA = REPO_ROOT / "data" / "external"


# Characters a home path can't hold, and why (spaces, quotes, `#`, `;` and non-ASCII names work).
UNUSABLE_IN_HOME = {
    "?": "DuckDB opens its write-ahead log at the path with `.wal` inserted before the first `?`",
    "%": "the MLflow store's sqlite URI is percent-decoded, so the store would land in another folder",
}


class HomePathError(ValueError):
    """The home path holds a character the stores can't use; raised before anything is written."""


def home() -> Path:
    path = Path(os.environ.get(HOME_ENV, "data")).resolve()
    bad = [c for c in UNUSABLE_IN_HOME if c in str(path)]
    if bad:
        raise HomePathError(f"the home {path} contains {bad[0]!r}, which it can't: {UNUSABLE_IN_HOME[bad[0]]}; "
                            f"choose a path without {' or '.join(repr(c) for c in UNUSABLE_IN_HOME)}")
    return path


class RemoteLandingError(ValueError):
    """The landing is a URI this machine's file system cannot open (only the spark engine reads it)."""


def landing_location(configured: str = "") -> str:
    """Where landing files arrive, a folder or a URI: `configured`, else $FAIR_PIPELINE_LANDING, else the home's
    `landing` folder. The spark engine reads a URI through its session's Hadoop client (`ingestion.landing_source`)."""
    return configured or os.environ.get(LANDING_ENV) or str(home() / "landing")


def landing_dir(configured: str = "") -> Path:
    """The landing as a folder of this machine (a plain path or a `file://` URI); any other scheme raises
    RemoteLandingError naming it: only the spark engine reads it."""
    location = landing_location(configured)
    scheme, separator, rest = location.partition(":")
    if not separator or len(scheme) < 2 or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return Path(location).expanduser().resolve()
    host, _, path = rest[2:].partition("/") if rest.startswith("//") else ("", "", rest.lstrip("/"))
    if scheme.lower() == "file" and host in ("", "localhost"):
        return Path("/" + path)  # as written, not %-decoded: Hadoop names the same file
    raise RemoteLandingError(f"the landing {location} is not a folder of this machine: only --engine spark reads it "
                             "(through the Spark session's Hadoop client); the duckdb engine, simulating and importing "
                             "logs need a folder or a file:// URI")


def warehouse_path() -> Path:
    return home() / "warehouse.duckdb"


def spark_warehouse_dir() -> Path:
    """The Spark engine's default warehouse: a directory of the home."""
    return home() / "spark_warehouse"


def spark_warehouse(configured: str = "") -> str:
    """Where the Spark engine keeps its Parquet tables (platform.engines.spark_engine), a URI or a path:
    `configured`, else $FAIR_PIPELINE_SPARK_WAREHOUSE, else the home's `spark_warehouse` directory."""
    return configured or os.environ.get(SPARK_WAREHOUSE_ENV) or str(spark_warehouse_dir())


def mlflow_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{home() / 'mlflow.db'}"


def mlflow_ui_url() -> str:
    """The MLflow UI that links point to: $FAIR_PIPELINE_MLFLOW_UI_URL, else the tracking server itself when
    it is one (http/https), else the local UI that `fair-pipeline ui` starts."""
    configured = os.environ.get(MLFLOW_UI_URL_ENV)
    if configured:
        return configured.rstrip("/")
    uri = mlflow_tracking_uri()
    if urlparse(uri).scheme in ("http", "https"):
        return uri.rstrip("/")
    return f"http://127.0.0.1:{DEFAULT_MLFLOW_UI_PORT}"


def mlflow_ui_port() -> int:
    """The port `fair-pipeline ui` serves MLflow on by default: the configured UI URL's, so links and server agree."""
    return urlparse(mlflow_ui_url()).port or DEFAULT_MLFLOW_UI_PORT


def mlflow_artifact_root() -> Path:
    return home() / "mlartifacts"


def reports_dir() -> Path:
    return home() / "reports"


def dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or home() / "dagster_home").resolve()


GROUP_LABELS_ENV = "FAIR_PIPELINE_GROUP_LABELS"


def group_labels() -> dict[str, str]:
    """Names of the protected groups for the report, from $FAIR_PIPELINE_GROUP_LABELS ("0=women,1=men"); {} if unset.
    A malformed entry is an error naming it (a mislabelled group would mislead every reader of the report)."""
    text = os.environ.get(GROUP_LABELS_ENV, "").strip()
    labels: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        value, sep, label = entry.partition("=")
        if not sep or not value.strip() or not label.strip():
            raise ValueError(f"${GROUP_LABELS_ENV}: {entry!r} is not GROUP=LABEL (expected e.g. '0=women,1=men')")
        labels[value.strip()] = label.strip()
    return labels


GROUP_COLUMNS_ENV = "FAIR_PIPELINE_GROUP_COLUMNS"


def group_columns() -> list[str]:
    """Protected-attribute columns of the items table that the exposure audit takes one by one and crossed, from
    $FAIR_PIPELINE_GROUP_COLUMNS ("gender,age_band"); [] if unset. A repeated or blank name is an error."""
    names = [name.strip() for name in os.environ.get(GROUP_COLUMNS_ENV, "").split(",")]
    if names == [""]:
        return []
    if any(not name for name in names) or len(set(names)) != len(names):
        raise ValueError(f"${GROUP_COLUMNS_ENV}={os.environ[GROUP_COLUMNS_ENV]!r} must name distinct items-table "
                         "columns separated by commas (e.g. 'gender,age_band')")
    return names


def default_elicitation_db() -> Path:
    """Where `fair-pipeline elicit` keeps sessions and answers, and the `recorded` oracle reads them."""
    return home() / "elicitation.duckdb"


def duckdb_memory_limit() -> str:
    """DuckDB's memory_limit for warehouse connections (a DuckDB size such as '1GB' or '512MiB')."""
    return os.environ.get(DUCKDB_MEMORY_LIMIT_ENV) or DEFAULT_DUCKDB_MEMORY_LIMIT


def duckdb_temp_dir() -> Path:
    """Where DuckDB spills what does not fit in its memory_limit."""
    configured = os.environ.get(DUCKDB_TEMP_DIR_ENV)
    return Path(configured).resolve() if configured else home() / "duckdb_tmp"


def engine(configured: str = "") -> str:
    """The warehouse engine: `configured` (a resource's config), else $FAIR_PIPELINE_ENGINE, else duckdb."""
    name = (configured or os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE).strip().lower()
    if name not in ENGINES:
        source = "engine" if configured else f"${ENGINE_ENV}"
        raise ValueError(f"{source}={name!r} is not one of {list(ENGINES)}")
    return name


def spark_master(configured: str = "") -> str:
    """The Spark master URL: `configured`, else $FAIR_PIPELINE_SPARK_MASTER, else local[*]."""
    return configured or os.environ.get(SPARK_MASTER_ENV) or DEFAULT_SPARK_MASTER


def spark_driver_memory(configured: str = "") -> str:
    """The Spark driver's JVM heap: `configured`, else $FAIR_PIPELINE_SPARK_DRIVER_MEMORY, else 1g."""
    return configured or os.environ.get(SPARK_DRIVER_MEMORY_ENV) or DEFAULT_SPARK_DRIVER_MEMORY


def parse_spark_conf(lines: str | list[str] | tuple[str, ...]) -> dict[str, str]:
    """Spark settings from KEY=VALUE entries (a list, or text with one a line; blank lines ignored); the value is
    everything after the first '='. Raises ValueError naming an entry without a key."""
    entries = lines.splitlines() if isinstance(lines, str) else list(lines)
    conf = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        key, separator, value = entry.partition("=")
        if not separator or not key.strip():
            raise ValueError(f"Spark setting {entry!r} is not KEY=VALUE")
        conf[key.strip()] = value
    return conf


def spark_conf(configured: str = "") -> dict[str, str]:
    """Extra Spark settings: `configured` (KEY=VALUE lines), else $FAIR_PIPELINE_SPARK_CONF."""
    return parse_spark_conf(configured or os.environ.get(SPARK_CONF_ENV, ""))


@contextlib.contextmanager
def restored_variables(*names: str) -> Iterator[None]:
    """Put the named environment variables back as they were (unset if they were unset) when the block ends."""
    before = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _positive_int_env(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name}={text!r} must be a positive integer (days)")
    return int(text)


def window_days() -> int:
    """The training window's length in days ($FAIR_PIPELINE_WINDOW_DAYS, default 7); read when the definitions
    are built, since the partition mappings are made from it."""
    return _positive_int_env(WINDOW_DAYS_ENV, DEFAULT_WINDOW_DAYS)


def min_window_days() -> int:
    """Days with data a window needs before a stage trains on it ($FAIR_PIPELINE_MIN_WINDOW_DAYS, default 1):
    below it the stage fails with "not enough data" instead of reaching further back."""
    return _positive_int_env(MIN_WINDOW_DAYS_ENV, DEFAULT_MIN_WINDOW_DAYS)
