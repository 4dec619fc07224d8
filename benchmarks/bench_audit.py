"""Benchmarks of the fairness audit. Ratios are measured side by side in one run.

1. In memory, N rows (default 1e7), five cutoffs: time of ``truncated_auc`` / time of ``np.sort`` of
   the same scores (target <= 2). Rounds alternate the two calls; we report the ratio of the
   fastest runs and the median of per-round ratios (the machine is shared and noisy).
2. Speed-up over a 200-resample bootstrap of ``sklearn.metrics.roc_auc_score(max_fpr=a)`` at the
   five cutoffs (target >= 100x). A full bootstrap at 1e7 rows takes hours, so we time
   ``--boot-resamples`` resamples (default 2) and extrapolate linearly to 200 (each resample is
   the same amount of work), and say so in the output.
3. SQL path: a Parquet file of ``--sql-rows`` rows (default 1e8; two groups, continuous scores, so
   ~all scores are distinct) is generated in a temp dir; ``fair-pipeline audit`` runs in a child
   process and we report its wall time and peak resident memory (target <= 4 GB).

    python benchmarks/bench_audit.py                      # full size
    python benchmarks/bench_audit.py --rows 1e6 --sql-rows 1e6   # quick
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fair_pipeline.audit import truncated_auc

CUTOFFS = [0.05, 0.1, 0.2, 0.5, 1.0]


def make_scores(rng, n: int, kind: str):
    y = rng.random(n) < 0.3
    z = rng.normal(size=n) + 1.0 * y
    s = 1.0 / (1.0 + np.exp(-z)) if kind == "probability" else z
    return s, y


def time_once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_in_memory(rows: int, rounds: int, kind: str, rng) -> dict:
    s, y = make_scores(rng, rows, kind)
    truncated_auc(s[:1000], y[:1000], CUTOFFS)  # warm imports
    t_sort, t_auc = [], []
    for _ in range(rounds):
        t_sort.append(time_once(lambda: np.sort(s)))
        t_auc.append(time_once(lambda: truncated_auc(s, y, CUTOFFS)))
    ratios = np.array(t_auc) / np.array(t_sort)
    return {"rows": rows, "scores": kind, "sort_s": min(t_sort), "truncated_auc_s": min(t_auc),
            "ratio_of_best": min(t_auc) / min(t_sort), "median_round_ratio": float(np.median(ratios)),
            "_data": (s, y)}


def bench_bootstrap(s, y, resamples: int, rng, t_auc: float) -> dict:
    from sklearn.metrics import roc_auc_score

    n = s.size
    t = time.perf_counter()
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        ys, ss = y[idx], s[idx]
        for a in CUTOFFS:
            roc_auc_score(ys, ss, max_fpr=a if a < 1 else None)
    per = (time.perf_counter() - t) / resamples
    return {"bootstrap_resamples_timed": resamples, "seconds_per_resample": per,
            "bootstrap_200_seconds_extrapolated": 200 * per, "truncated_auc_s": t_auc,
            "speedup": 200 * per / t_auc}


def write_parquet(path: Path, rows: int, rng, chunk: int = 5_000_000) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("score", pa.float64()), ("label", pa.int8()), ("group_id", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        done = 0
        while done < rows:
            k = min(chunk, rows - done)
            g = rng.random(k) < 0.2
            y = rng.random(k) < np.where(g, 0.2, 0.35)
            z = rng.normal(size=k) + y * np.where(g, 0.8, 1.2)
            table = pa.table({"score": 1.0 / (1.0 + np.exp(-z)), "label": y.astype(np.int8),
                              "group_id": pa.array(np.where(g, "b", "a")).dictionary_encode()
                              .cast(pa.string())}, schema=schema)
            writer.write_table(table, row_group_size=1_000_000)
            done += k


def bench_sql(rows: int, rng, memory_limit: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_audit_") as tmp:
        path = Path(tmp) / "scored.parquet"
        t = time.perf_counter()
        write_parquet(path, rows, rng)
        t_write = time.perf_counter() - t
        code = ("import json\n"
                "from fair_pipeline.audit.files import audit_file\n"
                "r = audit_file(%r, 'score', 'label', 'group_id', memory_limit=%r)\n"
                "print(json.dumps(r.to_dict()))") % (str(path), memory_limit)
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        result = json.loads(out.stdout)
        return {"rows": rows, "parquet_bytes": os.path.getsize(path), "write_s": t_write,
                "audit_s": wall, "peak_rss_gb": peak_kb / 1024**2, "memory_limit": memory_limit,
                "auc_at_1": {g["group"]: round(g["auc"], 4) for g in result["groups"] if g["cutoff"] == 1.0}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=float, default=1e7, help="rows for the in-memory benchmarks")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--boot-resamples", type=int, default=2)
    p.add_argument("--sql-rows", type=float, default=1e8, help="rows of the generated Parquet file")
    p.add_argument("--memory-limit", default="2GB")
    p.add_argument("--skip-sql", action="store_true")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# bench_audit  numpy {np.__version__}  cores {os.cpu_count()}  "
          f"load average {os.getloadavg()[0]:.1f}")
    res = {}
    for kind in ("probability", "normal"):
        r = bench_in_memory(int(args.rows), args.rounds, kind, rng)
        data = r.pop("_data")
        res[kind] = r
        print(f"[1] truncated_auc vs np.sort, {r['rows']:.0e} rows, {kind} scores, 5 cutoffs: "
              f"sort {r['sort_s']:.3f} s, truncated_auc {r['truncated_auc_s']:.3f} s, "
              f"ratio {r['ratio_of_best']:.2f} (best runs), {r['median_round_ratio']:.2f} (median "
              f"of {args.rounds} alternating rounds)  target <= 2")
        if kind == "probability":
            b = bench_bootstrap(*data, args.boot_resamples, rng, r["truncated_auc_s"])
            res["bootstrap"] = b
            print(f"[2] bootstrap of roc_auc_score(max_fpr) at 5 cutoffs: {b['seconds_per_resample']:.2f} s "
                  f"per resample (timed {b['bootstrap_resamples_timed']}, extrapolated linearly to 200: "
                  f"{b['bootstrap_200_seconds_extrapolated']:.0f} s); truncated_auc with analytic "
                  f"variances {b['truncated_auc_s']:.3f} s -> speed-up {b['speedup']:.0f}x  target >= 100x")
        del data
    if not args.skip_sql:
        q = bench_sql(int(args.sql_rows), rng, args.memory_limit)
        res["sql"] = q
        print(f"[3] SQL path (DuckDB GROUP BY -> streamed sweep), {q['rows']:.0e} rows, 2 groups, "
              f"Parquet {q['parquet_bytes'] / 1e9:.2f} GB: audit {q['audit_s']:.1f} s, peak RSS "
              f"{q['peak_rss_gb']:.2f} GB (DuckDB memory_limit {q['memory_limit']})  target <= 4 GB; "
              f"AUC by group {q['auc_at_1']}")
    print(json.dumps(res, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
