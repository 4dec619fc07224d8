"""Open Bandit Dataset (ZOZOTOWN, campaign "all") → landing files of the data contract.

The shipped sample (data/external/open_bandit/, see its PROVENANCE.md) holds two logs of
10,000 rows each, 24–30 November 2019 (UTC), one row per displayed item:

* ``random/all/all.csv`` — the Uniform Random policy → ``landing/randomized``, policy
  ``shuffle``. Random filled the 3 slots with items drawn uniformly from all 80 items
  (``propensity_score`` = 1/80 for every row), so an item's slot is independent of its
  relevance, which is the property the contract's randomized traffic exists for. It is
  stronger than a shuffle of the production top-3: there is no production ranking behind
  these requests, so ``original_position`` is NULL.
* ``bts/all/all.csv`` — Bernoulli Thompson Sampling, ZOZOTOWN's production policy at the
  time → ``landing/observational``, policy ``production``, ``original_position = position``.

Column mapping (CSV → contract):

* ``ts`` ← ``timestamp`` (already UTC, microsecond precision: lossless).
* ``position`` ← ``position``. OBD's positions are 1-based: 1, 2, 3 are the left, centre and
  right slots of the recommendation widget; left (first in reading order) is the
  contract's "1 = top".
* ``request_id``: OBD logs one row per slot and the sample keeps 10,000 rows drawn from
  ~26M, so the 3 rows of a served list are almost never all present. Rows sharing the
  exact microsecond ``timestamp`` and all four ``user_feature_*`` values are one served
  list (in the shipped files: 9 such pairs in random, 1 in bts, each pair with two
  distinct positions and items); every other row is a request with a single observed
  slot. The id is ``obd-all-<log>-<NNNNN>`` with the CSV row index of the request's first
  row. Were a position ever repeated inside such a group, the repeats would become
  separate requests (``...-<NNNNN>-<k>``), so (request_id, position) is always unique.
* ``query_id`` = ``"obd-all"``: one recommendation surface (the "all" campaign); the user
  context stays in the extras.
* ``item_id`` ← ``item_id`` as a string (``"0"`` … ``"79"``).
* ``score`` ← ``propensity_score``. Neither logging policy exposes a ranking score; the
  propensity (probability that the policy put this item in this slot, estimated by the
  authors by Monte-Carlo for BTS) is the only per-row policy output. It is 0.0125 for
  every random row, so score-based analyses on the randomized log are degenerate by
  construction.
* ``group_id``: OBD has no protected attribute. We use an item-level binary group from the
  only numeric item attribute: ``"item_feature_0:high"`` if the item's ``item_feature_0``
  is above the median over the 80 items (39 items), else ``"item_feature_0:low"`` (41
  items). It is a stand-in provider group for exercising the fairness stages, not a
  protected characteristic; the items table keeps every item feature for regrouping.
* ``click`` ← ``click``.

Everything else (the CSV row index, ``propensity_score`` under its own name, the four
hashed ``user_feature_*`` and the 80 ``user-item_affinity_*`` columns, renamed
``user_item_affinity_*`` so SQL needs no quoting) goes to
``landing/_extras/<source>/date=.../part-0.parquet``, one row per impression, keyed by
(request_id, position). ``landing/items/items.parquet`` holds item_id, group_id and the
item features. The two item_context.csv files hash ``item_feature_1..3`` with different
salts but encode the same partitions of the items (checked here); we keep the random
file's hashes as ``item_feature_k`` and the bts file's as ``item_feature_k_bts``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.datasets.checksums import DatasetFileError, external_root, verified_path
from fair_pipeline.ingestion.contract import EXTRAS_DIR, IMPRESSION_SCHEMA, ITEMS_DIR
from fair_pipeline.platform import settings

DATASET_DIR = "open_bandit"
CAMPAIGN = "all"
QUERY_ID = "obd-all"
# OBD behaviour policy → (landing source, contract policy).
LOGS = {"random": ("randomized", "shuffle"), "bts": ("observational", "production")}
N_SLOTS = 3
N_ITEMS = 80
CATEGORICAL_ITEM_FEATURES = ("item_feature_1", "item_feature_2", "item_feature_3")
GROUP_FEATURE = "item_feature_0"
PART_FILE = "part-0.parquet"

# Documented sizes, public for callers that want to assert them (tests check the same numbers).
N_ROWS = {"random": 10_000, "bts": 10_000}
DATES = tuple(f"2019-11-{day}" for day in range(24, 31))


@dataclass(frozen=True)
class SourceSummary:
    """What was written for one OBD log."""

    log: str
    source: str
    policy: str
    rows: int
    requests: int
    clicks: int
    dates: tuple[str, ...]
    rows_per_date: dict[str, int]


@dataclass(frozen=True)
class LandingSummary:
    landing_dir: Path
    sources: dict[str, SourceSummary]  # keyed by landing source
    n_items: int
    files: tuple[Path, ...]


def log_path(log: str, root: Path | str | None = None) -> Path:
    return verified_path(external_root(root) / DATASET_DIR, f"{log}/{CAMPAIGN}/{CAMPAIGN}.csv")


def read_log(log: str, root: Path | str | None = None) -> pd.DataFrame:
    """The raw OBD log (checksum-verified), CSV row index as column ``obd_row``."""
    if log not in LOGS:
        raise ValueError(f"log must be one of {sorted(LOGS)}, got {log!r}")
    path = log_path(log, root)
    frame = pd.read_csv(path, index_col=0)
    frame.index.name = "obd_row"
    frame = frame.reset_index()
    bad = ~frame["position"].isin(range(1, N_SLOTS + 1))
    if bad.any():
        raise DatasetFileError(
            f"{path}: column 'position' must be in 1..{N_SLOTS}; "
            f"{int(bad.sum())} rows are not (first: {frame.loc[bad, 'position'].iloc[0]!r})"
        )
    return frame


def items_table(root: Path | str | None = None) -> pd.DataFrame:
    """One row per item: item_id, group_id, item features (see module docstring)."""
    folder = external_root(root) / DATASET_DIR
    contexts = {
        log: pd.read_csv(verified_path(folder, f"{log}/{CAMPAIGN}/item_context.csv"), index_col=0)
        .sort_values("item_id")
        .reset_index(drop=True)
        for log in LOGS
    }
    random, bts = contexts["random"], contexts["bts"]
    if not (random["item_id"].tolist() == bts["item_id"].tolist() == list(range(N_ITEMS))):
        raise DatasetFileError(f"{folder}: item_context.csv files must both list item_id 0..{N_ITEMS - 1}")
    if not np.array_equal(random[GROUP_FEATURE].to_numpy(), bts[GROUP_FEATURE].to_numpy()):
        raise DatasetFileError(f"{folder}: {GROUP_FEATURE} differs between random and bts item_context.csv")
    for column in CATEGORICAL_ITEM_FEATURES:
        pairs = random[[column]].assign(other=bts[column]).drop_duplicates()
        if pairs[column].duplicated().any() or pairs["other"].duplicated().any():
            raise DatasetFileError(
                f"{folder}: {column} does not encode the same item partition in random and bts item_context.csv"
            )
    items = pd.DataFrame({"item_id": random["item_id"].astype(str)})
    high = random[GROUP_FEATURE] > random[GROUP_FEATURE].median()
    items["group_id"] = np.where(high, f"{GROUP_FEATURE}:high", f"{GROUP_FEATURE}:low")
    items[GROUP_FEATURE] = random[GROUP_FEATURE].astype("float64")
    for column in CATEGORICAL_ITEM_FEATURES:
        items[column] = random[column].astype(str)
    for column in CATEGORICAL_ITEM_FEATURES:
        items[f"{column}_bts"] = bts[column].astype(str)
    return items


def request_ids(log: str, frame: pd.DataFrame) -> pd.Series:
    """Group rows into served lists: same timestamp and user features (module docstring)."""
    key = ["timestamp", *sorted(c for c in frame.columns if c.startswith("user_feature_"))]
    first_row = frame.groupby(key, sort=False)["obd_row"].transform("min")
    # A position repeated inside a group cannot be one list: split the repeats off.
    repeat = frame.groupby([*key, "position"], sort=False).cumcount()
    ids = f"obd-{CAMPAIGN}-{log}-" + first_row.map("{:05d}".format)
    return ids.where(repeat.eq(0), ids + "-" + repeat.astype(str))


def impressions_and_extras(
    log: str, items: pd.DataFrame, root: Path | str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Contract rows and extras rows for one OBD log, in the same order (sorted by ts, request, position)."""
    source, policy = LOGS[log]
    raw = read_log(log, root)
    ids = request_ids(log, raw)
    position = raw["position"].astype("int32")
    group_of = items.set_index("item_id")["group_id"]
    item_id = raw["item_id"].astype(str)
    unknown = ~item_id.isin(group_of.index)
    if unknown.any():
        raise DatasetFileError(f"{log} log: item_id {item_id[unknown].iloc[0]!r} is not in item_context.csv")
    impressions = pd.DataFrame(
        {
            "ts": pd.to_datetime(raw["timestamp"], format="ISO8601", utc=True),
            "request_id": ids,
            "query_id": QUERY_ID,
            "policy": policy,
            "position": position,
            "original_position": position if policy == "production" else pd.array([None] * len(raw), "Int32"),
            "item_id": item_id,
            "group_id": item_id.map(group_of),
            "score": raw["propensity_score"].astype("float64"),
            "click": raw["click"].astype("int32"),
        }
    )
    known = {"timestamp", "item_id", "position", "click"}
    extras = raw[[c for c in raw.columns if c not in known]].rename(columns=lambda c: c.replace("-", "_"))
    extras.insert(0, "request_id", ids)
    extras.insert(1, "position", position)
    extras.insert(2, "obd_log", log)
    extras.insert(3, "campaign", CAMPAIGN)
    order = impressions.sort_values(["ts", "request_id", "position"], kind="stable").index
    return (
        impressions.loc[order].reset_index(drop=True),
        extras.loc[order].reset_index(drop=True),
    )


def write_open_bandit_landing(landing_dir: Path | str, root: Path | str | None = None) -> LandingSummary:
    """Write the OBD sample as landing files under ``landing_dir`` (module docstring).

    Writes, for each UTC date 2019-11-24 … 2019-11-30 (7 dates):
    ``<landing>/{observational,randomized}/date=YYYY-MM-DD/part-0.parquet`` (exactly
    IMPRESSION_SCHEMA) and ``<landing>/_extras/{observational,randomized}/date=.../part-0.parquet``
    (one row per impression, keyed by (request_id, position)); plus
    ``<landing>/items/items.parquet``. 10,000 impression rows per log, 80 items. Each file
    is written to a temporary name and renamed, so a crash never leaves a half-written file;
    re-running overwrites the same files with identical content.
    """
    landing_dir = Path(landing_dir)
    items = items_table(root)
    written: list[Path] = []
    sources: dict[str, SourceSummary] = {}
    for log, (source, policy) in LOGS.items():
        impressions, extras = impressions_and_extras(log, items, root)
        dates = impressions["ts"].dt.strftime("%Y-%m-%d")
        rows_per_date: dict[str, int] = {}
        for date, index in impressions.groupby(dates, sort=True).groups.items():
            rows = impressions.loc[index]
            rows_per_date[str(date)] = len(rows)
            partition = f"date={date}"
            written.append(_write(_impression_table(rows), landing_dir / source / partition / PART_FILE))
            written.append(
                _write(
                    pa.Table.from_pandas(extras.loc[index], preserve_index=False),
                    landing_dir / EXTRAS_DIR / source / partition / PART_FILE,
                )
            )
        sources[source] = SourceSummary(
            log=log,
            source=source,
            policy=policy,
            rows=len(impressions),
            requests=int(impressions["request_id"].nunique()),
            clicks=int(impressions["click"].sum()),
            dates=tuple(rows_per_date),
            rows_per_date=rows_per_date,
        )
    written.append(
        _write(pa.Table.from_pandas(items, preserve_index=False), landing_dir / ITEMS_DIR / "items.parquet")
    )
    return LandingSummary(landing_dir=landing_dir, sources=sources, n_items=len(items), files=tuple(written))


def _impression_table(rows: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(rows[list(IMPRESSION_SCHEMA.names)], schema=IMPRESSION_SCHEMA, preserve_index=False)


def _plain(table: pa.Table) -> pa.Table:
    """pandas 3 strings arrive as large_string; the contract and DuckDB use plain string."""
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f for f in table.schema
    ]
    return table.cast(pa.schema(fields)).replace_schema_metadata(None)


def _write(table: pa.Table, path: Path) -> Path:
    table = _plain(table)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m fair_pipeline.datasets.open_bandit [LANDING_DIR]`` (default: settings.landing_dir())."""
    args = sys.argv[1:] if argv is None else argv
    landing = Path(args[0]) if args else settings.landing_dir()
    summary = write_open_bandit_landing(landing)
    for source, s in summary.sources.items():
        print(f"{source}: {s.rows} rows, {s.requests} requests, {s.clicks} clicks, "
              f"dates {s.dates[0]}..{s.dates[-1]} ({len(s.dates)}), policy {s.policy} (OBD {s.log})")
    print(f"items: {summary.n_items}; landing: {summary.landing_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
