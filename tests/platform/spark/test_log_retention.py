"""Retention of the commit log (`engines.log_retention`): old checkpoints and the commits a kept checkpoint covers
are deleted (what is kept: tests/platform/spark/test_log_checkpoint.py), and no reader loses an entry: not after a
trim killed between any two of its steps, not a reader that listed the log before a trim deleted what it was about
to read, not a reader offered a checkpoint a slow writer built from a read older than the trim. Every state read is compared with the replay of every commit written (recorded as
it was written: the log's own files are what trimming deletes), through Spark and with pyarrow (`promote`'s read)."""
from __future__ import annotations

import pytest

from fair_pipeline.platform.engines import log_files, log_retention, log_snapshot, version_log, warehouse_files
from fair_pipeline.platform.engines.spark_tables import VersionedTables
from fair_pipeline.platform.engines.version_log import Entry
from tests.platform.spark.log_journal import Journal, on_disk

SCHEMA = '{"type":"struct","fields":[{"name":"v","type":"long","nullable":true,"metadata":{}}]}'
LABELS = ['say "hi"', "a+b", "Ελληνικά", "<b>&amp;</b>", "עברית"]


@pytest.fixture
def root(tmp_path):
    return f"file://{tmp_path / 'ware house+é'}"


@pytest.fixture
def journal(monkeypatch):
    return Journal().record(monkeypatch)


def _commit(tables: VersionedTables, n: int) -> None:
    """Commit number `n`: a new key every time, and one key rewritten (or emptied) every commit."""
    tables._commit([Entry(version_log.PARTITION, f"raw.{LABELS[n % len(LABELS)]}", f"2026-02-{n + 1:02d}",
                          version_log.new_id(), n, SCHEMA),
                    Entry(version_log.TABLE, "raw.items", "", None if n % 3 == 2 else version_log.new_id(), n, SCHEMA)])


def _read_everywhere(spark, root: str) -> dict:
    """The state through Spark and with pyarrow, which must agree."""
    through_spark = log_snapshot.read(spark, root).state
    assert log_snapshot.read_local(root).state == through_spark
    return through_spark


KILL_POINTS = ["after the marker", "after a checkpoint's deletion", "amid the commits' deletion",
               "before the markers' deletion"]


@pytest.mark.parametrize("killed", KILL_POINTS)
def test_a_trim_killed_between_any_two_steps_loses_nothing_and_the_next_one_finishes_it(spark, root, journal,
                                                                                       monkeypatch, killed):
    tables = VersionedTables(spark, root, checkpoint_every=2)
    for n in range(6):  # checkpoints of 2, 4, 6 commits: the third's trim deletes the first and commits 1-4
        if n == 5:
            _kill_trim(monkeypatch, killed)
            with pytest.raises(KeyboardInterrupt):
                _commit(tables, n)
            monkeypatch.undo()
            journal.record(monkeypatch)
            assert _read_everywhere(spark, root) == journal.state(), killed
        else:
            _commit(tables, n)
    reopened = VersionedTables(spark, root, checkpoint_every=2)
    assert reopened.state == journal.state()
    for n in range(6, 8):  # the next checkpoint's trim finishes the work
        _commit(reopened, n)
    assert _read_everywhere(spark, root) == journal.state()
    assert len(on_disk(root, "checkpoint")) == 2 and len(on_disk(root, "trim")) == 1
    assert len(on_disk(root, "commit")) == 2  # 7 and 8: the horizon (the checkpoint of 6) covers the rest


def _kill_trim(monkeypatch, killed: str) -> None:
    """The process dies at `killed`: a KeyboardInterrupt, which nothing catches, from the step's call."""
    delete = warehouse_files.HadoopFiles.delete
    calls = []

    def deleting(self, uri):
        calls.append(uri)
        kinds = [warehouse_files.name(u).split("=", 1)[0] for u in calls]
        if (killed == "after a checkpoint's deletion" and kinds[-1] == "checkpoint"
                or killed == "amid the commits' deletion" and kinds.count("commit") == 2
                or killed == "before the markers' deletion" and kinds[-1] == "trim"):
            raise KeyboardInterrupt(killed)
        delete(self, uri)

    def marker_then_killed(spark, root, horizon):
        write_marker(spark, root, horizon)
        raise KeyboardInterrupt(killed)

    write_marker = log_retention.write_marker
    monkeypatch.setattr(warehouse_files.HadoopFiles, "delete", deleting)
    if killed == "after the marker":
        monkeypatch.setattr(log_retention, "write_marker", marker_then_killed)


class _Interleaved:
    """A reader's view of the log (`log_files.LocalLogFiles` or `SparkLogFiles`) that lets writers run once, at a
    chosen call of the reader's, as another process could."""

    def __init__(self, files, at: str, writers):
        self.files, self.at, self.writers, self.calls = files, at, writers, []
        self.root = files.root

    def __getattr__(self, method):
        def call(*args):
            self.calls.append(method)
            if method == self.at and self.writers:
                self.writers.pop()()
            return getattr(self.files, method)(*args)
        return call


@pytest.mark.parametrize(("at", "reader"), [("checkpoint", "pyarrow"), ("commits", "spark"), ("commits", "pyarrow"),
                                            ("read_commits", "spark")])
def test_a_reader_whose_files_a_trim_deletes_while_it_reads_reads_again(spark, root, journal, at, reader):
    """The reader listed the log; then writers commit, checkpoint twice and trim, deleting the reader's checkpoint
    and the commits it would read, before it reads its checkpoint, lists the commits or reads them."""
    tables = VersionedTables(spark, root, checkpoint_every=2)
    for n in range(5):
        _commit(tables, n)
    before = journal.state()

    def writers():
        for n in range(5, 10):
            _commit(tables, n)

    files = log_files.SparkLogFiles(spark, root) if reader == "spark" else log_files.LocalLogFiles(root)
    interleaved = _Interleaved(files, at, [writers])
    with log_snapshot.listing_by_the_driver(spark, root):
        state = log_snapshot.read_snapshot(interleaved).state
    assert interleaved.calls.count("checkpoints") > 2  # it found the log changed and read again
    assert state == journal.state() and set(before) <= set(state)


def test_a_checkpoint_a_slow_writer_built_before_a_trim_is_not_used(spark, root, journal, monkeypatch):
    """Writer A read the log long ago (its checkpoint since deleted); B committed, checkpointed and trimmed since. A's
    checkpoint (its count made the largest) lacks B's deleted commits: readers skip it, and the next trim deletes
    it."""
    a = VersionedTables(spark, root, checkpoint_every=1)
    b = VersionedTables(spark, root, checkpoint_every=2)
    _commit(a, 0)
    a.refresh()
    for n in range(1, 8):
        _commit(b, n)
    a.snapshot.tail = 10_000  # as if A had read a long tail: its checkpoint sorts first
    monkeypatch.setattr(log_retention, "trim", lambda *args: log_retention.Trimmed())
    _commit(a, 8)
    monkeypatch.undo()
    journal.record(monkeypatch)
    slow = max(on_disk(root, "checkpoint"))
    assert log_files.count_of(slow) > 10_000 and (version_log.PARTITION, f"raw.{LABELS[1]}", "2026-02-02") not in a.state
    assert _read_everywhere(spark, root) == journal.state()
    _commit(b, 9)
    _commit(b, 10)
    assert slow not in on_disk(root, "checkpoint") and _read_everywhere(spark, root) == journal.state()


def test_at_least_two_checkpoints_are_kept(spark, root):
    with pytest.raises(ValueError, match="at least 2"):
        log_retention.trim(spark, root, keep=1)
    with pytest.raises(ValueError, match="at least 2"):
        VersionedTables(spark, root, keep_checkpoints=1)
