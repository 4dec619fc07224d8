"""Which partitions a catalogue change concerns: every ingestion materializes the item catalogues, and a backfill
delivers a catalogue for its own days, yet a partition reads again only when a delivery its window reads changed
(so `run` after a backfill of old days finds the newest day up to date). Finding that out reads the catalogues'
newest materialization only: `run`'s check of a day reads as much of the event log after many ingestions as after
one."""
from __future__ import annotations

import datetime as dt

import dagster as dg
import pandas as pd

from fair_pipeline.ingestion.catalogue_dates import UNDATED, holding_delivery
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig

CONFIG = SimulationConfig(n_items=300, requests_per_day=30, shuffle_share=0.5, adjacent_swap_share=0.5, slots=10, seed=7)
NOVEMBER = [str(dt.date(2026, 11, 20) + dt.timedelta(days=k)) for k in range(3)]
MARCH = [str(dt.date(2026, 3, 1) + dt.timedelta(days=k)) for k in range(2)]


def test_the_delivery_holding_on_a_day_follows_the_catalogue_rule():
    days = ["2026-03-01", "2026-11-20"]
    assert [holding_delivery(d, days) for d in ("2026-01-01", "2026-03-01", "2026-11-19", "2026-11-20", "2027-01-01")] == [
        "2026-03-01", "2026-03-01", "2026-03-01", "2026-11-20", "2026-11-20"]
    assert holding_delivery("2026-01-01", [UNDATED]) == UNDATED and holding_delivery("2026-01-01", []) is None


class EventLogReads:
    """Counts the instance's event-log queries and the records they return, while installed."""

    QUERIES = ("fetch_materializations", "fetch_observations", "get_asset_records", "get_event_records",
               "get_latest_materialization_event", "all_logs", "get_records_for_run")

    def __init__(self, instance, monkeypatch):
        self.queries, self.records = 0, 0
        for name in self.QUERIES:
            monkeypatch.setattr(instance, name, self._counted(getattr(instance, name)))

    def _counted(self, query):
        def counted(*args, **kwargs):
            result = query(*args, **kwargs)
            self.queries += 1
            found = getattr(result, "records", result)
            self.records += len(found) if isinstance(found, (list, tuple)) else int(found is not None)
            return result
        return counted

    def of(self, call) -> tuple[int, int]:
        queries, records = self.queries, self.records
        call()
        return self.queries - queries, self.records - records


def test_a_backfill_of_old_days_leaves_the_newer_windows_catalogue_unchanged(fp_home, monkeypatch):
    from fair_pipeline import runner

    landing = fp_home / "landing"
    simulate_to_landing(CONFIG, landing, dt.date.fromisoformat(NOVEMBER[0]), len(NOVEMBER))
    runner.ensure_dagster_home()
    instance = runner.current_instance()
    assert runner.ingest_range(NOVEMBER[0], NOVEMBER[-1]).success
    november_from = runner._changed_at(instance, runner.ITEMS_KEY, NOVEMBER)
    reads = EventLogReads(instance, monkeypatch)
    one_ingestion = reads.of(lambda: runner.up_to_date(NOVEMBER[-1], instance))
    # Old days with a catalogue of their own (months older): ingested, the catalogues materialized again.
    simulate_to_landing(CONFIG, landing, dt.date.fromisoformat(MARCH[0]), len(MARCH))
    assert runner.ingest_range(MARCH[0], MARCH[-1]).success
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=runner.ITEMS_KEY), limit=10).records
    assert len(records) == 2 and records[0].storage_id > november_from
    assert runner._changed_at(instance, runner.ITEMS_KEY, NOVEMBER) == november_from
    assert runner._changed_at(instance, runner.ITEMS_KEY, MARCH) == records[0].storage_id
    stg_items = dg.AssetKey(["staging", "stg_items"])
    first_view = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=stg_items), limit=1, ascending=True)
    assert runner._changed_at(instance, stg_items, NOVEMBER) == runner._changed_at(instance, stg_items, MARCH) == \
        first_view.records[0].storage_id  # the view over the catalogues: its code alone
    assert runner.landing_changes(MARCH + NOVEMBER) == ([], False)
    # The same days ingested again with nothing changed: no window's catalogue moved.
    assert runner.ingest_range(MARCH[0], MARCH[-1]).success
    assert runner._changed_at(instance, runner.ITEMS_KEY, MARCH) == records[0].storage_id
    # The no-op path's check of a day: the same queries and records after three catalogue materializations as after
    # one (it read every materialization back to the first while the catalogue it read was unchanged).
    assert len(instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=runner.ITEMS_KEY), limit=10).records) == 3
    assert reads.of(lambda: runner.up_to_date(NOVEMBER[-1], instance)) == one_ingestion, one_ingestion
    # A changed November delivery concerns the November window (and not March's).
    path = next((landing / "items" / f"date={NOVEMBER[0]}").glob("*.parquet"))
    items = pd.read_parquet(path)
    items.iloc[::-1].reset_index(drop=True).assign(item_id=items["item_id"]).to_parquet(path, index=False)
    assert runner.landing_changes(MARCH + NOVEMBER) == ([], True)
    assert runner.ingest_range(NOVEMBER[-1], NOVEMBER[-1]).success
    newest = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=runner.ITEMS_KEY), limit=1).records[0]
    assert runner._changed_at(instance, runner.ITEMS_KEY, NOVEMBER) == newest.storage_id
    assert runner._changed_at(instance, runner.ITEMS_KEY, MARCH) == records[0].storage_id
