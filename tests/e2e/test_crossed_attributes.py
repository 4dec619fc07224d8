"""A home whose catalogue carries two protected attributes, declared as $FAIR_PIPELINE_GROUP_COLUMNS, runs end to
end: the audit stores each attribute's exposure table and their crossing (labels with quotes, `+`, separators and
Cyrillic text), every group and cell appears in the report, and a small cell is flagged not estimable, not
dropped."""
from __future__ import annotations

import datetime as dt
import html
import json

import duckdb
import pytest

from fair_pipeline.ingestion.simulator import SimulationConfig
from tests.simulated_home import materialize_simulated_home

GENDER = ["женщина", 'man "M"']
AGE = ["18–34", "65+ × old"]
ATTRIBUTES = json.dumps({"gender": GENDER, "age band": AGE}, ensure_ascii=False)
# the last cell is tiny: a handful of items, too few impressions for the minimum cell size
CONFIG = SimulationConfig(n_items=3_000, requests_per_day=300, slots=20, seed=5, groups=4,
                          group_shares="0.4;0.3;0.292;0.008", group_attributes=ATTRIBUTES)
START = dt.date(2026, 1, 1)
CELLS = [(g, a) for g in GENDER for a in AGE]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("crossed attributes")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAIR_PIPELINE_GROUP_COLUMNS", "gender, age band")
        materialize_simulated_home(home, CONFIG, START, 2)
    return home


def _cells(home):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute("SELECT * FROM marts.fairness_audit_exposure_cells").df()


def test_each_attribute_and_their_crossing_are_audited_with_every_group_and_cell(home):
    cells = _cells(home)
    assert set(cells["scored_output"]) == {"production"}
    tables = {name: rows for name, rows in cells.groupby("attributes")}
    assert set(tables) == {"gender", "age band", "gender × age band"}
    assert set(tables["gender"]["cell"]) == set(GENDER) and set(tables["age band"]["cell"]) == set(AGE)
    crossed = tables["gender × age band"]
    assert set(crossed["cell"]) == {json.dumps(list(c), ensure_ascii=False) for c in CELLS}
    assert set(crossed["label"]) == {f"gender={g} · age band={a}" for g, a in CELLS}
    # the marginal table adds up its cells: impressions of a gender = those of its two crossed cells
    for g in GENDER:
        inside = crossed[crossed["label"].str.startswith(f"gender={g} ·")]["n"].sum()
        assert inside == tables["gender"].set_index("cell").loc[g, "n"]
    assert (cells.groupby("attributes")["verdict"].apply(lambda v: (v == "reference").sum()) == 1).all()
    estimable = cells[cells["estimable"].astype(bool) & (cells["verdict"] != "reference")]
    assert len(estimable) and (estimable["ratio_ci_low"] <= estimable["ratio"]).all()
    assert (estimable["ratio"] <= estimable["ratio_ci_high"]).all()


def test_the_small_cell_is_not_estimable_with_its_reason_and_stays(home):
    crossed = _cells(home).query("attributes == 'gender × age band'").set_index("label")
    small = crossed.loc[f"gender={GENDER[1]} · age band={AGE[1]}"]
    assert not small["estimable"] and small["verdict"] == "not estimable"
    assert "not estimable" in small["note"] and small["n"] > 0
    assert crossed["estimable"].astype(bool).sum() >= 2


def test_report_shows_marginal_and_crossed_tables_with_every_label(home):
    report = (home / "reports" / "latest" / "fairness_report.html").read_text()
    for label in [f"gender={g}" for g in GENDER] + [f"age band={a}" for a in AGE] + \
            [f"gender={g} · age band={a}" for g, a in CELLS]:
        assert html.escape(label) in report, label
    assert "marginal: gender" in report and "crossed: gender × age band" in report
    assert "not estimable: " + html.escape(f"gender={GENDER[1]} · age band={AGE[1]}") in report
