"""The item catalogue load: NULL-safe duplicates, refused empty or all-rejected deliveries (the previous catalogue
kept), exact re-deliveries deduplicated, conflicting ids quarantined by id; checked against a pandas brute force."""
from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.assets import items as items_asset
from fair_pipeline.ingestion.catalogue import CONFLICTING_ID, MISSING_ID, load_items
from fair_pipeline.ingestion.loads import LandingFileError
from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.resources import default_resources

LABELS = ["Women's", "age 65+", "<b>&amp;</b>", "女性", None]


def _catalogue(n: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "item_id": [f"item-{i:04d}" for i in range(n)],
        "group_id": [LABELS[i % len(LABELS)] for i in range(n)],
        "f0": rng.normal(size=n),
        "f1": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)),  # NULL features compare equal to NULL
    })


def _deliver(landing: Path, *frames: pd.DataFrame, names=None) -> None:
    folder = landing / contract.ITEMS_DIR
    if folder.exists():
        for old in folder.iterdir():
            old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    for k, frame in enumerate(frames):
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table, folder / (names[k] if names else f"items-{k}.parquet"))


def _load(landing: Path):
    with warehouse.session(settings.warehouse_path()) as con:
        return load_items(con, landing)


def _rows(sql: str):
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute(sql).fetchall()


def _stored_items() -> pd.DataFrame:
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute("SELECT * FROM raw.items ORDER BY item_id").df()


@pytest.fixture
def landing(fp_home: Path) -> Path:
    return fp_home / "landing"


def test_two_null_ids_are_quarantined_and_the_other_items_kept(landing):
    catalogue = _catalogue()
    catalogue.loc[[7, 300], "item_id"] = None
    _deliver(landing, catalogue)
    load = _load(landing)
    assert (load.accepted, load.rejected_by_reason, load.exact_copies) == (498, {MISSING_ID: 2}, 0)
    assert _rows("SELECT count(*) FROM raw.items") == [(498,)]
    assert _rows("SELECT reason, group_id, source_file FROM raw.quarantine WHERE source = 'items' ORDER BY group_id") == [
        (MISSING_ID, "<b>&amp;</b>", "items/items-0.parquet"), (MISSING_ID, "Women's", "items/items-0.parquet")]


@pytest.mark.parametrize("kind", ["zero rows", "every id missing", "every id conflicting"])
def test_a_catalogue_with_nothing_to_keep_is_refused_and_the_previous_one_stays(landing, kind):
    _deliver(landing, _catalogue())
    _load(landing)
    before = _stored_items()
    bad = _catalogue(4)
    if kind == "zero rows":
        bad = bad.iloc[:0]
    elif kind == "every id missing":
        bad["item_id"] = [None, " ", "", "\t"]
    else:
        bad = pd.concat([bad, bad.assign(group_id="other")])
    _deliver(landing, bad)
    expected = "has no rows" if kind == "zero rows" else "no row to keep"
    with pytest.raises(LandingFileError, match=expected) as refused:
        _load(landing)
    assert "previous catalogue (500 items) was kept" in str(refused.value)
    pd.testing.assert_frame_equal(_stored_items(), before)
    assert _rows("SELECT count(*) FROM raw.quarantine WHERE source = 'items'") == [(0,)]


def test_a_zero_row_file_beside_a_good_one_is_refused_naming_it(landing):
    _deliver(landing, _catalogue(), _catalogue().iloc[:0], names=["items.parquet", "late export.parquet"])
    with pytest.raises(LandingFileError, match=r"items file .*late export\.parquet has no rows"):
        _load(landing)


def test_an_exact_redelivery_is_kept_once_and_a_conflicting_one_quarantined_by_id(landing):
    catalogue = _catalogue()
    _deliver(landing, catalogue, catalogue)  # the same catalogue delivered twice
    load = _load(landing)
    assert (load.accepted, load.rejected, load.exact_copies) == (500, 0, 500)
    stored = _stored_items()
    pd.testing.assert_frame_equal(stored[catalogue.columns].reset_index(drop=True), catalogue, check_dtype=False)

    corrected = catalogue.copy()
    corrected.loc[[3, 4], "group_id"] = "corrected"  # two items re-delivered with another group
    corrected.loc[5, "f0"] = 99.0  # and one with another feature value
    _deliver(landing, catalogue, corrected)
    load = _load(landing)
    assert (load.accepted, load.rejected_by_reason, load.exact_copies) == (497, {CONFLICTING_ID: 6}, 497)
    quarantined = _rows("SELECT item_id, count(*) FROM raw.quarantine WHERE source = 'items' GROUP BY 1 ORDER BY 1")
    assert quarantined == [("item-0003", 2), ("item-0004", 2), ("item-0005", 2)]
    assert _rows("SELECT count(*) FROM raw.items WHERE item_id IN ('item-0003', 'item-0004', 'item-0005')") == [(0,)]


def _brute_force(frame: pd.DataFrame) -> tuple[set, dict, int]:
    """(kept rows as tuples, reasons by count, exact copies) by plain Python over the delivered rows."""
    rows = [tuple(None if pd.isna(v) else v for v in r) for r in frame.itertuples(index=False)]
    missing = [r for r in rows if r[0] is None or str(r[0]).strip(" \t\n\r\f\v") == ""]
    valid = [r for r in rows if r not in missing]
    variants: dict = {}
    for r in valid:
        variants.setdefault(r[0], set()).add(r)
    conflicting = [r for r in valid if len(variants[r[0]]) > 1]
    kept = {r for r in valid if len(variants[r[0]]) == 1}
    copies = len(valid) - len(conflicting) - len(kept)
    reasons = {k: v for k, v in {MISSING_ID: len(missing), CONFLICTING_ID: len(conflicting)}.items() if v}
    return kept, reasons, copies


@pytest.mark.parametrize("seed", range(4))
def test_random_deliveries_match_a_brute_force(landing, seed):
    rng = np.random.default_rng(seed)
    n = 300
    frame = pd.DataFrame({
        "item_id": rng.choice(np.array(["a", "b", "c", " ", None, *[f"i{k}" for k in range(150)]], dtype=object), n),
        "group_id": rng.choice(np.array(["x", "y", None], dtype=object), n),
        "f0": rng.choice([0.5, 1.5, np.nan], n),
    })
    halves = [frame.iloc[: n // 2], frame.iloc[n // 2:]]
    _deliver(landing, *halves)
    load = _load(landing)
    kept, reasons, copies = _brute_force(frame)
    assert (load.accepted, load.rejected_by_reason, load.exact_copies) == (len(kept), reasons, copies)
    stored = {tuple(None if pd.isna(v) else v for v in r) for r in _stored_items()[["item_id", "group_id", "f0"]]
              .itertuples(index=False)}
    assert stored == kept


def test_the_asset_fails_with_the_reason_and_reports_counts(landing, fp_home):
    catalogue = _catalogue()
    catalogue.loc[0, "item_id"] = None
    _deliver(landing, catalogue, catalogue.iloc[1:3])

    def materialize():
        return dg.materialize([items_asset], resources=default_resources(), instance=dg.DagsterInstance.ephemeral(),
                              raise_on_error=False)

    result = materialize()
    assert result.success
    metadata = result.asset_materializations_for_node("raw__items")[0].metadata
    assert metadata["dagster/row_count"].value == 499 and metadata["exact_copies_dropped"].value == 2
    assert metadata["rejected_by_reason"].value == {MISSING_ID: 1}
    _deliver(landing, catalogue.assign(item_id=None))
    failed = materialize()
    assert not failed.success
    message = failed.get_step_failure_events()[0].step_failure_data.error.message
    assert "no row to keep (missing item_id: 500); the previous catalogue (499 items) was kept" in message
