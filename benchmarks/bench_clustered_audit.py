"""Cost of the audit on the SQL path, the three targets side by side: the item-clustered audit against the iid
one (`audit_file(..., clusters=[item])` / `audit_file(...)`, target <= 2), the two-way (item x query) clustered
audit against the iid one (`clusters=[item, query]`, target <= 3) and the iid audit against a plain sort of its
rows (DuckDB's ``SELECT score, grp, label ... ORDER BY score DESC`` fetched as numpy arrays, target <= 1.3).

A Parquet file of ``--rows`` impressions (default 1e7) is written to a temp dir: ``--items`` items (default
rows / 10, so each item is shown ~10 times), ``--queries`` queries (default rows / 50), two groups, a
per-impression score (item merit + noise, so nearly every score is distinct: the worst case for the grid) and
the item's 0/1 label. Rounds alternate the sort, the iid audit, the item-clustered and the two-way audit of the
same file in this process; we print wall and CPU time (DuckDB's threads included) and the peak memory of each (the
process's resident set sampled every few milliseconds, above its size when the run starts), the ratios of the
medians and of the fastest runs (the machine is shared and noisy, so CPU time is the steadier figure), with the
load average before and after. Nearly every (item, query) pair is distinct here, so the two-way audit's
intersection stream keeps per-cluster sums for ~rows clusters (~1 KB each): ``--no-two-way`` skips it.

    python benchmarks/bench_clustered_audit.py                   # 1e7 rows, 3 rounds
    python benchmarks/bench_clustered_audit.py --rows 1e6        # quick
"""
from __future__ import annotations

import argparse
import ctypes
import os
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.audit.files import audit_file


def write_file(path: Path, rows: int, items: int, seed: int, queries: int | None = None) -> None:
    rng = np.random.default_rng(seed)
    group = rng.random(items) < 0.4
    relevance = rng.random(items) < np.where(group, 0.3, 0.4)
    merit = relevance + 0.5 * group + rng.normal(size=items)
    writer = None
    chunk = 2_000_000
    for lo in range(0, rows, chunk):
        n = min(chunk, rows - lo)
        item = rng.integers(0, items, n)
        table = pa.table({
            "item_id": item.astype(np.int64),
            "query_id": rng.integers(0, queries or max(1, rows // 50), n).astype(np.int64),
            "grp": np.where(group[item], "b", "a"),
            "score": merit[item] + 0.2 * rng.normal(size=n),
            "label": relevance[item].astype(np.int8),
        })
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    writer.close()


def plain_sort(path: Path, memory_limit: str) -> int:
    """The rows sorted by descending score, fetched batch by batch as numpy arrays (nothing computed)."""
    with tempfile.TemporaryDirectory(prefix="bench_sort_") as tmp:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": tmp,
                                     "preserve_insertion_order": False})
        con.execute("SET enable_progress_bar = false")
        rows = 0
        rel = con.sql("SELECT score, grp, label FROM read_parquet($1) ORDER BY score DESC", params=[str(path)])
        for batch in rel.to_arrow_reader(1 << 18):
            rows += len([batch.column(j).to_numpy(zero_copy_only=False) for j in range(batch.num_columns)][0])
        con.close()
    return rows


PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """The process's resident set now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def release_freed_memory() -> None:
    """Hand memory freed by earlier runs back to the system (glibc keeps it otherwise), so that each run's peak is
    measured from what the process really holds."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def timed(fn) -> tuple[float, float, float]:
    """Wall and CPU seconds of ``fn()`` and its peak resident memory (bytes) above the process's at the start."""
    release_freed_memory()
    start, peak, done = resident_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], resident_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        fn()
    finally:
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        done.set()
        sampler.join()
    return wall, cpu, max(peak[0], resident_bytes()) - start


def ratio_line(name: str, wall: dict, cpu: dict, memory: dict, top: str, bottom: str, target: float) -> str:
    return (f"{name:<16} wall {np.median(wall[top]) / np.median(wall[bottom]):.2f} (median), "
            f"{wall[top].min() / wall[bottom].min():.2f} (fastest); "
            f"CPU {np.median(cpu[top]) / np.median(cpu[bottom]):.2f} (median), "
            f"{cpu[top].min() / cpu[bottom].min():.2f} (fastest); "
            f"peak memory {np.median(memory[top]) / max(np.median(memory[bottom]), 1.0):.2f} (median)   "
            f"target <= {target:g}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--items", type=float, default=None, help="default: rows / 10")
    parser.add_argument("--queries", type=float, default=None, help="default: rows / 50")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-limit", default="4GB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-two-way", action="store_true", help="skip the two-way (item x query) audit")
    args = parser.parse_args(argv)
    rows = int(args.rows)
    items = int(args.items or rows // 10)
    queries = int(args.queries or max(1, rows // 50))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_clustered_") as tmp:
        path = Path(tmp) / "impressions.parquet"
        write_file(path, rows, items, args.seed, queries)

        def audit(clusters=None):
            return audit_file(path, "score", "label", "grp", clusters=clusters, memory_limit=args.memory_limit)

        runs = {"sort": lambda: plain_sort(path, args.memory_limit), "iid": audit,
                "clustered": lambda: audit(["item_id"])}
        if not args.no_two_way:
            runs["two-way"] = lambda: audit(["item_id", "query_id"])
        times = {k: [] for k in runs}
        for _ in range(args.rounds):
            for k, fn in runs.items():
                times[k].append(timed(fn))
        result, iid = audit(["item_id"]), audit()
    wall = {k: np.array([r[0] for r in v]) for k, v in times.items()}
    cpu = {k: np.array([r[1] for r in v]) for k, v in times.items()}
    memory = {k: np.array([r[2] for r in v]) for k, v in times.items()}
    print(f"{rows:,} impressions of {items:,} items (~{rows / items:.0f} per item) and {queries:,} queries, "
          f"2 groups, {args.rounds} alternating rounds; load average {load_before[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    print(f"{'':>10} {'wall median':>12} {'wall min':>9} {'CPU median':>11} {'CPU min':>8} {'peak MB median':>15}")
    for k in times:
        print(f"{k:>10} {np.median(wall[k]):>11.2f}s {wall[k].min():>8.2f}s {np.median(cpu[k]):>10.2f}s "
              f"{cpu[k].min():>7.2f}s {np.median(memory[k]) / 2**20:>15.0f}")
    print(ratio_line("clustered / iid:", wall, cpu, memory, "clustered", "iid", 2))
    if "two-way" in times:
        print(ratio_line("two-way / iid:", wall, cpu, memory, "two-way", "iid", 3))
    print(ratio_line("iid / sort:", wall, cpu, memory, "iid", "sort", 1.3))
    ratio = result.report.pairs["se"].to_numpy() / iid.report.pairs["se"].to_numpy()
    print(f"group-difference SE, clustered / iid, per cutoff: {np.round(ratio, 2).tolist()} "
          f"({int(result.report.groups['clusters'].iloc[0]):,} clusters)")


if __name__ == "__main__":
    main()
