"""Cost of two-way (item x query) clustered pairwise accuracies against the query-clustered ones, side by side.

    python benchmarks/bench_pairwise_cost.py --rows 1e6 --rounds 3

A click log's shape: queries of ~10 shown items, items drawn from a catalogue with Pareto popularity (a few items in
thousands of queries), three groups, scores with ties. Per method, alternating rounds: CPU seconds (process time,
median), wall seconds, and the peak of memory allocated (tracemalloc, a separate run). Methods:
  query     pairwise_accuracies(...) query-clustered (the accumulator alone)
  two_way   pairwise_accuracies(..., clusters=(items, queries)) (all rows at once, `PairwiseClusters`)
  streamed  the CLI's file audit path: DuckDB GROUP BY into chunks of whole queries, two passes
            (`audit.pairwise_file`, `TwoWayMoments`), against the same path without items (query-clustered)
Printed: each figure and the ratios two_way / query, streamed two-way / streamed query.
"""
from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import duckdb
import numpy as np
import pandas as pd

from fair_pipeline.audit import pairwise_accuracies
from fair_pipeline.audit.pairwise_file import stream_pairwise


def click_log(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_items = max(100, rows // 20)
    popularity = rng.pareto(1.3, n_items) + 1
    item = rng.choice(n_items, rows, p=popularity / popularity.sum())
    effect = rng.normal(size=n_items)
    return pd.DataFrame({"q": rng.integers(0, max(2, rows // 10), rows), "i": item, "g": (item % 3).astype(str),
                         "s": np.round(effect[item] + rng.normal(size=rows), 2),
                         "l": (effect[item] + rng.normal(size=rows) > 0.5).astype(np.int8)})


def _in_memory(log: pd.DataFrame, two_way: bool):
    clusters = (log["i"].to_numpy(), log["q"].to_numpy()) if two_way else None
    return pairwise_accuracies(log["s"], log["l"], log["g"], log["q"], clusters=clusters)


def _streamed(con, two_way: bool):
    groups = [g for (g,) in con.execute("SELECT DISTINCT g FROM log ORDER BY g").fetchall()]
    return stream_pairwise(con, "SELECT q, g, s, l, i FROM log", [], groups, 200_000, 0.95,
                           item="i" if two_way else None)


def _measure(run) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def _peak(run) -> float:
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    log = click_log(int(args.rows))
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("log", log)
    methods = {"query": lambda: _in_memory(log, False), "two_way": lambda: _in_memory(log, True),
               "streamed_query": lambda: _streamed(con, False), "streamed_two_way": lambda: _streamed(con, True)}
    times = {name: [] for name in methods}
    for _ in range(args.rounds):  # alternating: the machine's load hits every method alike
        for name, run in methods.items():
            times[name].append(_measure(run))
    peaks = {name: _peak(run) for name, run in methods.items()}
    print(f"rows={int(args.rows):,} queries={log['q'].nunique():,} items={log['i'].nunique():,} rounds={args.rounds}")
    print(f"{'method':<18}{'CPU s':>9}{'wall s':>9}{'peak MiB':>10}")
    cpu = {}
    for name in methods:
        cpu[name] = statistics.median(t[0] for t in times[name])
        print(f"{name:<18}{cpu[name]:>9.2f}{statistics.median(t[1] for t in times[name]):>9.2f}{peaks[name]:>10.0f}")
    print(f"two_way / query: CPU {cpu['two_way'] / cpu['query']:.2f}x, peak memory "
          f"{peaks['two_way'] / peaks['query']:.2f}x")
    print(f"streamed two_way / streamed query: CPU {cpu['streamed_two_way'] / cpu['streamed_query']:.2f}x, peak memory "
          f"{peaks['streamed_two_way'] / peaks['streamed_query']:.2f}x (tracemalloc sees Python/numpy, not DuckDB)")


if __name__ == "__main__":
    main()
