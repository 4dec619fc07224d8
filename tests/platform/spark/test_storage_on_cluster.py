"""The Spark warehouse given as a `file://` URI on a standalone cluster (master and worker from the pyspark wheel,
`tests/platform/spark/cluster.py`; the worker's working directory is not the driver's): ingestion, every SQL model,
then a backfill that replaces a day whose landing files changed, with the driver killed once the new versions of the
day's raw rows and quarantine rows are written and before their commit. The next driver finds the warehouse as it
was before the backfill (the old day live in both tables), runs the backfill again and rebuilds the models; every
table then equals DuckDB's build of the changed landing files (values to 1e-9), and the only rows no commit names are
the killed driver's two uncommitted versions (every superseded version was emptied).

The landing is given to the Spark loader as a `file://` URI too, in a folder whose name has a space, a `+`, a quote,
non-Latin letters and a `%`, with files named alike, one in a hive-style `hour=` subfolder and a temporary file beside
them: the driver lists it through the session's Hadoop FileSystem and Spark reads the footers, so nothing of the
landing is read from the driver's paths (DuckDB reads the same files from its plain folder).

Each driver is a process of its own (this one holds the local SparkSession of the other Spark tests; a process has one
SparkContext), on the standalone cluster shared with the other modules whose drivers are processes of their own
(`shared_cluster`: one cluster start less). The warehouse is written, listed and read through Spark only (`spark_tables`, `version_log`)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fair_pipeline.commands import main
from fair_pipeline.platform import settings
from fair_pipeline.platform.engines import log_snapshot, version_log
from tests.platform.spark.raw_and_models import DIED_IN_COMMIT, assert_same_tables, ingest_and_build

SIMULATION = ["--start", "2026-01-01", "--days", "2", "--requests-per-day", "60", "--items", "300"]
DAY = "2026-01-01"
OTHER_DAY = "2026-01-02"
ODD_NAME = "part 1+ü'ß%41"
RAW, QUARANTINE = "raw.observational_impressions", "raw.quarantine"


def _changed_day(landing: Path) -> None:
    """Day DAY's observational file loses a third of its rows and gains two rejected ones: a repeated (request_id,
    position) and a position 0."""
    path = landing / "observational" / f"date={DAY}" / "part-0.parquet"
    table = pq.read_table(path)
    kept = table.slice(0, 2 * table.num_rows // 3)
    zero = kept.slice(0, 1).set_column(kept.schema.get_field_index("position"), "position",
                                       pa.array([0], pa.int32()))
    zero = zero.set_column(zero.schema.get_field_index("request_id"), "request_id",
                           pc.binary_join_element_wise(zero["request_id"], pa.scalar("+é"), ""))
    pq.write_table(pa.concat_tables([kept, kept.slice(5, 1), zero]), path)


def _odd_names(landing: Path) -> None:
    """OTHER_DAY's files get odd names (one in a hive-style subfolder) and a temporary file that is never read."""
    observational = landing / "observational" / f"date={OTHER_DAY}"
    (observational / "part-0.parquet").rename(observational / f"{ODD_NAME}.PARQUET")
    (observational / ".tmp-half-written.parquet").write_bytes(b"PAR1")
    randomized = landing / "randomized" / f"date={OTHER_DAY}"
    (randomized / "hour=07 +ü").mkdir()
    (randomized / "part-0.parquet").rename(randomized / "hour=07 +ü" / f"{ODD_NAME}.parquet")


def _live_versions(tables: Path) -> set[str]:
    return {e.version for e in log_snapshot.read_local(f"file://{tables}").state.values() if e.version}


def _versions_with_rows(tables: Path) -> set[tuple[str, str]]:
    """(table, version) of every version directory holding rows."""
    found = set()
    for version in tables.glob("*/*/write_id=*"):
        if sum(pq.read_metadata(f).num_rows for f in version.rglob("*.parquet") if not f.name.startswith(".")):
            found.add((f"{version.parent.parent.name}.{version.parent.name}", version.name.removeprefix("write_id=")))
    return found


def _driver(cluster, home: Path, out: Path, warehouse: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tests.platform.spark.raw_and_models", "spark", str(home), str(out), cluster.master_url,
         "--warehouse", warehouse, *args],
        cwd=cwd, env={**os.environ, "PYTHONPATH": str(settings.REPO_ROOT), settings.HOME_ENV: str(home)},
        capture_output=True, text=True, timeout=1500)


@pytest.mark.timeout(2400)
def test_a_backfill_killed_before_its_commit_on_a_cluster_leaves_no_half_written_day(shared_cluster, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    cluster = shared_cluster
    # The worker's application directories from earlier modules on the same cluster, told apart from this test's.
    earlier_apps = set((cluster.worker_dir / "work").glob("*"))
    duck_home, spark_home, driver_cwd = tmp_path / "duckdb", tmp_path / "spark", tmp_path / "driver"
    assert main(["--home", str(duck_home), "simulate", *SIMULATION]) == 0
    _odd_names(duck_home / "landing")
    shutil.copytree(duck_home / "landing", spark_home / "landing")
    uri_landing = tmp_path / "landing 'ü+%41'"  # Hadoop takes a URI's path as written: no %-decoding
    shutil.copytree(duck_home / "landing", uri_landing)
    changed_landing = tmp_path / "changed" / "landing"
    shutil.copytree(duck_home / "landing", changed_landing)
    _changed_day(changed_landing)
    driver_cwd.mkdir()
    tables = tmp_path / "shared warehouse"  # a space: Hadoop takes the URI's path as written
    warehouse = f"file://{tables}"

    # First driver: ingest both days and build every model, then reload the changed day and die before its commit.
    first = _driver(cluster, spark_home, tmp_path / "first.json", warehouse, driver_cwd, "--landing",
                    f"file://{uri_landing}", "--die-in-commit", DAY, f"file://{changed_landing}")
    assert first.returncode == DIED_IN_COMMIT, first.stdout[-3000:] + first.stderr[-5000:]
    assert set((cluster.worker_dir / "work").glob("*")) - earlier_apps, "the executors did not run under the worker"
    live = _live_versions(tables)
    uncommitted = {(name, version) for name, version in _versions_with_rows(tables) if version not in live}
    assert {name for name, _ in uncommitted} == {RAW, QUARANTINE}, uncommitted  # written, never committed

    # Second driver: the warehouse serves the day as it was; the backfill runs again and every model is rebuilt.
    shutil.rmtree(spark_home / "landing")
    shutil.copytree(changed_landing, spark_home / "landing")
    second = _driver(cluster, spark_home, tmp_path / "second.json", warehouse, driver_cwd,
                     "--opened", str(tmp_path / "opened.json"))
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-5000:]

    shutil.rmtree(duck_home / "landing")
    shutil.copytree(changed_landing, duck_home / "landing")
    monkeypatch.setenv(settings.HOME_ENV, str(duck_home))
    expected = ingest_and_build("duckdb", duck_home)
    before, after = json.loads((tmp_path / "first.json").read_text()), json.loads((tmp_path / "second.json").read_text())
    assert_same_tables(expected, after)
    reasons = {(day, reason) for day, source, reason, _ in after["raw.quarantine reasons"]["rows"] if source == "observational"}
    assert len({reason for day, reason in reasons if day == DAY}) >= 2, reasons  # the two rejected rows, for two reasons
    assert json.loads((tmp_path / "opened.json").read_text()) == before  # the killed backfill changed nothing
    assert before["raw.observational_impressions"] != after["raw.observational_impressions"]  # the day was replaced
    live = _live_versions(tables)
    assert {(n, v) for n, v in _versions_with_rows(tables) if v not in live} == uncommitted
    assert not any(driver_cwd.iterdir()), list(driver_cwd.iterdir())  # nothing written relative to the driver's cwd
