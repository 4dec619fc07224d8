"""Cost of model selection's off-policy exposure of every candidate on the driver, side by side.

    python benchmarks/bench_exposure_totals.py --requests 5000 --candidates 44

The logged rows model_selection reads (`audit.exposure_offpolicy.sampled_requests`: at most 5,000 requests however
large the day): ``--requests`` requests of 20 shown items drawn from a catalogue with Pareto popularity, three
groups, clicks decaying with the slot; ``--candidates`` random re-rankings of them. Per way, one run each, in this
order: CPU seconds (process time), the peak of memory allocated and what stays allocated afterwards (tracemalloc):
  per_candidate  `exposure_parity` of each ranking on the raw item / request ids, totals kept (each audit
                 factorizes the item, request and item x request clusters itself and labels its own totals)
  shared         `offpolicy_exposure` with kept totals (model selection when the metric weighs exposure: the
                 clusters factorized once, every candidate's totals on the same index)
  not_kept       `offpolicy_exposure` without totals (model selection with exposure weight 0)
Retained: the candidates' `paired_exposure.disparity_totals` (what model selection holds until the ranking).
Printed: each figure, per candidate, and the ratios per_candidate / shared. SIMULATED data.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import pandas as pd

from fair_pipeline.audit.exposure_offpolicy import offpolicy_exposure, reranked_positions
from fair_pipeline.audit.stats.exposure import exposure_parity
from fair_pipeline.selection.elicitation.paired_exposure import disparity_totals

SLOTS = 20


def logged_rows(requests: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = requests * SLOTS
    popularity = rng.pareto(1.3, max(100, n // 5)) + 1
    item = rng.choice(popularity.size, n, p=popularity / popularity.sum())
    slot = np.tile(np.arange(1, SLOTS + 1), requests)
    return pd.DataFrame({"request_id": np.repeat([f"request-{i}" for i in range(requests)], SLOTS), "position": slot,
                         "item_id": [f"item-{i}" for i in item], "group": np.array(["a", "b", "c"])[item % 3],
                         "click": (rng.random(n) < 0.4 / np.sqrt(slot)).astype(np.int8)})


def _per_candidate(rows, scorers, curve):
    clusters = {"item_id": rows["item_id"].to_numpy(), "request_id": rows["request_id"].to_numpy()}
    return {name: exposure_parity(rows["position"], rows["click"], rows["group"].to_numpy(dtype=object), curve,
                                  clusters=clusters, keep_totals=True,
                                  ranked_positions=reranked_positions(rows["request_id"], rows["position"], score(rows)))
            for name, score in scorers.items()}


WAYS = {"per_candidate": _per_candidate,
        "shared": lambda rows, scorers, curve: offpolicy_exposure(rows, scorers, curve, keep_totals=True),
        "not_kept": lambda rows, scorers, curve: offpolicy_exposure(rows, scorers, curve, keep_totals=False)}


def measure(way: str, rows: pd.DataFrame, candidates: int) -> dict:
    curve = 1.0 / np.arange(1, SLOTS + 1) ** 0.7
    scorers = {f"candidate {j}": (lambda r, j=j: np.random.default_rng(j).random(len(r))) for j in range(candidates)}
    tracemalloc.start()
    cpu = time.process_time()
    found = WAYS[way](rows, scorers, curve)
    kept = {name: disparity_totals(result) for name, result in found.items()}
    del found
    cpu = time.process_time() - cpu
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert all((d is not None) == (way != "not_kept") for d in kept.values())
    return {"cpu_s": cpu, "peak_mb": peak / 2**20, "retained_mb": retained / 2**20}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--candidates", type=int, default=44)
    args = parser.parse_args(argv)
    rows = logged_rows(args.requests)
    print(f"{len(rows):,} logged impressions ({args.requests:,} requests x {SLOTS} slots, "
          f"{rows['item_id'].nunique():,} items), {args.candidates} candidates")
    out = {way: measure(way, rows, args.candidates) for way in WAYS}
    table = pd.DataFrame(out).T
    table["retained_mb_per_candidate"] = table["retained_mb"] / args.candidates
    print(table.round(2).to_string())
    for column in ("cpu_s", "peak_mb", "retained_mb"):
        print(f"per_candidate / shared {column}: {out['per_candidate'][column] / out['shared'][column]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
