"""Ingestion on Spark equals ingestion on DuckDB. Two corpora, each loaded by both loaders, must give the same
refusals (naming the same file, for the same reason), the same stored rows value for value and the same quarantine
(reason, file, the row's values as text):
- the landing corpus (fair_pipeline.ingestion.landing_corpus: other writers' types, text numbers and timestamps,
  bytes, Unicode-blank ids, NaN groups, odd file names, every file-level defect): SPARK_CORPUS_DAYS (default 30: one day of each of its 15 kinds, then the corpus in its order)
  days, the first day of each kind and then the corpus' own order;
- the hypothesis fuzz of tests/ingestion/test_landing_fuzz.py (hostile column names, zero rows):
  FUZZ_SPARK_EXAMPLES (default 10) files.
Both loaders run the contract's one SQL source (ingestion/rules.py); Spark through its rendering. Every day is a
few Spark jobs."""
from __future__ import annotations

import collections
import datetime as dt
import os
import re

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings

from fair_pipeline.ingestion import landing_corpus, loads, spark_loads
from fair_pipeline.ingestion.landing import partition_dir
from fair_pipeline.platform import warehouse
from fair_pipeline.platform.engines import fetch_rows
from tests.ingestion.test_landing_fuzz import DAY, _sorted, landing_files

pytestmark = pytest.mark.spark
QUARANTINE_IDS = "SELECT reason, source_file, request_id, item_id, position FROM raw.quarantine WHERE partition_date = $d"
# The values as text, except score and ts: each engine writes a number or an instant as text its own way
# (1e+17 / 1.0E17; 2026-01-02 00:00:00+00 / 2026-01-02 00:00:00).
QUARANTINE_TEXT = ("SELECT reason, source_file, request_id, query_id, policy, position, original_position, item_id, "
                   "group_id, click FROM raw.quarantine WHERE partition_date = $d")
STORED = "SELECT * EXCLUDE (source_file), source_file FROM raw.observational_impressions WHERE partition_date = $d"
# One day of each kind, then the corpus in its order (enough loading days for the row comparison to matter).
CORPUS_DAYS = int(os.environ.get("SPARK_CORPUS_DAYS", "30"))


@pytest.fixture(scope="module")
def spark_engine(spark, tmp_path_factory):
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    return SparkEngine(spark, tmp_path_factory.mktemp("spark_warehouse"))


@pytest.fixture(scope="module")
def parity_home(tmp_path_factory):
    return tmp_path_factory.mktemp("parity")


def _load(load, *args):
    try:
        return load(*args), None
    except loads.LandingFileError as error:
        # What each engine adds after the shared message (its own error for a damaged page) differs.
        return None, str(error).split(" (DuckDB: ")[0].split(" (Spark: ")[0]


def _corpus_sample(n: int) -> list[landing_corpus.Day]:
    days = landing_corpus.generate(500)
    first_of_kind = list({day.kind: day for day in reversed(days)}.values())
    rest = [day for day in days if all(day is not chosen for chosen in first_of_kind)]
    return (first_of_kind + rest)[:max(n, len(first_of_kind))]


def test_the_landing_corpus_loads_alike_on_spark_and_duckdb(spark_engine, parity_home):
    landing = parity_home / "corpus_landing"
    folder = partition_dir(landing, "observational", DAY)
    day = DAY.isoformat()
    kinds, mismatches = collections.Counter(), []
    with warehouse.session(parity_home / "corpus.duckdb") as con:
        for number, case in enumerate(_corpus_sample(CORPUS_DAYS)):
            landing_corpus.write_day(folder, case.files)
            duck_load, duck_error = _load(loads.load_partition, con, landing, "observational", day)
            spark_load, spark_error = _load(spark_loads.load_partition, spark_engine, landing, "observational", day)
            kinds[(case.kind, "refused" if duck_error else "loaded")] += 1
            if duck_error or spark_error:
                if duck_error != spark_error:
                    mismatches.append((number, case.kind, duck_error, spark_error))
                continue
            duck = (_stored(con.execute(STORED, {"d": day}).fetchall()),
                    collections.Counter(con.execute(QUARANTINE_TEXT, {"d": day}).fetchall()), duck_load.rejected_by_reason)
            spark = (_stored(fetch_rows(spark_engine, STORED.replace("* EXCLUDE (source_file), source_file", "*"),
                                        {"d": day})),
                     collections.Counter(fetch_rows(spark_engine, QUARANTINE_TEXT, {"d": day})),
                     spark_load.rejected_by_reason)
            if duck != spark:
                mismatches.append((number, case.kind, duck, spark))
    assert mismatches == [], mismatches[:3]
    assert sum(n for (kind, outcome), n in kinds.items() if outcome == "loaded") >= CORPUS_DAYS // 3, kinds
    assert len({kind for kind, _ in kinds}) == len(landing_corpus.FILE_DEFECTS) + 1, kinds


def _stored(engine_rows) -> list[tuple]:
    # The instant as UTC (DuckDB hands back an aware datetime, Spark a naive one in the session's UTC).
    return _sorted(tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in row)
                   for row in engine_rows)


# No shrinking: each example is several Spark jobs; a failure is reported as generated.
@settings(max_examples=int(os.environ.get("FUZZ_SPARK_EXAMPLES", "10")), deadline=None, derandomize=False,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=landing_files())
def test_the_fuzz_corpus_loads_alike_on_spark_and_duckdb(spark_engine, parity_home, case):
    table, _, _, refusal = case
    event(f"outcome: {refusal or 'loaded'}")
    landing = parity_home / "landing"
    path = partition_dir(landing, "observational", DAY) / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    day = DAY.isoformat()
    with warehouse.session(parity_home / "warehouse.duckdb") as con:
        duck_load, duck_error = _load(loads.load_partition, con, landing, "observational", day)
        duck_rows = con.execute("SELECT * EXCLUDE (source_file), source_file FROM raw.observational_impressions "
                                "WHERE partition_date = $d", {"d": day}).fetchall()
        duck_quarantine = con.execute(QUARANTINE_IDS, {"d": day}).fetchall()
    spark_load, spark_error = _load(spark_loads.load_partition, spark_engine, landing, "observational", day)
    if duck_error or spark_error:
        assert duck_error == spark_error, (duck_error, spark_error)
        return
    assert spark_load.accepted == duck_load.accepted and spark_load.rejected_by_reason == duck_load.rejected_by_reason
    spark_rows = fetch_rows(spark_engine, "SELECT * FROM raw.observational_impressions WHERE partition_date = $d",
                            {"d": day})
    assert _stored(spark_rows) == _stored(duck_rows), "the stored rows, value for value"
    spark_quarantine = fetch_rows(spark_engine, QUARANTINE_IDS, {"d": day})
    assert collections.Counter(spark_quarantine) == collections.Counter(duck_quarantine)


def test_a_day_with_extras_is_refused_on_spark_naming_the_file_and_writing_nothing(spark_engine, parity_home):
    """The Spark loader has no extras table: loading the day's impressions without its extras would lose them
    silently, so the day is refused before any write (the previous partition stays) and the message says where it
    loads (DuckDB)."""
    from fair_pipeline.ingestion import contract, extras_corpus
    from fair_pipeline.ingestion.landing import landing_files as files_in

    landing, day = parity_home / "extras_landing", extras_corpus.DAY.isoformat()
    extras_corpus.write_day(landing, extras_corpus.generate(1)[0])
    extras_files = files_in(partition_dir(landing / contract.EXTRAS_DIR, "observational", extras_corpus.DAY))
    assert extras_files
    before = fetch_rows(spark_engine, "SELECT count(*) FROM raw.observational_impressions WHERE partition_date = $d",
                        {"d": day}) if spark_engine.table_exists(("raw", "observational_impressions")) else [(0,)]
    with pytest.raises(loads.LandingFileError, match=rf"{re.escape(str(extras_files[0]))}: source-specific extras are loaded by the duckdb engine "
                                                    r"only; ingest this day with --engine duckdb"):
        spark_loads.load_partition(spark_engine, landing, "observational", day)
    after = fetch_rows(spark_engine, "SELECT count(*) FROM raw.observational_impressions WHERE partition_date = $d",
                       {"d": day}) if spark_engine.table_exists(("raw", "observational_impressions")) else [(0,)]
    assert after == before
