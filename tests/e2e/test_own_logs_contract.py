"""docs/own_logs.md's items contract is what the catalogue load does: its required and reserved columns are the
code's, and each refusal and quarantine it lists happens as written (the previous catalogue kept on a refusal)."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue import CONFLICTING_ID, MISSING_ID, load_items
from fair_pipeline.ingestion.catalogue_dates import DATE_COLUMNS
from fair_pipeline.ingestion.loads import LandingFileError
from fair_pipeline.platform import settings, warehouse

DOC = (Path(__file__).resolve().parents[2] / "docs" / "own_logs.md").read_text()
SECTION = DOC.split("### The items table (catalogue) contract", 1)[1].split("\n## ", 1)[0]


def _deliver(landing: Path, frame: pd.DataFrame, day: str | None = None, name: str = "part-0.parquet") -> Path:
    folder = landing / contract.ITEMS_DIR / (f"date={day}" if day else "")
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / name)
    return folder / name


def _load(landing: Path):
    with warehouse.session(settings.warehouse_path()) as con:
        return load_items(con, landing)


def _stored() -> pd.DataFrame:
    with warehouse.session(settings.warehouse_path(), read_only=True) as con:
        return con.execute("SELECT * FROM raw.items ORDER BY item_id").df()


def test_the_documented_columns_are_the_codes():
    rows = re.findall(r"^\| `(\w+)` \| (yes[^|]*|no) \|", SECTION, re.M)
    assert [name for name, required in rows if required.startswith("yes")] == ["item_id", "group_id"]
    reserved = re.search(r"a column named (.+?) \(reserved", SECTION, re.S)[1]
    assert sorted(re.findall(r"`(\w+)`", reserved)) == sorted({"_file", "_item_reason", *DATE_COLUMNS})
    assert f"`{MISSING_ID}`" in SECTION and f"`{CONFLICTING_ID}`" in SECTION


def test_each_documented_rule_happens_as_written(fp_home):
    landing = fp_home / "landing"
    good = pd.DataFrame({"item_id": ["a", "b", "b", None, "c", "c"], "group_id": ["女性", "age 65+", "age 65+", "x",
                                                                                  'he said "no"', "other"],
                         "f0": [0.1, 0.2, 0.2, 0.3, 0.4, 0.5], "brand": ["p", "q", "q", "r", "s", "s"]})
    _deliver(landing, good, "2026-01-01")
    load = _load(landing)
    # an exact copy kept once, a NULL id and an id with differing rows quarantined by reason; text features named
    assert _stored()["item_id"].tolist() == ["a", "b"]
    assert load.exact_copies == 1 and load.rejected_by_reason == {MISSING_ID: 1, CONFLICTING_ID: 2}
    assert "brand" in load.non_numeric_columns and "f0" not in load.non_numeric_columns
    for bad, why in [(good.drop(columns="group_id"), "lacks columns ['group_id']"),
                     (good.assign(valid_from=1), "reserved for raw.items"), (good.iloc[:0], "has no rows")]:
        path = _deliver(landing, bad, "2026-01-02")
        with pytest.raises(LandingFileError, match=re.escape(why)) as error:
            _load(landing)
        assert str(path) in str(error.value) or str(path.parent.parent) in str(error.value)
        assert _stored()["item_id"].tolist() == ["a", "b"]  # the previous catalogue stays
        path.unlink()
