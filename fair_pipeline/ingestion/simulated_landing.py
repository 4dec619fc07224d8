"""Writes simulated landing files (the data contract) plus items and ground truth.

The math lives in `ingestion.simulator`; this module only names rows and writes Parquet.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue_dates import items_folder, pin_before_delivery
from fair_pipeline.ingestion.landing import conform, partition_dir, write_parquet_atomic
from fair_pipeline.ingestion.simulation_config import SimulationConfig
from fair_pipeline.ingestion.simulator import bias_curve, simulate_items, simulate_requests

ITEM_FEATURE_PREFIX = "f"
_POLICY_STREAMS = {"production": 1, "shuffle": 2, "adjacent_swap": 3}


def _dictionary_strings(indices: np.ndarray, values: list[str]) -> pa.Array:
    """Dictionary-encoded strings: millions of ids without materializing a Python string per row.

    Parquet stores them as plain STRING columns (see `landing.write_parquet_atomic`)."""
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(values, pa.string()))


def _group_codes(items: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    values, codes = np.unique(items["group_id"].to_numpy(dtype=str), return_inverse=True)
    return values.tolist(), codes


def _policy_table(config: SimulationConfig, items: pd.DataFrame, day: dt.date, policy: str, n_requests: int) -> pa.Table:
    sim = simulate_requests(config, items, day, policy, n_requests, stream=_POLICY_STREAMS[policy])
    request_ids = [f"{day:%Y%m%d}-{policy}-{i:07d}" for i in range(n_requests)]
    query_ids = [f"q-{day:%Y%m%d}-{policy}-{i:07d}" for i in range(n_requests)]
    group_values, group_codes = _group_codes(items)
    midnight = np.datetime64(day.isoformat(), "us").astype(np.int64)
    n_rows = len(sim["position"])
    # Columns are converted one by one and their int64 codes released (a day is ~10^7 rows per policy).
    ts = pa.array(midnight + sim.pop("ts_micros"), pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    request_index = sim.pop("request_index")
    request_id, query_id = _dictionary_strings(request_index, request_ids), _dictionary_strings(request_index, query_ids)
    del request_index
    item_index = sim.pop("item_index")
    item_id = _dictionary_strings(item_index, items["item_id"].tolist())
    group_id = _dictionary_strings(group_codes[item_index], group_values)
    del item_index
    return pa.table(
        {
            "ts": ts,
            "request_id": request_id,
            "query_id": query_id,
            "policy": _dictionary_strings(np.zeros(n_rows, np.int32), [policy]),
            "position": sim["position"],
            "original_position": sim["original_position"],
            "item_id": item_id,
            "group_id": group_id,
            "score": sim["score"],
            "click": sim["click"],
        }
    )


def simulate_source_table(config: SimulationConfig, items: pd.DataFrame, day: dt.date, source: str) -> pa.Table:
    """One day's landing table of one source, conformed to the contract."""
    if source == "observational":
        return conform(_policy_table(config, items, day, "production", config.requests_per_day))
    if source == "randomized":
        return conform(pa.concat_tables([
            _policy_table(config, items, day, "shuffle", config.shuffle_requests_per_day),
            _policy_table(config, items, day, "adjacent_swap", config.adjacent_swap_requests_per_day),
        ]))
    raise ValueError(f"unknown source {source!r}; expected one of {contract.SOURCES}")


def simulate_day_tables(config: SimulationConfig, items: pd.DataFrame, day: dt.date) -> dict[str, pa.Table]:
    """One day's landing tables by source, already conformed to the contract."""
    return {source: simulate_source_table(config, items, day, source) for source in contract.SOURCES}


def write_items_and_truth(config: SimulationConfig, landing: Path, items: pd.DataFrame,
                          days: list[dt.date]) -> None:
    """The catalogue delivered for the first day, `items/date=D/` (what a ranker may see; it holds until the next
    delivery), and each day's `_truth/date=D/` (evaluation only; no estimator reads it): a later simulation of other
    days never changes the catalogue or the truth an earlier day is read with. An undated catalogue of an older
    home is dated first (`catalogue_dates.pin_before_delivery`), so it keeps holding on the days it held on."""
    features = (["item_id", "group_id"] + [c for c in items.columns if c.startswith(ITEM_FEATURE_PREFIX)]
                + config.attribute_cells[0])
    pin_before_delivery(landing)
    write_parquet_atomic(pa.Table.from_pandas(items[features], preserve_index=False),
                         items_folder(landing) / f"date={min(days)}" / "items.parquet")
    for day in days:
        _write_truth(config, landing / contract.TRUTH_DIR / f"date={day}", items)


def _write_truth(config: SimulationConfig, truth: Path, items: pd.DataFrame) -> None:
    write_parquet_atomic(
        pa.Table.from_pandas(items[["item_id", "group_id", "relevance", "merit_score"]], preserve_index=False),
        truth / "items.parquet",
    )
    curve = pd.DataFrame({"position": np.arange(1, config.slots + 1, dtype=np.int32), "weight": bias_curve(config)})
    write_parquet_atomic(pa.Table.from_pandas(curve, preserve_index=False), truth / "bias_curve.parquet")
    text = json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True) + "\n"
    temporary = truth / ".tmp-config.json"
    temporary.write_text(text)
    temporary.replace(truth / "config.json")  # a reader never sees half a config


def simulate_to_landing(
    config: SimulationConfig,
    landing: Path,
    start: dt.date,
    days: int,
    progress: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Write `days` days of landing files starting at `start`; returns impressions written per source."""
    if days < 1:
        raise ValueError(f"days={days} must be >= 1")
    landing = Path(landing)
    items = simulate_items(config)
    write_items_and_truth(config, landing, items, [start + dt.timedelta(days=k) for k in range(days)])
    written = {source: 0 for source in contract.SOURCES}
    for offset in range(days):
        day = start + dt.timedelta(days=offset)
        for source in contract.SOURCES:  # one source's day in memory at a time
            table = simulate_source_table(config, items, day, source)
            write_parquet_atomic(table, partition_dir(landing, source, day) / "part-0.parquet")
            written[source] += table.num_rows
            del table
        if progress:
            progress(f"simulated {day} ({offset + 1}/{days})")
    return written
