"""Dated item catalogues: each delivery holds from its day until the next one, the oldest also before it; partition
D reads the catalogue that holds on D; an undated catalogue next to dated ones is pinned at the first landed day, so a
delivery for an older day never changes a later day's catalogue."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue import load_items
from fair_pipeline.ingestion.catalogue_dates import (
    ALWAYS_FROM,
    ALWAYS_UNTIL,
    deliveries,
    delivery_on,
    items_as_of,
    pin_undated_catalogue,
)
from fair_pipeline.ingestion.landing import LandingFileError, partition_dir
from fair_pipeline.platform import settings, warehouse

JAN, MAR, NOV = dt.date(2026, 1, 1), dt.date(2026, 3, 1), dt.date(2026, 11, 20)


def _catalogue(n: int, group: str, shift: float) -> pd.DataFrame:
    return pd.DataFrame({"item_id": [f"it'em-{i}" for i in range(n)], "group_id": ([group, "女性", None] * n)[:n],
                         "f0": np.arange(n, dtype=float) + shift})


def _write(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _deliver(landing: Path, day: dt.date | None, frame: pd.DataFrame) -> None:
    folder = landing / contract.ITEMS_DIR / (f"date={day}" if day else "")
    _write(folder / "odd name +1.parquet", frame)


def _land_logs(landing: Path, day: dt.date) -> None:
    _write(partition_dir(landing, "observational", day) / "part-0.parquet", pd.DataFrame({"x": [1]}))


def _as_of(con, day) -> pd.DataFrame:
    relation, params = items_as_of(con, day)
    return con.execute(f"SELECT item_id, group_label, f0 FROM {relation} ORDER BY item_id", params).df()


def test_each_delivery_holds_from_its_day_until_the_next_and_the_oldest_also_before(tmp_path):
    landing = tmp_path / "landing"
    _deliver(landing, NOV, _catalogue(3, "a", 0.0))
    _deliver(landing, MAR, _catalogue(2, "b", 10.0))
    found = deliveries(landing)
    assert [(d.day, d.valid_from, d.valid_until) for d in found] == [
        (MAR, ALWAYS_FROM, NOV), (NOV, NOV, ALWAYS_UNTIL)]
    assert delivery_on(landing, JAN).day == MAR and delivery_on(landing, "2026-11-19").day == MAR
    assert delivery_on(landing, NOV).day == NOV and delivery_on(landing).day == NOV
    _write(landing / contract.ITEMS_DIR / "date=2026-13-01" / "x.parquet", _catalogue(1, "a", 0))
    with pytest.raises(LandingFileError, match=r"date=2026-13-01 is not named date=YYYY-MM-DD"):
        deliveries(landing)


def test_the_warehouse_reads_the_catalogue_as_of_each_day_and_an_older_delivery_changes_only_older_days(fp_home):
    landing = fp_home / "landing"
    _deliver(landing, NOV, _catalogue(3, "a", 0.0))
    with warehouse.session(settings.warehouse_path()) as con:
        load_items(con, landing)
        con.execute("CREATE SCHEMA IF NOT EXISTS staging")
        con.execute("CREATE OR REPLACE VIEW staging.stg_items AS SELECT *, coalesce(group_id, '<unknown>') AS "
                    "group_label FROM raw.items")
        before = {day: _as_of(con, day) for day in (JAN, NOV, NOV + dt.timedelta(days=6))}
        assert len(before[NOV]) == 3 and before[JAN].equals(before[NOV])  # the oldest holds before its day too

        _deliver(landing, MAR, _catalogue(5, "changed", 100.0))  # a changed catalogue for an older day
        load = load_items(con, landing)
        assert load.delivery_days == (MAR, NOV) and load.accepted == 8
        for day in (NOV, NOV + dt.timedelta(days=6)):
            pd.testing.assert_frame_equal(_as_of(con, day), before[day])
        assert _as_of(con, JAN)["f0"].tolist() == [100.0, 101.0, 102.0, 103.0, 104.0]
        assert _as_of(con, None).equals(before[NOV])  # no day: the newest catalogue


def test_an_undated_catalogue_is_pinned_at_the_first_landed_day_when_a_dated_one_arrives(fp_home):
    """The upgrade path: a home with today's single `items/items.parquet` keeps reading it on the days it held."""
    from fair_pipeline.ingestion.simulated_landing import write_items_and_truth
    from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items

    landing = fp_home / "landing"
    legacy = _catalogue(4, "legacy", 0.0)
    _write(landing / contract.ITEMS_DIR / "items.parquet", legacy)
    _land_logs(landing, NOV)
    assert [d.day for d in deliveries(landing)] == [None] and pin_undated_catalogue(landing) is None  # alone: kept

    config = SimulationConfig(requests_per_day=10, n_items=50, seed=9)
    write_items_and_truth(config, landing, simulate_items(config), [JAN])  # an older day simulated later
    assert not (landing / contract.ITEMS_DIR / "items.parquet").exists()
    assert [d.day for d in deliveries(landing)] == [JAN, NOV]
    pd.testing.assert_frame_equal(pd.read_parquet(delivery_on(landing, NOV).files[0]), legacy)
    assert len(pd.read_parquet(delivery_on(landing, JAN).files[0])) == 50

    # Ingestion pins too; a different catalogue already delivered for that day is refused, naming both.
    _write(landing / contract.ITEMS_DIR / "items.parquet", _catalogue(4, "other", 1.0))
    with warehouse.session(settings.warehouse_path()) as con:
        with pytest.raises(LandingFileError, match=r"holds from 2026-11-20 .*already holds another catalogue"):
            load_items(con, landing)
    _write(landing / contract.ITEMS_DIR / "items.parquet", legacy)  # the same catalogue again: kept once
    with warehouse.session(settings.warehouse_path()) as con:
        load = load_items(con, landing)
    assert load.delivery_days == (JAN, NOV) and load.pinned_to.endswith("date=2026-11-20")
    assert not (landing / contract.ITEMS_DIR / "items.parquet").exists()


def test_a_delivery_with_nothing_to_keep_is_refused_and_the_previous_catalogues_stay(fp_home):
    landing = fp_home / "landing"
    _deliver(landing, NOV, _catalogue(3, "a", 0.0))
    with warehouse.session(settings.warehouse_path()) as con:
        load_items(con, landing)
    _deliver(landing, MAR, _catalogue(3, "a", 0.0).assign(item_id=None))
    with warehouse.session(settings.warehouse_path()) as con:
        with pytest.raises(LandingFileError, match=r"delivery for 2026-03-01 has no row to keep"):
            load_items(con, landing)
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        assert con.execute("SELECT DISTINCT catalogue_date FROM raw.items").fetchall() == [(NOV,)]


def test_a_feature_added_or_dropped_by_one_delivery_changes_only_the_days_that_delivery_holds_on(fp_home):
    """MAR delivers f0 and f1; JUN adds f2 and drops f1; NOV delivers f0 only, with f2 present but empty. Each day's
    features are its own delivery's: a column another delivery adds or drops never reaches it, and a requested
    feature its delivery lacks is refused naming the day."""
    from fair_pipeline.training.rankers import RankerTrainingError, feature_columns

    landing = fp_home / "landing"
    jun = dt.date(2026, 6, 1)
    _deliver(landing, MAR, _catalogue(4, "a", 0.0).assign(f1=[1, 2, 3, 4]))
    _deliver(landing, jun, _catalogue(4, "b", 0.0).assign(f2=np.arange(4.0) / 7))
    _deliver(landing, NOV, _catalogue(4, "c", 0.0).assign(f2=[np.nan] * 4, note=["x", "+1", "é", "<b>"]))
    with warehouse.session(settings.warehouse_path()) as con:
        load_items(con, landing)
        con.execute("CREATE SCHEMA IF NOT EXISTS staging")
        con.execute("CREATE OR REPLACE VIEW staging.stg_items AS SELECT *, coalesce(group_id, '<unknown>') AS "
                    "group_label FROM raw.items")
        assert feature_columns(con, None, JAN) == feature_columns(con, None, MAR) == ["f0", "f1"]
        assert feature_columns(con, None, jun) == feature_columns(con, None, "2026-10-31") == ["f0", "f2"]
        assert feature_columns(con, None, NOV) == feature_columns(con, None, None) == ["f0"]
        assert feature_columns(con, ["f2"], jun) == ["f2"]
        with pytest.raises(RankerTrainingError, match=r"not delivered in the catalogue that holds on 2026-03-01: \['f2'\]"):
            feature_columns(con, ["f0", "f2"], MAR)
        with pytest.raises(RankerTrainingError, match=r"not delivered in the newest catalogue: \['f1'\]"):
            feature_columns(con, ["f1"])
