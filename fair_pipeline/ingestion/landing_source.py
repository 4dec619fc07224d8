"""Where a run reads its landing: a folder of this machine, or, on the spark engine, a URI (`file://`, `hdfs://`, any
scheme the session's Hadoop client knows) that is listed through the session's file system (`landing_uris`) and
fingerprinted from its files' metadata (`fingerprints.status_fingerprint`); the driver never opens a landing file
given as a URI. The duckdb engine reads folders only (a plain path or a `file://` URI, `settings.landing_dir`; another
scheme is refused by name).

One `LandingSource` answers what the ingestion assets, `run` / `backfill` and `runner.landing_changes` ask of a
landing (which days are landed, which sources a day lacks, a day's files, the fingerprints), whichever it is."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fair_pipeline.ingestion import fingerprints, landing, landing_uris
from fair_pipeline.ingestion.catalogue import CatalogueLoad, load_items
from fair_pipeline.ingestion.hash_cache import HashCache
from fair_pipeline.platform import settings
from fair_pipeline.platform.engines import warehouse_files


@dataclasses.dataclass(frozen=True)
class LandingSource:
    """`location`: the landing as configured; `fs`: the file system that reads it when it is a URI read through Spark
    (`warehouse_files.HadoopFiles`, or `LocalFiles` for a `file://` landing over Spark Connect), else None."""

    location: str
    fs: object | None = None

    @property
    def through_spark(self) -> bool:
        return self.fs is not None

    @property
    def path(self) -> Path:
        """The landing as a folder of this machine (RemoteLandingError for a URI of another scheme)."""
        return settings.landing_dir(self.location)

    @property
    def uri(self) -> str:
        return warehouse_files.location_uri(self.location)

    @property
    def loader_landing(self) -> Path | str:
        """What the loaders take: the URI when read through Spark, else the folder."""
        return self.uri if self.through_spark else self.path

    def complete_days(self) -> list[str]:
        if self.through_spark:
            return landing_uris.complete_days(self.fs, self.uri)
        return landing.complete_days(self.path)

    def missing_sources(self, day: dt.date | str) -> list[str]:
        if self.through_spark:
            return landing_uris.missing_sources(self.fs, self.uri, day)
        return landing.missing_sources(self.path, day)

    def check_day(self, source: str, day: dt.date | str) -> None:
        """Raise (FileNotFoundError, LandingFileError) naming what is wrong with the day's files, before any load."""
        if self.through_spark:
            landing_uris.partition_files(self.fs, self.uri, source, day)
        else:
            landing.partition_files(self.path, source, day)

    def day_fingerprint(self, source: str, day: dt.date | str, cache: HashCache | None = None) -> str:
        if self.through_spark:
            return fingerprints.uri_source_day_fingerprint(self.fs, self.uri, source, day)
        return fingerprints.source_day_fingerprint(self.path, source, day, cache)

    def catalogue_fingerprint(self, cache: HashCache | None = None) -> str:
        """Every catalogue delivery's files (what `run` compares; nothing is dated or refused here)."""
        if self.through_spark:
            return fingerprints.uri_catalogue_fingerprints(self.fs, self.uri)[0]
        return fingerprints.catalogue_fingerprint(self.path, cache)

    def catalogue_fingerprints(self, cache: HashCache | None = None) -> tuple[str, dict[str, str]]:
        """(every delivery's files, each delivery's by its day)."""
        if self.through_spark:
            return fingerprints.uri_catalogue_fingerprints(self.fs, self.uri)
        return (fingerprints.catalogue_fingerprint(self.path, cache),
                fingerprints.delivery_fingerprints(self.path, cache))

    def load_catalogue(self, con) -> tuple[CatalogueLoad, list[str]]:
        """`catalogue.load_items` of this landing's catalogues into DuckDB over `con`, and the files it read as the
        landing names them."""
        with self._catalogue_folder() as folder:
            load = load_items(con, folder)
        return load, [f.replace(str(folder), self.uri, 1) if self.through_spark else f for f in load.files]

    @contextlib.contextmanager
    def _catalogue_folder(self) -> Iterator[Path]:
        """A landing folder of this machine holding the item catalogues, for DuckDB's validation of them: the landing
        itself, or, for one read through Spark, a temporary copy of its catalogue files (catalogue-sized: at most a
        few MB per delivery) made by the file system, never of the logs."""
        if not self.through_spark:
            yield self.path
            return
        found = landing_uris.catalogue_deliveries(self.fs, self.uri)
        files = [f for d in found for f in d.files]
        with tempfile.TemporaryDirectory(prefix="catalogue-") as temporary:
            copy = Path(temporary) / "landing"
            for uri, relative in zip(files, landing_uris.stored_paths(self.uri, files)):
                target = copy / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                self.fs.copy_to_local(uri, target)
            try:
                yield copy
            except (landing.LandingFileError, FileNotFoundError) as error:  # name the landing's files, not the copy's
                raise type(error)(str(error).replace(str(copy), self.uri)) from error


def for_engine(engine, location: str = "") -> LandingSource:
    """The landing at `location` (empty: `settings.landing_location`) as `engine` reads it: through the engine's
    file system for a URI on Spark, else as a folder (refused by name if it is not one)."""
    location = settings.landing_location(location)
    if engine.name == "spark" and landing_uris.is_uri(location):
        return LandingSource(location, _files(engine.spark, location))
    source = LandingSource(location)
    source.path  # noqa: B018 - refuses a URI the duckdb engine cannot read, before anything runs
    return source


def configured(location: str = "") -> LandingSource:
    """The landing of this process's runs ($FAIR_PIPELINE_ENGINE): on Spark, a URI is read through the process's one
    SparkSession (started here if it is not yet: the runs reuse it)."""
    location = settings.landing_location(location)
    if settings.engine() == "spark" and landing_uris.is_uri(location):
        from fair_pipeline.platform.engines.spark_engine import spark_session

        spark = spark_session(master=settings.spark_master(), driver_memory=settings.spark_driver_memory(),
                              config=settings.spark_conf())
        return LandingSource(location, _files(spark, location))
    source = LandingSource(location)
    source.path  # noqa: B018 - as in for_engine
    return source


def _files(spark, location: str):
    from fair_pipeline.platform.engines.spark_engine import is_connect_session

    if not is_connect_session(spark):
        return warehouse_files.HadoopFiles(spark)
    warehouse_files.local_path(warehouse_files.location_uri(location))  # a Connect client reads file:// only
    return warehouse_files.LocalFiles()
