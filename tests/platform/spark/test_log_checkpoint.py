"""The commit log's checkpoints (`engines.log_snapshot`): the live state read from the latest checkpoint and the
commits after it equals the state replayed from every commit (with pyarrow, apart from the engine), whatever was
replaced, emptied or redefined; a commit that appears after a checkpoint was taken, even with an older time, is not
lost; a checkpoint killed while written or failing is not used and costs nothing but a later checkpoint; a warehouse
without checkpoints reads and is checkpointed by its next writes."""
from __future__ import annotations

import logging

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.platform.engines import log_files, log_snapshot, version_log, warehouse_files
from fair_pipeline.platform.engines.spark_engine import SparkEngine
from fair_pipeline.platform.engines.spark_tables import VersionedTables
from fair_pipeline.platform.engines.version_log import Entry
from tests.platform.spark.log_journal import Journal, checkpoint_rows, on_disk

ODD = ['say "hi"', "a+b", "Ελληνικά 日本語", "<b>&amp;</b>", "O'Brien", "%41/..", ""]
DAYS = [f"2026-01-0{n}" for n in range(1, 6)]


def _replayed(root: str) -> dict:
    """The live state from every commit ever written, read with pyarrow (no checkpoint, no Spark)."""
    return version_log.live(version_log.read_local(root))


def _checkpoints(root: str) -> list[str]:
    path = warehouse_files.local_path(log_files.checkpoints_uri(root))
    return sorted(p.name for p in path.glob("checkpoint=*") if any(path.glob(f"{p.name}/part-*")))


def _checkpoint_rows(root: str, name: str) -> list[dict]:
    files = sorted((warehouse_files.local_path(log_files.checkpoints_uri(root)) / name).glob("part-*.parquet"))
    return [row for f in files for row in pq.read_table(f).to_pylist()]


@pytest.fixture
def root(tmp_path):
    return f"file://{tmp_path / 'ware house+é'}"


SCHEMA = '{"type":"struct","fields":[{"name":"v","type":"long","nullable":true,"metadata":{}}]}'


def _entry(kind, name, partition, version, rows=1, definition=SCHEMA):
    return Entry(kind, name, partition, version, rows, definition)


def test_checkpoint_and_tail_equal_the_full_log_with_odd_keys_replaced_and_emptied(spark, root, monkeypatch):
    """Keys and definitions with quotes, `+`, non-Latin and HTML text: every checkpoint holds each live entry once and
    the ids of the commits it reflects that are still there, and checkpoint + tail equals the replay of every commit
    written after each commit, while the log is trimmed (the two newest checkpoints kept)."""
    journal = Journal().record(monkeypatch)
    tables = VersionedTables(spark, root, checkpoint_every=2)
    live, lives = 0, []
    for step in range(9):
        name = f"marts.{ODD[step % len(ODD)]}"
        partition = f"{DAYS[step % 3]} {ODD[(step * 3) % len(ODD)]}"
        version = None if step % 5 == 4 else version_log.new_id()  # every fifth commit empties its key
        batch = [_entry(version_log.PARTITION, name, partition, version, rows=step)]
        if step % 4 == 0:  # a view redefined (with odd literals) in the same commit
            batch.append(_entry(version_log.VIEW, "staging.v", "", None, 0, f"SELECT '{ODD[step % len(ODD)]}' AS x"))
        tables._commit(batch)
        reread = log_snapshot.read(spark, root)
        assert reread.state == journal.state() == tables.state == log_snapshot.read_local(root).state
        assert len(reread.state) >= live  # never fewer live entries
        live = len(reread.state)
        lives.append(live)
        assert reread.commits == set(on_disk(root, "commit"))
    checkpoints = on_disk(root, "checkpoint")
    # Checkpoints after the 2nd, 4th, 6th and 8th commits; the two newest kept, the 6th's the horizon: the commits
    # it covers (the 3rd to the 6th) deleted with the older checkpoints.
    assert [log_files.count_of(name) for name in checkpoints] == [6, 8] and on_disk(root, "trim") == checkpoints[:1]
    assert len(on_disk(root, "commit")) == 3
    latest = checkpoint_rows(root, checkpoints[-1])
    covered = [r["commit_id"] for r in latest if r["kind"] == log_files.COVERED]
    entries = [r for r in latest if r["kind"] not in (log_files.COVERED, log_files.BASED_ON)]
    # This writer never read the log again (its commits are made directly), so its checkpoint still names the commits
    # deleted since; a reader's next checkpoint names only those its listing found (`reread.commits` above).
    assert len(covered) == len(set(covered)) == 8
    assert {r["name"] for r in latest if r["kind"] == log_files.BASED_ON} == {checkpoints[0]} | {
        r["name"] for r in checkpoint_rows(root, checkpoints[0]) if r["kind"] == log_files.BASED_ON}
    keys = [(r["kind"], r["name"], r["partition"]) for r in entries]
    assert len(keys) == len(set(keys)) == lives[7]  # every live entry after the 8th commit, once
    assert log_snapshot.read(spark, root).tail == 1
    emptied = [e for e in journal.state().values() if e.kind == version_log.PARTITION and e.version is None]
    assert emptied and all(e.key in tables.state and tables.state[e.key].version is None for e in emptied)


def test_a_commit_appearing_after_a_checkpoint_is_read_even_with_an_older_time(spark, root):
    """A slow writer (or one whose clock is behind) commits after another process checkpointed: coverage is by
    commit id, so its entry is read from the tail; an older entry does not displace a newer one of its key."""
    tables = VersionedTables(spark, root, checkpoint_every=1)
    tables._commit([_entry(version_log.PARTITION, "marts.t", DAYS[0], "new")])
    assert len(_checkpoints(root)) == 1
    # Its time is older than the checkpointed entry's (a clock behind): it must not displace it, nor be lost.
    commit_id = version_log.new_id()
    late = [Entry(version_log.PARTITION, "marts.t", DAYS[0], "stale", 1, "{}", 1, commit_id),
            Entry(version_log.PARTITION, "marts.t", DAYS[1], "late " + ODD[2], 1, "{}", 1, commit_id)]
    version_log._write_commit(spark, root, commit_id, late)
    state = log_snapshot.read(spark, root).state
    assert state == _replayed(root)
    assert state[(version_log.PARTITION, "marts.t", DAYS[1])].version == "late " + ODD[2]
    assert state[(version_log.PARTITION, "marts.t", DAYS[0])].version == "new"


def test_two_writers_racing_a_checkpoint_lose_nothing(spark, root):
    """Writer A reads the log, writer B commits, A commits and checkpoints what it read plus its own commit: the
    checkpoint does not cover B's commit, so every reader still sees B's entry."""
    a = VersionedTables(spark, root, checkpoint_every=1)
    b = VersionedTables(spark, root, checkpoint_every=1)
    a.refresh()
    b.refresh()
    b._commit([_entry(version_log.PARTITION, "raw.q", DAYS[1], "from b")])
    a._commit([_entry(version_log.PARTITION, "raw.q", DAYS[0], "from a")])  # A has not read B's commit
    assert (version_log.PARTITION, "raw.q", DAYS[1]) not in a.state
    held = sorted(sorted(r["partition"] for r in _checkpoint_rows(root, name) if r["kind"] == version_log.PARTITION)
                  for name in _checkpoints(root))
    assert held == [[DAYS[0]], [DAYS[1]]]  # B's checkpoint and A's, which does not hold B's commit
    snapshot = log_snapshot.read(spark, root)
    assert snapshot.state == _replayed(root) and len(snapshot.state) == 2 and snapshot.tail == 1
    a.refresh()
    assert a.state[(version_log.PARTITION, "raw.q", DAYS[1])].version == "from b"


def test_a_checkpoint_killed_while_written_is_not_used_and_a_failing_one_is_retried(spark, root, monkeypatch, caplog):
    tables = VersionedTables(spark, root, checkpoint_every=2)
    tables._commit([_entry(version_log.PARTITION, "marts.t", DAYS[0], "v1")])
    # What a process killed during the checkpoint's write leaves: its task's file under Spark's _temporary, never
    # renamed into place (this one claims to cover a commit that does not exist and to hold a wrong entry).
    leftover = (warehouse_files.local_path(log_files.checkpoints_uri(root)) / "checkpoint=999999999999-killed"
                / "_temporary" / "0" / "_temporary" / "attempt_0" / "part-00000.parquet")
    leftover.parent.mkdir(parents=True)
    bogus = [{"commit_id": "x", "committed_at": 2**62, "kind": version_log.PARTITION, "name": "marts.t",
              "partition": DAYS[0], "version": "wrong", "rows": 1, "definition": "{}"},
             {"commit_id": "nothing", "committed_at": None, "kind": log_files.COVERED, "name": None,
              "partition": None, "version": None, "rows": None, "definition": None}]
    schema = pa.schema([(f, pa.string() if k == "string" else pa.int64()) for f, k in version_log.FIELDS])
    pq.write_table(pa.Table.from_pylist(bogus, schema=schema), leftover)
    assert log_snapshot.read(spark, root).state[(version_log.PARTITION, "marts.t", DAYS[0])].version == "v1"

    def failing(*args):
        raise OSError("injected: the checkpoint's write failed")

    monkeypatch.setattr(log_snapshot, "write", failing)
    with caplog.at_level(logging.WARNING, logger="fair_pipeline.platform.engines.spark_tables"):
        tables._commit([_entry(version_log.PARTITION, "marts.t", DAYS[1], "v2")])  # the commit stands
    assert "could not write a checkpoint" in caplog.text and _checkpoints(root) == []
    monkeypatch.undo()
    assert log_snapshot.read(spark, root).state == _replayed(root)
    tables._commit([_entry(version_log.PARTITION, "marts.t", DAYS[0], "v3")])  # still due: written now
    assert len(_checkpoints(root)) == 1
    snapshot = log_snapshot.read(spark, root)
    assert snapshot.tail == 0 and snapshot.state == _replayed(root) and len(snapshot.commits) == 3


def test_a_crash_after_the_commit_before_its_checkpoint_leaves_the_commit_live(spark, root, monkeypatch):
    tables = VersionedTables(spark, root, checkpoint_every=1)

    def killed(*args):
        raise KeyboardInterrupt("killed between the commit and its checkpoint")

    monkeypatch.setattr(log_snapshot, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        tables._commit([_entry(version_log.PARTITION, "marts.t", DAYS[0], "v1")])
    monkeypatch.undo()
    reopened = VersionedTables(spark, root, checkpoint_every=1)
    assert reopened.state[(version_log.PARTITION, "marts.t", DAYS[0])].version == "v1" and _checkpoints(root) == []


def test_a_home_without_checkpoints_reads_its_full_log_and_the_engine_checkpoints_it(spark, root):
    """A warehouse the earlier release wrote (commits only) reads the same, and its next write checkpoints it; data
    written through the engine reads back the same from a new engine after the checkpoint."""
    engine = SparkEngine(spark, root)
    engine.tables.checkpoint_every = 0  # as the earlier release: commits only
    engine.register_frame("src", pa.table({
        "partition_date": pa.array([pd.Timestamp(d).date() for d in DAYS[:3]], pa.date32()),
        "label": pa.array(ODD[:3]), "n": pa.array([1, 2, 3], pa.int64())}))
    sql = "SELECT partition_date, label, n FROM src WHERE partition_date = $partition_date"
    for day in DAYS[:3]:
        engine.replace_partition(("marts", "t"), sql, {"partition_date": day}, day)
    engine.create_view(("staging", "v"), "SELECT label FROM marts.t WHERE label <> '<b>&amp;</b>'")
    assert _checkpoints(root) == []
    reopened = SparkEngine(spark, root)
    assert reopened.tables.state == _replayed(root) and reopened.tables.snapshot.tail == 4
    assert version_log.live(version_log.read_full(spark, root)) == _replayed(root)
    reopened.tables.checkpoint_every = 5
    reopened.replace_partition(("marts", "t"), f"{sql} AND n > 1", {"partition_date": DAYS[0]}, DAYS[0])  # empties
    assert len(_checkpoints(root)) == 1
    third = SparkEngine(spark, root)
    assert third.tables.snapshot.tail == 0 and third.tables.state == _replayed(root)
    rows = third.query_df("SELECT CAST(partition_date AS VARCHAR) AS d, label FROM marts.t ORDER BY d")
    assert rows.values.tolist() == [[DAYS[1], ODD[1]], [DAYS[2], ODD[2]]]
    assert sorted(third.query_df("SELECT label FROM staging.v")["label"]) == sorted(ODD[1:3])
