"""The Spark engine's writes: all or nothing per partition (zero-row writes, failing queries, stray rows, schema
changes, a crash before or after the commit, several tables' partitions together), superseded versions emptied,
tables and views found again by a new engine on the same location (a path or a file:// URI, changed through Spark
only), queries with both parameter styles and results streamed in order."""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.platform.engines import WarehouseWriteError, log_snapshot, spark_tables, version_log, warehouse_files
from fair_pipeline.platform.engines.spark_engine import SparkEngine

TABLE = ("marts", "t")
DAY1, DAY2 = "2026-01-01", "2026-01-02"


@pytest.fixture
def engine(spark, tmp_path):
    location = tmp_path / "spark warehouse+é"  # a space and non-ASCII: Hadoop takes the URI's path as written
    engine = SparkEngine(spark, f"file://{location}")
    engine.register_frame("src", pa.table({
        "partition_date": pa.array([pd.Timestamp(DAY1).date()] * 3 + [pd.Timestamp(DAY2).date()] * 2, pa.date32()),
        "v": pa.array([1, 2, 3, 10, 20], pa.int64()),
        "text": pa.array(["1", "2", "3", "x", "20"]),
    }))
    return engine


def _write(engine, day, where="TRUE"):
    sql = f"SELECT partition_date, v FROM src WHERE partition_date = $partition_date AND {where}"
    return engine.replace_partition(TABLE, sql, {"partition_date": day}, day)


def _rows(engine):
    return engine.query_df("SELECT CAST(partition_date AS VARCHAR) AS d, v FROM marts.t ORDER BY v").values.tolist()


def _no_leftovers(engine):
    """Only the live versions hold rows: superseded and failed writes were emptied (through Spark's writer)."""
    live = {e.version for e in log_snapshot.read_local(engine.root).state.values() if e.version}
    root = warehouse_files.local_path(engine.root)
    for version in root.glob("*/*/write_id=*"):
        rows = sum(pq.read_metadata(f).num_rows for f in version.rglob("*.parquet") if not f.name.startswith("."))
        assert rows == 0 or version.name.removeprefix("write_id=") in live, (version, rows)


def test_a_partition_is_replaced_exactly_and_a_zero_row_write_empties_it(engine):
    assert _write(engine, DAY1) == 3 and _write(engine, DAY2) == 2
    assert _write(engine, DAY1, "v >= 2") == 2
    assert _rows(engine) == [["2026-01-01", 2], ["2026-01-01", 3], ["2026-01-02", 10], ["2026-01-02", 20]]
    # Plain Parquet overwrite with zero rows would keep the old files; the swap removes them.
    assert _write(engine, DAY1, "FALSE") == 0
    assert _rows(engine) == [["2026-01-02", 10], ["2026-01-02", 20]]
    assert engine.row_count(TABLE, DAY1) == 0 and engine.row_count(TABLE, DAY2) == 2
    _no_leftovers(engine)


def test_a_query_failing_while_it_writes_leaves_the_partition_as_it_was(engine):
    _write(engine, DAY2)
    failing = "SELECT partition_date, CAST(text AS BIGINT) AS v FROM src WHERE partition_date = $partition_date"
    with pytest.raises(Exception, match="(?i)cast|invalid"):  # ANSI mode: 'x' is not a number, at run time
        engine.replace_partition(TABLE, failing, {"partition_date": DAY2}, DAY2)
    assert _rows(engine) == [["2026-01-02", 10], ["2026-01-02", 20]]
    _no_leftovers(engine)


def test_rows_outside_the_partition_and_changed_columns_are_refused(engine):
    stray = "SELECT partition_date, v FROM src WHERE partition_date >= $partition_date"
    with pytest.raises(WarehouseWriteError, match="2 rows whose partition_date is not 2026-01-01"):
        engine.replace_partition(TABLE, stray, {"partition_date": DAY1}, DAY1)
    assert not engine.table_exists(TABLE)  # a refused first write creates no table
    _write(engine, DAY1)
    with pytest.raises(WarehouseWriteError, match="now returns columns"):
        engine.replace_partition(TABLE, "SELECT partition_date, v, v AS w FROM src WHERE partition_date = $partition_date",
                                 {"partition_date": DAY1}, DAY1)
    assert _rows(engine) == [["2026-01-01", 1], ["2026-01-01", 2], ["2026-01-01", 3]]
    _no_leftovers(engine)


def _crash_on_commit(monkeypatch):
    def crash(spark, root, commit_id, entries):
        raise OSError("injected crash")

    monkeypatch.setattr(version_log, "_write_commit", crash)


def test_a_crash_before_the_commit_leaves_the_old_rows_live_and_after_it_the_new(engine, spark, monkeypatch):
    _write(engine, DAY1)
    _crash_on_commit(monkeypatch)
    with pytest.raises(OSError, match="injected crash"):  # the new version is written, not committed
        _write(engine, DAY1, "v = 3")
    monkeypatch.undo()
    reopened = SparkEngine(spark, engine.root)  # a new process sees the same
    assert _rows(reopened) == [["2026-01-01", 1], ["2026-01-01", 2], ["2026-01-01", 3]]

    def crash(*args):
        raise OSError("injected crash after the commit")

    monkeypatch.setattr(spark_tables.VersionedTables, "_empty", crash)
    with pytest.raises(OSError, match="after the commit"):  # before the superseded version was emptied
        _write(reopened, DAY1, "v = 3")
    monkeypatch.undo()
    assert _rows(SparkEngine(spark, engine.root)) == [["2026-01-01", 3]]


def test_partitions_of_several_tables_are_replaced_together_or_not_at_all(engine, spark, monkeypatch):
    """The loader's raw rows and quarantine rows of a day: a failing second query, or a crash before the commit,
    leaves both tables as they were; one commit makes both new."""
    other = ("raw", "q")
    both = [(TABLE, "SELECT partition_date, v FROM src WHERE partition_date = $partition_date AND v >= 2"),
            (other, "SELECT partition_date, v FROM src WHERE partition_date = $partition_date AND v < 2")]
    assert engine.replace_partitions(both, {"partition_date": DAY1}, DAY1) == [2, 1]
    failing = (other, "SELECT partition_date, CAST(text AS BIGINT) AS v FROM src WHERE partition_date = $partition_date")
    with pytest.raises(Exception, match="(?i)cast|invalid"):
        engine.replace_partitions([(TABLE, "SELECT partition_date, v FROM src WHERE partition_date = $partition_date"),
                                   failing], {"partition_date": DAY2}, DAY2)
    assert _rows(engine) == [["2026-01-01", 2], ["2026-01-01", 3]] and engine.row_count(other) == 1
    _no_leftovers(engine)
    swapped = [(TABLE, "SELECT partition_date, v FROM src WHERE partition_date = $partition_date AND v = 1"),
               (other, "SELECT partition_date, v * 100 AS v FROM src WHERE partition_date = $partition_date")]
    _crash_on_commit(monkeypatch)
    with pytest.raises(OSError, match="injected crash"):
        engine.replace_partitions(swapped, {"partition_date": DAY1}, DAY1)
    monkeypatch.undo()
    reopened = SparkEngine(spark, engine.root)
    assert _rows(reopened) == [["2026-01-01", 2], ["2026-01-01", 3]]
    assert reopened.query_df("SELECT v FROM raw.q ORDER BY v")["v"].tolist() == [1]
    assert reopened.replace_partitions(swapped, {"partition_date": DAY1}, DAY1) == [1, 3]
    assert _rows(reopened) == [["2026-01-01", 1]]
    assert reopened.query_df("SELECT v FROM raw.q ORDER BY v")["v"].tolist() == [100, 200, 300]
    commits = {e.commit_id for e in version_log.read_local(engine.root) if e.kind == version_log.PARTITION}
    assert len(commits) == 2  # each successful replacement of both tables was one commit


def test_tables_and_views_are_found_again_by_a_new_engine(engine, spark):
    _write(engine, DAY1)
    _write(engine, DAY2)
    engine.create_view(("staging", "doubled"), "SELECT partition_date, 2 * v AS v2 FROM marts.t")
    engine.replace_table(("marts", "total"), "SELECT sum(v2) AS s FROM staging.doubled")
    reopened = SparkEngine(spark, warehouse_files.local_path(engine.root))  # a path names the same file:// location
    assert reopened.root == engine.root
    assert reopened.table_columns(("staging", "doubled")) == ["partition_date", "v2"]
    assert reopened.table_columns(TABLE) == ["partition_date", "v"]
    assert reopened.query_df("SELECT s FROM marts.total")["s"].tolist() == [2 * (1 + 2 + 3 + 10 + 20)]
    assert reopened.row_count(("staging", "doubled"), DAY2) == 2



def test_a_new_engine_rebinds_exactly_the_tables_another_writer_changed(engine, spark, tmp_path, monkeypatch):
    """Each Dagster step constructs an engine in the run's one session: a table the session already binds to its
    live versions is not read again, and one whose versions changed since (a commit of another process, here a
    writer with its own reading of the log, or the same view names bound to another warehouse) is, so a binding
    never serves superseded rows."""
    _write(engine, DAY1)
    _write(engine, DAY2)
    engine.create_view(("staging", "doubled"), "SELECT partition_date, 2 * v AS v2 FROM marts.t")
    engine.replace_table(("marts", "total"), "SELECT sum(v) AS s FROM marts.t")
    reads = []
    frame = spark_tables.VersionedTables.frame
    monkeypatch.setattr(spark_tables.VersionedTables, "frame", lambda self, name: reads.append(name) or frame(self, name))
    assert _rows(SparkEngine(spark, engine.root)) == [["2026-01-01", 1], ["2026-01-01", 2], ["2026-01-01", 3],
                                                       ["2026-01-02", 10], ["2026-01-02", 20]]
    assert reads == []

    other_process = spark_tables.VersionedTables(spark, engine.root)  # binds no session view
    other_process.write_partitions([("marts.t", spark.sql(
        "SELECT partition_date, 7 * v AS v FROM src WHERE partition_date = DATE'2026-01-01'"))], DAY1)
    other_process.write_table("marts.total", spark.sql("SELECT CAST(-5 AS BIGINT) AS s"))
    fresh = SparkEngine(spark, engine.root)
    assert sorted(reads) == ["marts.t", "marts.total"]
    expected = [["2026-01-01", 7], ["2026-01-02", 10], ["2026-01-01", 14], ["2026-01-02", 20], ["2026-01-01", 21]]
    assert _rows(fresh) == expected
    assert fresh.query_df("SELECT sum(v2) AS s FROM staging.doubled")["s"].tolist() == [2 * (7 + 14 + 21 + 10 + 20)]
    assert fresh.query_df("SELECT s FROM marts.total")["s"].tolist() == [-5]

    elsewhere = SparkEngine(spark, f"file://{tmp_path / 'another warehouse'}")  # the same view names, other rows
    _write(elsewhere, DAY1, "v = 1")
    elsewhere.replace_table(("marts", "total"), "SELECT CAST(0 AS BIGINT) AS s")
    assert _rows(elsewhere) == [["2026-01-01", 1]]
    back = SparkEngine(spark, engine.root)
    assert _rows(back) == expected and back.query_df("SELECT s FROM marts.total")["s"].tolist() == [-5]
    assert back.query_df("SELECT sum(v2) AS s FROM staging.doubled")["s"].tolist() == [2 * (7 + 14 + 21 + 10 + 20)]

def test_parameters_and_ordered_streams(engine):
    _write(engine, DAY1)
    _write(engine, DAY2)
    positional = engine.query_df("SELECT v FROM marts.t WHERE v BETWEEN ? AND ? ORDER BY v", [2, 10])
    assert positional["v"].tolist() == [2, 3, 10]
    named = engine.query_df("SELECT count(*) AS n FROM marts.t WHERE list_contains($wanted, v)", {"wanted": [1, 20, 99]})
    assert named["n"].tolist() == [2]
    with pytest.raises(ValueError, match="not bound"):
        engine.query_df("SELECT v FROM marts.t WHERE v = $missing", {})
    batches = list(engine.stream_batches("SELECT v FROM marts.t ORDER BY v DESC", batch_rows=2))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert pa.Table.from_batches(batches)["v"].to_pylist() == [20, 10, 3, 2, 1]


def test_a_file_input_by_local_path_is_read_by_the_driver_and_by_uri_by_the_executors(engine, tmp_path, monkeypatch):
    """Executors on other hosts cannot see a path on the driver's machine: such a file (the simulator's truth)
    reaches them as data, bounded in rows; a URI is read where the executors are."""
    import pyarrow.parquet as pq

    from fair_pipeline.platform.engines import spark_engine

    path = tmp_path / "truth dir" / "truth.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"item_id": ["a", "b", "é+\"c"], "relevance": [1, 0, 1]}), path)
    sql = "SELECT item_id, relevance FROM read_parquet($p) ORDER BY item_id"
    # Hadoop takes a URI's path unescaped (as_uri's %20 would name another file)
    by_path, by_uri = engine.frame(sql, {"p": str(path)}), engine.frame(sql, {"p": f"file://{path}"})
    assert by_path.inputFiles() == [] and by_uri.inputFiles()  # the path's rows are in the plan, the URI's a scan
    assert by_path.toPandas().values.tolist() == by_uri.toPandas().values.tolist() == [["a", 1], ["b", 0], ["é+\"c", 1]]
    monkeypatch.setattr(spark_engine, "MAX_DRIVER_FILE_ROWS", 2)
    with pytest.raises(WarehouseWriteError, match=r"truth\.parquet: 3 rows are too many .* give its URI"):
        engine.frame(sql, {"p": str(path)})


def test_a_stage_runs_as_many_tasks_whatever_the_rows(spark, tmp_path):
    """Every task returns its status and metrics to the driver, so the engine's session fixes the task count of a
    scan (the cluster's cores) and of a shuffle (spark.sql.shuffle.partitions, AQE coalescing off) independently
    of the rows: what the driver receives does not grow with a day (benchmarks/bench_spark_cluster.py)."""
    import numpy as np
    import pyarrow.parquet as pq
    from pyspark.sql import functions

    tasks = {}
    for rows in (1_000, 300_000):
        path = tmp_path / f"{rows}.parquet"
        pq.write_table(pa.table({"k": pa.array(np.arange(rows) % 97), "v": pa.array(np.arange(rows) * 0.5)}), path,
                       row_group_size=rows // 10)
        scan = spark.read.parquet(str(path))
        shuffled = scan.groupBy("k").agg(functions.sum("v").alias("v")).select(functions.spark_partition_id().alias("p"))
        tasks[rows] = (scan.rdd.getNumPartitions(), shuffled.distinct().count())
    expected = (spark.sparkContext.defaultParallelism, int(spark.conf.get("spark.sql.shuffle.partitions")))
    assert tasks[1_000] == tasks[300_000] == expected, tasks


def _write_earlier_layout(root) -> dict[str, bytes]:
    """A warehouse as the layout before the commit log left it (written with pyarrow, as Spark's writer lays it
    out): two days of a partitioned table whose partition column is not last, an unpartitioned table and a view.
    Returns every file's bytes."""
    from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType

    labels = ['say "hi"', "a+b", "Ελληνικά 日本語", "<b>&amp;</b>"]
    schema = StructType([StructField("source", StringType()), StructField("partition_date", DateType()),
                         StructField("label", StringType()), StructField("n", LongType())])
    table = root / "marts" / "daily"
    for day, rows in ((DAY1, labels[:3]), (DAY2, labels[1:])):
        (table / f"partition_date={day}").mkdir(parents=True)
        pq.write_table(pa.table({"source": ["observational"] * len(rows), "label": rows,
                                 "n": list(range(len(rows)))}), table / f"partition_date={day}" / "part-00000.parquet")
    (table / "_schema.json").write_text(schema.json())
    items = root / "raw" / "items" / "current"
    items.mkdir(parents=True)
    pq.write_table(pa.table({"item_id": labels, "group_id": ["g1", "g2", "g3", "g'4"]}), items / "part-00000.parquet")
    (items / "_schema.json").write_text(StructType([StructField("item_id", StringType()),
                                                    StructField("group_id", StringType())]).json())
    (root / "raw" / "quarantine").mkdir()  # no day had rows: the earlier layout kept its schema only
    (root / "raw" / "quarantine" / "_schema.json").write_text(StructType([
        StructField("partition_date", DateType()), StructField("reason", StringType())]).json())
    (root / "_views.json").write_text('{"staging.v": "SELECT label FROM marts.daily"}')
    return {str(path): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _earlier_files(root) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _commits(root) -> set[str]:
    return {e.commit_id for e in version_log.read_local(f"file://{root}")}


OLD_DAILY = sorted([(DAY1, "observational", label, n) for n, label in enumerate(['say "hi"', "a+b", "Ελληνικά 日本語"])]
                   + [(DAY2, "observational", label, n) for n, label in enumerate(["a+b", "Ελληνικά 日本語", "<b>&amp;</b>"])])


def _daily(engine):
    return sorted(tuple(r) for r in engine.query_df(
        "SELECT CAST(partition_date AS VARCHAR) AS d, source, label, n FROM marts.daily").values.tolist())


def test_a_warehouse_of_the_earlier_layout_is_adopted_in_one_commit(spark, tmp_path, caplog):
    root = tmp_path / "old warehouse+é"
    files = _write_earlier_layout(root)
    (root / "_views.json").write_text('{"staging.v": "SELECT label, n FROM marts.daily", '
                                      '"staging.w": "SELECT label FROM staging.v WHERE n > 0", '
                                      '"staging.q": "SELECT reason FROM raw.quarantine"}')
    files = _earlier_files(root)
    with caplog.at_level("INFO", logger="fair_pipeline.platform.engines.earlier_layout"):
        engine = SparkEngine(spark, f"file://{root}")
    adopted = [r.getMessage() for r in caplog.records if "adopted" in r.getMessage()]
    assert len(adopted) == 6 and f"adopted marts.daily from the earlier layout of file://{root}: 6 rows in 2 days" \
        in adopted[0] and "adopted raw.items" in adopted[1]
    assert engine.table_columns(("marts", "daily")) == ["source", "partition_date", "label", "n"]  # order kept
    assert _daily(engine) == OLD_DAILY
    items = sorted(engine.query_df("SELECT group_id, item_id FROM raw.items").values.tolist())
    assert items == [["g'4", "<b>&amp;</b>"], ["g1", 'say "hi"'], ["g2", "a+b"], ["g3", "Ελληνικά 日本語"]]
    assert sorted(engine.query_df("SELECT label FROM staging.w")["label"]) == sorted(
        ["a+b", "Ελληνικά 日本語", "Ελληνικά 日本語", "<b>&amp;</b>"])
    assert engine.table_columns(("raw", "quarantine")) == ["partition_date", "reason"]
    assert engine.row_count(("staging", "q")) == 0 and engine.query_df("SELECT * FROM raw.quarantine").empty
    assert version_log.live_partition_dates(version_log.read_local(f"file://{root}"), "raw.quarantine") == []
    assert len(_commits(root)) == 1
    assert {k: v for k, v in _earlier_files(root).items() if k in files} == files  # the earlier files untouched
    caplog.clear()
    with caplog.at_level("INFO", logger="fair_pipeline.platform.engines.earlier_layout"):
        again = SparkEngine(spark, f"file://{root}")
    assert not caplog.records and len(_commits(root)) == 1 and _daily(again) == OLD_DAILY
    # Rewriting one day of the adopted version leaves its other day live
    again.register_frame("src", pa.table({"source": ["randomized"], "partition_date": pa.array(
        [pd.Timestamp(DAY1).date()], pa.date32()), "label": ["new"], "n": pa.array([9], pa.int64())}))
    again.replace_partition(("marts", "daily"), "SELECT * FROM src WHERE partition_date = $partition_date",
                            {"partition_date": DAY1}, DAY1)
    assert _daily(SparkEngine(spark, f"file://{root}")) == sorted(
        [(DAY1, "randomized", "new", 9)] + [r for r in OLD_DAILY if r[0] == DAY2])


def test_an_adoption_killed_before_its_commit_changes_nothing_and_is_done_again(spark, tmp_path, monkeypatch):
    root = tmp_path / "old"
    _write_earlier_layout(root)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed before the commit")

    with monkeypatch.context() as patch:
        patch.setattr(version_log, "commit", killed)
        with pytest.raises(KeyboardInterrupt):
            SparkEngine(spark, f"file://{root}")
    assert _commits(root) == set()
    engine = SparkEngine(spark, f"file://{root}")
    assert _daily(engine) == OLD_DAILY and len(_commits(root)) == 1
    assert engine.query_df("SELECT count(*) AS n FROM raw.items")["n"].tolist() == [4]


def test_an_earlier_layout_with_an_interrupted_swap_is_refused_by_name(spark, tmp_path):
    from fair_pipeline.platform.engines.earlier_layout import EarlierLayoutError

    root = tmp_path / "old"
    _write_earlier_layout(root)
    (root / "marts" / "daily" / "_swap").mkdir()
    (root / "marts" / "daily" / "_swap" / "abc.json").write_text('{"swaps": []}')
    files = _earlier_files(root)
    with pytest.raises(EarlierLayoutError, match="a partition swap was interrupted.*_swap/abc.json"):
        SparkEngine(spark, f"file://{root}")
    assert _earlier_files(root) == files


def test_a_new_root_and_an_uncommitted_version_are_not_taken_for_the_earlier_layout(spark, tmp_path):
    new_root = tmp_path / "brand new"
    engine = SparkEngine(spark, f"file://{new_root}")
    assert engine.tables.table_names() == [] and not new_root.exists()  # opened silently, nothing created
    # A version written by a process killed before the warehouse's first commit: the commit-log layout, not adopted
    version = tmp_path / "killed" / "marts" / "t" / "write_id=abc" / f"partition_date={DAY1}"
    version.mkdir(parents=True)
    pq.write_table(pa.table({"v": [1]}), version / "part-00000.parquet")
    assert SparkEngine(spark, f"file://{tmp_path / 'killed'}").tables.table_names() == []
