"""What an aging commit log costs the Spark warehouse (`engines.version_log`): for each size, a warehouse whose log
holds that many commits (one table, one partition version each, as the engine writes them; the log's files are
written directly with pyarrow so that a size of thousands takes seconds), then, side by side in one run: reading the
log through Spark (what every write does twice), reading it with pyarrow (what `fair-pipeline promote` does on a
`file://` warehouse) and one `replace_partition` (its write, its count, its commit and its two log reads).
Wall and CPU time (this process and the local session's JVM), medians of `--repeats`, and the
wall ratios to the smallest size.

    python benchmarks/bench_commit_log.py --commits 100,1000,5000 --repeats 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
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

from fair_pipeline.platform.engines import version_log  # noqa: E402

TABLE = ("marts", "aged")
ROWS_SQL = "SELECT CAST($partition_date AS DATE) AS partition_date, v FROM bench_rows"


def _aged_log(root: Path, commits: int) -> None:
    """`commits` commits of one row each, as `version_log.commit` writes them, each naming another day (every row
    live: the most the driver collects for a log of that size)."""
    schema = pa.schema([(field, pa.string() if kind == "string" else pa.int64()) for field, kind in version_log._FIELDS])
    for n in range(commits):
        day = (dt.date(2000, 1, 1) + dt.timedelta(days=n)).isoformat()
        commit_id = f"{n:032x}"
        row = {"commit_id": commit_id, "committed_at": n + 1, "kind": version_log.PARTITION, "name": "marts.old",
               "partition": day, "version": None, "rows": 0, "definition": '{"type":"struct","fields":[]}'}
        directory = root / version_log.LOG_DIR / f"commit={commit_id}"
        directory.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist([row], schema=schema), directory / "part-00000.parquet")


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

    with tempfile.TemporaryDirectory(prefix="commit_log_") as tmp:
        root = Path(tmp) / "warehouse"
        _aged_log(root, commits)
        uri = f"file://{root}"
        engine = SparkEngine(spark, uri)
        engine.register_frame("bench_rows", pa.table({"v": pa.array(range(10), pa.int64())}))
        assert len(version_log.read(spark, uri)) == commits
        jvm_pid = int(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getName().split("@")[0])
        days = iter(f"2026-01-{1 + n % 28:02d}" for n in range(repeats))
        return {
            "read through Spark": _timed(jvm_pid, lambda: version_log.read(spark, uri), repeats),
            "read with pyarrow": _timed(jvm_pid, lambda: version_log.read_local(uri), repeats),
            "replace_partition": _timed(jvm_pid, lambda: engine.replace_partition(
                TABLE, ROWS_SQL, {"partition_date": (day := next(days))}, day), repeats),
        }


def main(argv: list[str] | None = None) -> dict[int, dict[str, tuple[float, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", default="100,1000,5000", help="log sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    from fair_pipeline.platform.engines.spark_engine import spark_session

    spark = spark_session(master=args.master)
    sizes = [int(float(size)) for size in args.commits.split(",")]
    results = {size: measure(spark, size, args.repeats) for size in sizes}
    print(f"| commits in the log | {' | '.join(f'{step}, wall / CPU s' for step in results[sizes[0]])} |")
    print(f"|---:|{'---:|' * len(results[sizes[0]])}")
    for size in sizes:
        cells = []
        for step, (wall, cpu) in results[size].items():
            base = results[sizes[0]][step][0]
            cells.append(f"{wall:.2f} / {cpu:.2f} ({wall / base:.1f}x)")
        print(f"| {size:,} | {' | '.join(cells)} |")
    return results


if __name__ == "__main__":
    main()
