"""Open Bandit Dataset (ZOZOTOWN, campaigns "all", "men", "women") → landing files of the data contract.

Each campaign is one recommendation surface of its own (``query_id`` ``obd-<campaign>``) with its own items; a
landing can hold one campaign or every one (``write_open_bandit_landing(..., campaign="every")``). Campaign "all"
numbers its 80 items "0".."79"; "men" (34 items) and "women" (46 items) number theirs from 0 too, so their item ids
carry the campaign ("men:0" … "men:33", "women:0" … "women:45"). What follows describes "all"; the other two
campaigns have the same layout (their user-item affinity columns run to 33 resp. 45).

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
CAMPAIGNS = ("all", "men", "women")
EVERY = "every"
# OBD behaviour policy → (landing source, contract policy).
LOGS = {"random": ("randomized", "shuffle"), "bts": ("observational", "production")}
N_SLOTS = 3
ITEMS_PER_CAMPAIGN = {"all": 80, "men": 34, "women": 46}
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
    campaigns: tuple[str, ...] = (CAMPAIGN,)


def campaigns_of(campaign: str) -> tuple[str, ...]:
    """The campaigns `campaign` names: one of CAMPAIGNS, or every one of them."""
    if campaign == EVERY:
        return CAMPAIGNS
    if campaign not in CAMPAIGNS:
        raise ValueError(f"campaign must be one of {[*CAMPAIGNS, EVERY]}, got {campaign!r}")
    return (campaign,)


def item_key(campaign: str, item_id) -> pd.Series:
    """The landing item_id of a campaign's OBD item number(s) (module docstring)."""
    ids = pd.Series(item_id).astype(str)
    return ids if campaign == CAMPAIGN else f"{campaign}:" + ids


def log_path(log: str, root: Path | str | None = None, campaign: str = CAMPAIGN) -> Path:
    return verified_path(external_root(root) / DATASET_DIR, f"{log}/{campaign}/{campaign}.csv")


def read_log(log: str, root: Path | str | None = None, campaign: str = CAMPAIGN) -> pd.DataFrame:
    """The raw OBD log of a campaign (checksum-verified), CSV row index as column ``obd_row``."""
    if log not in LOGS:
        raise ValueError(f"log must be one of {sorted(LOGS)}, got {log!r}")
    if campaign not in CAMPAIGNS:
        raise ValueError(f"campaign must be one of {list(CAMPAIGNS)}, got {campaign!r}")
    path = log_path(log, root, campaign)
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


def items_table(root: Path | str | None = None, campaign: str = CAMPAIGN) -> pd.DataFrame:
    """One row per item of a campaign: item_id, group_id, item features (see module docstring); the group is the
    campaign's own median split of item_feature_0."""
    folder = external_root(root) / DATASET_DIR
    if campaign not in CAMPAIGNS:
        raise ValueError(f"campaign must be one of {list(CAMPAIGNS)}, got {campaign!r}")
    n_items = ITEMS_PER_CAMPAIGN[campaign]
    contexts = {
        log: pd.read_csv(verified_path(folder, f"{log}/{campaign}/item_context.csv"), index_col=0)
        .sort_values("item_id")
        .reset_index(drop=True)
        for log in LOGS
    }
    random, bts = contexts["random"], contexts["bts"]
    if not (random["item_id"].tolist() == bts["item_id"].tolist() == list(range(n_items))):
        raise DatasetFileError(f"{folder}: {campaign} item_context.csv files must both list item_id 0..{n_items - 1}")
    if not np.array_equal(random[GROUP_FEATURE].to_numpy(), bts[GROUP_FEATURE].to_numpy()):
        raise DatasetFileError(f"{folder}: {GROUP_FEATURE} differs between random and bts item_context.csv")
    for column in CATEGORICAL_ITEM_FEATURES:
        pairs = random[[column]].assign(other=bts[column]).drop_duplicates()
        if pairs[column].duplicated().any() or pairs["other"].duplicated().any():
            raise DatasetFileError(
                f"{folder}: {column} does not encode the same item partition in random and bts item_context.csv"
            )
    items = pd.DataFrame({"item_id": item_key(campaign, random["item_id"]).to_numpy()})
    high = random[GROUP_FEATURE] > random[GROUP_FEATURE].median()
    items["group_id"] = np.where(high, f"{GROUP_FEATURE}:high", f"{GROUP_FEATURE}:low")
    items[GROUP_FEATURE] = random[GROUP_FEATURE].astype("float64")
    for column in CATEGORICAL_ITEM_FEATURES:
        items[column] = random[column].astype(str)
    for column in CATEGORICAL_ITEM_FEATURES:
        items[f"{column}_bts"] = bts[column].astype(str)
    return items


def request_ids(log: str, frame: pd.DataFrame, campaign: str = CAMPAIGN) -> pd.Series:
    """Group rows into served lists: same timestamp and user features (module docstring)."""
    key = ["timestamp", *sorted(c for c in frame.columns if c.startswith("user_feature_"))]
    first_row = frame.groupby(key, sort=False)["obd_row"].transform("min")
    # A position repeated inside a group cannot be one list: split the repeats off.
    repeat = frame.groupby([*key, "position"], sort=False).cumcount()
    ids = f"obd-{campaign}-{log}-" + first_row.map("{:05d}".format)
    return ids.where(repeat.eq(0), ids + "-" + repeat.astype(str))


def impressions_and_extras(
    log: str, items: pd.DataFrame, root: Path | str | None = None, campaign: str = CAMPAIGN
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Contract rows and extras rows for one OBD log, in the same order (sorted by ts, request, position)."""
    source, policy = LOGS[log]
    raw = read_log(log, root, campaign)
    ids = request_ids(log, raw, campaign)
    position = raw["position"].astype("int32")
    group_of = items.set_index("item_id")["group_id"]
    item_id = item_key(campaign, raw["item_id"])
    unknown = ~item_id.isin(group_of.index)
    if unknown.any():
        raise DatasetFileError(f"{campaign} {log} log: item_id {item_id[unknown].iloc[0]!r} is not in item_context.csv")
    impressions = pd.DataFrame(
        {
            "ts": pd.to_datetime(raw["timestamp"], format="ISO8601", utc=True),
            "request_id": ids,
            "query_id": f"obd-{campaign}",
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
    extras.insert(3, "campaign", campaign)
    order = impressions.sort_values(["ts", "request_id", "position"], kind="stable").index
    return (
        impressions.loc[order].reset_index(drop=True),
        extras.loc[order].reset_index(drop=True),
    )


def write_open_bandit_landing(landing_dir: Path | str, root: Path | str | None = None,
                              campaign: str = CAMPAIGN) -> LandingSummary:
    """Write the OBD sample of `campaign` ("all", "men", "women" or "every") as landing files under ``landing_dir``
    (module docstring).

    Writes, for each UTC date 2019-11-24 … 2019-11-30 (7 dates):
    ``<landing>/{observational,randomized}/date=YYYY-MM-DD/part-0.parquet`` (exactly
    IMPRESSION_SCHEMA) and ``<landing>/_extras/{observational,randomized}/date=.../part-0.parquet``
    (one row per impression, keyed by (request_id, position)); plus
    ``<landing>/items/items.parquet``. 10,000 impression rows per log and campaign; 80, 34 and 46 items; with
    "every", the three campaigns share each date's files as three surfaces (``query_id``) and the extras hold the
    union of their columns (a campaign's missing user-item affinities are NULL). Each file is written to a
    temporary name and renamed, so a crash never leaves a half-written file; re-running overwrites the same files
    with identical content.
    """
    landing_dir = Path(landing_dir)
    chosen = campaigns_of(campaign)
    items = pd.concat([items_table(root, c) for c in chosen], ignore_index=True)
    written: list[Path] = []
    sources: dict[str, SourceSummary] = {}
    for log, (source, policy) in LOGS.items():
        parts = [impressions_and_extras(log, items, root, c) for c in chosen]
        impressions = pd.concat([p[0] for p in parts], ignore_index=True)
        extras = pd.concat([p[1] for p in parts], ignore_index=True)
        order = impressions.sort_values(["ts", "request_id", "position"], kind="stable").index
        impressions, extras = impressions.loc[order].reset_index(drop=True), extras.loc[order].reset_index(drop=True)
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
    return LandingSummary(landing_dir=landing_dir, sources=sources, n_items=len(items), files=tuple(written),
                          campaigns=chosen)


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
    """``python -m fair_pipeline.datasets.open_bandit [LANDING_DIR [CAMPAIGN]]`` (default: settings.landing_dir(),
    campaign "all")."""
    args = sys.argv[1:] if argv is None else argv
    landing = Path(args[0]) if args else settings.landing_dir()
    summary = write_open_bandit_landing(landing, campaign=args[1] if len(args) > 1 else CAMPAIGN)
    for source, s in summary.sources.items():
        print(f"{source}: {s.rows} rows, {s.requests} requests, {s.clicks} clicks, "
              f"dates {s.dates[0]}..{s.dates[-1]} ({len(s.dates)}), policy {s.policy} (OBD {s.log})")
    print(f"items: {summary.n_items}; landing: {summary.landing_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
