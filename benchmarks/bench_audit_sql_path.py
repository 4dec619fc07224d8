"""The audit's SQL path against its floor: ``audit_file`` / DuckDB's own query of the same shape.

A Parquet file of ``--rows`` rows (default 5e7: two groups, continuous scores, so nearly every score is
distinct, the worst case for the grid) is written to a temp dir. Rounds alternate, in this process:

* floor: ``SELECT score, group, COUNT(*) FILTER (label = 1), COUNT(*) FILTER (label = 0) FROM file
  GROUP BY score, group ORDER BY score DESC``, fetched batch by batch as numpy arrays (nothing computed);
* audit: ``audit_file(file, score, label, group)``: validation counts, the grid query, the streamed sweep
  (9 statistics x 103 cutoffs) and the report tables;
* rowsort (for reference): ``SELECT score, group, label ORDER BY score DESC``, the cheaper shape audit_file
  uses when nearly every score is distinct.

We print wall and CPU time (DuckDB's threads included) of each and the ratios audit / floor of the medians
and of the fastest runs (target <= 1.3; the machine is shared and noisy, so CPU time is the steadier figure).

    python benchmarks/bench_audit_sql_path.py                    # 5e7 rows, 3 rounds (several minutes)
    python benchmarks/bench_audit_sql_path.py --rows 1e6         # quick
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_clustered_audit import timed  # wall and CPU seconds of one call

from fair_pipeline.audit.files import BATCH_ROWS, audit_file


def write_file(path: Path, rows: int, seed: int, chunk: int = 5_000_000) -> None:
    rng = np.random.default_rng(seed)
    schema = pa.schema([("score", pa.float64()), ("label", pa.int8()), ("group_id", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for lo in range(0, rows, chunk):
            k = min(chunk, rows - lo)
            g = rng.random(k) < 0.2
            y = rng.random(k) < np.where(g, 0.2, 0.35)
            z = rng.normal(size=k) + y * np.where(g, 0.8, 1.2)
            writer.write_table(pa.table({"score": 1.0 / (1.0 + np.exp(-z)), "label": y.astype(np.int8),
                                         "group_id": np.where(g, "b", "a")}, schema=schema),
                               row_group_size=1_000_000)


FLOOR = ("SELECT score, group_id, COUNT(*) FILTER (WHERE label = 1) AS n_pos, COUNT(*) FILTER (WHERE label = 0) "
         "AS n_neg FROM read_parquet($1) GROUP BY score, group_id ORDER BY score DESC")
# for reference only: the cheaper query audit_file issues when nearly every score is distinct (no GROUP BY)
ROW_SORT = "SELECT score, group_id, label FROM read_parquet($1) ORDER BY score DESC"


def floor_query(path: str, memory_limit: str, sql: str = FLOOR) -> int:
    """DuckDB's own query, fetched batch by batch as numpy arrays; returns the row count."""
    with tempfile.TemporaryDirectory(prefix="bench_floor_") as tmp:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": tmp,
                                     "preserve_insertion_order": False})
        con.execute("SET enable_progress_bar = false")
        rel = con.sql(sql, params=[path])
        rows = 0
        for batch in rel.to_arrow_reader(BATCH_ROWS):
            arrays = [batch.column(j).to_numpy(zero_copy_only=False) for j in range(batch.num_columns)]
            rows += arrays[0].size
        con.close()
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=5e7, help="rows of the generated file (default 5e7)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--memory-limit", default="2GB", help="DuckDB memory limit of both sides")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = int(args.rows)
    with tempfile.TemporaryDirectory(prefix="bench_audit_sql_") as tmp:
        path = str(Path(tmp) / "scored.parquet")
        write_file(Path(path), rows, args.seed)
        print(f"# {rows:.0e} rows, 2 groups, {os.path.getsize(path) / 1e6:.0f} MB Parquet; cores {os.cpu_count()}, "
              f"load average {os.getloadavg()[0]:.1f}; memory_limit {args.memory_limit}")
        runs = {"floor": [], "audit": [], "rowsort": []}
        for _ in range(args.rounds):
            runs["floor"].append(timed(lambda: floor_query(path, args.memory_limit))[:2])
            runs["rowsort"].append(timed(lambda: floor_query(path, args.memory_limit, ROW_SORT))[:2])
            runs["audit"].append(timed(lambda: audit_file(path, "score", "label", "group_id",
                                                          memory_limit=args.memory_limit))[:2])
        print(f"{'':<8}{'wall s (runs)':>34}{'cpu s (runs)':>34}")
        for name, r in runs.items():
            print(f"{name:<8}{' '.join(f'{w:7.2f}' for w, _ in r):>34}{' '.join(f'{c:7.2f}' for _, c in r):>34}")
        for label, pick in (("median", np.median), ("fastest", np.min)):
            wall = pick([w for w, _ in runs["audit"]]) / pick([w for w, _ in runs["floor"]])
            cpu = pick([c for _, c in runs["audit"]]) / pick([c for _, c in runs["floor"]])
            print(f"audit / floor ({label} runs): wall {wall:.2f}x, cpu {cpu:.2f}x  (target <= 1.3x)")
            wall = pick([w for w, _ in runs["audit"]]) / pick([w for w, _ in runs["rowsort"]])
            cpu = pick([c for _, c in runs["audit"]]) / pick([c for _, c in runs["rowsort"]])
            print(f"  for reference, audit / plain ORDER BY score DESC of the rows ({label} runs): "
                  f"wall {wall:.2f}x, cpu {cpu:.2f}x")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
