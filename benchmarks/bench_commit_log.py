"""What an aging commit log costs the Spark warehouse (`engines.version_log`, `engines.log_snapshot`), before and
after its checkpoints, side by side in one run. For each size, a warehouse whose log holds that many commits (one
table, one partition version each, as the engine writes them; the log's files are written directly with pyarrow so
that a size of thousands takes seconds), once as a home of the earlier release left it (no checkpoint) and once
with a checkpoint covering all but the last 50 commits (halfway between two of the engine's checkpoints, which it
writes every 100 commits). Measured: reading the live state from the full log (before) and from the checkpoint and
the commits after it (after); one `replace_partition` as before (the full log read before and after its commit,
never checkpointed) and as now (one read of checkpoint + tail, its own commit applied locally); writing one
checkpoint (what a writer pays every 100 commits); reading the log as retention leaves it (a second checkpoint
built on the first, the commits the first covers deleted: the same tail) and that one trim (a single sample);
`promote`'s read without a JVM (pyarrow) of every commit (before) and of the checkpoint and tail (after). Wall and
CPU time (this process and the local session's JVM), medians of `--repeats`; the ratios to the smallest size, and
after / before.

    python benchmarks/bench_commit_log.py --commits 100,1000,3000 --repeats 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fair_pipeline.platform.engines import log_files, log_retention, log_snapshot, version_log  # noqa: E402
from fair_pipeline.platform.engines.spark_tables import VersionedTables  # noqa: E402

TABLE = ("marts", "aged")
ROWS_SQL = "SELECT CAST($partition_date AS DATE) AS partition_date, v FROM bench_rows"


TAIL = 50


def _aged_log(root: Path, commits: range) -> None:
    """Commits number `commits` of one row each, as `version_log.commit` writes them, each naming another day (every
    row live: the most the driver collects for a log of that size)."""
    schema = pa.schema([(field, pa.string() if kind == "string" else pa.int64()) for field, kind in version_log.FIELDS])
    for n in commits:
        day = (dt.date(2000, 1, 1) + dt.timedelta(days=n)).isoformat()
        commit_id = f"{n:032x}"
        row = {"commit_id": commit_id, "committed_at": n + 1, "kind": version_log.PARTITION, "name": "marts.old",
               "partition": day, "version": None, "rows": 0, "definition": '{"type":"struct","fields":[]}'}
        directory = root / version_log.LOG_DIR / f"commit={commit_id}"
        directory.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist([row], schema=schema), directory / "part-00000.parquet")


class _AsBefore(VersionedTables):
    """The writes of the release before checkpoints: the full log read before each write and again after its
    commit, never checkpointed."""

    def refresh(self) -> None:
        self.snapshot = log_snapshot.Snapshot(version_log.live(version_log.read_full(self.spark, self.root)), set())

    def _commit(self, entries) -> None:
        super()._commit(entries)
        self.refresh()


def _cpu_s(jvm_pid: int) -> float:
    """CPU seconds of this process and of the local session's JVM (from /proc: Linux)."""
    fields = Path(f"/proc/{jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return time.process_time() + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(jvm_pid: int, action, repeats: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), _cpu_s(jvm_pid)
        action()
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu_s(jvm_pid) - cpu)
    return statistics.median(walls), statistics.median(cpus)


def measure(spark, commits: int, repeats: int) -> dict[str, tuple[float, float]]:
    from fair_pipeline.platform.engines.spark_engine import SparkEngine

    jvm_pid = int(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getName().split("@")[0])
    rows = pa.table({"v": pa.array(range(10), pa.int64())})
    with tempfile.TemporaryDirectory(prefix="commit_log_") as tmp:
        before, after, trimmed = Path(tmp) / "before", Path(tmp) / "after", Path(tmp) / "trimmed"
        _aged_log(before, range(commits))
        _aged_log(after, range(commits - min(TAIL, commits // 2)))
        log_snapshot.write(spark, f"file://{after}", log_snapshot.read(spark, f"file://{after}"))
        _aged_log(after, range(commits - min(TAIL, commits // 2), commits))
        old, new, kept = f"file://{before}", f"file://{after}", f"file://{trimmed}"
        assert len(version_log.read_full(spark, old)) == commits
        assert log_snapshot.read(spark, new).state == version_log.live(version_log.read_full(spark, new))
        # As retention leaves it: a second checkpoint on the first, whose covered commits are then deleted.
        shutil.copytree(after, trimmed)
        files = log_files.SparkLogFiles(spark, kept)
        first = max(files.checkpoints()[0])
        covered = files.checkpoint(first)  # the second covers the same commits: `after`'s tail stays a tail
        log_snapshot.write(spark, kept, log_snapshot.Snapshot(dict(covered.state), set(covered.covered), 1, first,
                                                              log_files.count_of(first)))
        trim = _timed(jvm_pid, lambda: log_retention.trim(spark, kept), 1)
        assert log_snapshot.read(spark, kept).state == log_snapshot.read(spark, new).state
        assert len(list((trimmed / version_log.LOG_DIR).iterdir())) == min(TAIL, commits // 2)
        engines = {}
        for name, uri, tables in (("before", old, _AsBefore), ("after", new, VersionedTables)):
            engines[name] = SparkEngine(spark, uri)
            engines[name].tables = tables(spark, uri)
            engines[name].register_frame("bench_rows", rows)
        days = iter(f"2026-01-{1 + n % 28:02d}" for n in range(2 * repeats))

        def write(engine):
            day = next(days)
            return lambda: engine.replace_partition(TABLE, ROWS_SQL, {"partition_date": day}, day)

        snapshot = log_snapshot.read(spark, new)
        return {
            "log read, before (full log)": _timed(jvm_pid, lambda: version_log.read_full(spark, old), repeats),
            "log read, after (checkpoint + tail)": _timed(jvm_pid, lambda: log_snapshot.read(spark, new), repeats),
            "replace_partition, before": _timed(jvm_pid, lambda: write(engines["before"])(), repeats),
            "replace_partition, after": _timed(jvm_pid, lambda: write(engines["after"])(), repeats),
            "checkpoint write": _timed(jvm_pid, lambda: log_snapshot.write(spark, new, snapshot), repeats),
            "log read, trimmed": _timed(jvm_pid, lambda: log_snapshot.read(spark, kept), repeats),
            "trim (once)": trim,
            "promote's read, before (every commit, pyarrow)": _timed(
                jvm_pid, lambda: version_log.live(version_log.read_local(old)), repeats),
            "promote's read, after (checkpoint + tail, pyarrow)": _timed(
                jvm_pid, lambda: log_snapshot.read_local(new), repeats),
        }


def main(argv: list[str] | None = None) -> dict[int, dict[str, tuple[float, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", default="100,1000,3000", help="log sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    from fair_pipeline.platform.engines.spark_engine import spark_session

    spark = spark_session(master=args.master)
    sizes = [int(float(size)) for size in args.commits.split(",")]
    results = {size: measure(spark, size, args.repeats) for size in sizes}
    steps = list(results[sizes[0]])
    print(f"| commits in the log | {' | '.join(f'{step}: wall / CPU s (CPU ratio)' for step in steps)} |")
    print(f"|---:|{'---:|' * len(steps)}")
    for size in sizes:
        cells = [f"{wall:.2f} / {cpu:.2f} ({cpu / results[sizes[0]][step][1]:.2f}x)"
                 for step, (wall, cpu) in results[size].items()]
        print(f"| {size:,} | {' | '.join(cells)} |")
    print()
    print("| commits in the log | log read, after / before: wall, CPU | replace_partition, after / before: wall, CPU "
          "| promote's read, after / before: wall, CPU |")
    print("|---:|---:|---:|---:|")
    for size in sizes:
        step = results[size]
        cells = [f"{step[f'{what}, after' + extra][0] / step[f'{what}, before' + old][0]:.2f}x, "
                 f"{step[f'{what}, after' + extra][1] / step[f'{what}, before' + old][1]:.2f}x"
                 for what, extra, old in (("log read", " (checkpoint + tail)", " (full log)"),
                                          ("replace_partition", "", ""),
                                          ("promote's read", " (checkpoint + tail, pyarrow)", " (every commit, pyarrow)"))]
        print(f"| {size:,} | {' | '.join(cells)} |")
    return results


if __name__ == "__main__":
    main()
