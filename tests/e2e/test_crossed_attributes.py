"""A home whose catalogue carries two protected attributes, declared as $FAIR_PIPELINE_GROUP_COLUMNS, runs end to
end: the audit stores each attribute's exposure table and their crossing (labels with quotes, `+`, separators and
Cyrillic text), and each output's partial AUCs, xAUC and pairwise accuracies by attribute and crossed; every group
and cell appears in the report, and a small cell is flagged not estimable, not dropped."""
from __future__ import annotations

import datetime as dt
import html
import json
import re
from pathlib import Path

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


def _cell_table(home, name: str):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(f"SELECT * FROM marts.{name}").df()


def test_partial_auc_xauc_and_pairwise_are_audited_by_each_attribute_and_crossed_for_every_output(home):
    groups = _cell_table(home, "fairness_audit_cell_groups")
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        audited = {r[0] for r in con.execute("SELECT DISTINCT scored_output FROM marts.fairness_audit_groups").fetchall()}
    assert set(groups["scored_output"]) == audited and len(audited) > 1  # production, EO variants or rankers
    cells = groups[~groups["is_overall"].astype(bool)]
    for output, rows in cells.groupby("scored_output"):
        tables = {name: set(t["label"]) for name, t in rows.groupby("attributes")}
        assert tables == {"gender": {f"gender={g}" for g in GENDER}, "age band": {f"age band={a}" for a in AGE},
                          "gender × age band": {f"gender={g} · age band={a}" for g, a in CELLS}}, output
    crossed = cells[cells["attributes"] == "gender × age band"]
    assert set(crossed["group"]) == {json.dumps(list(c), ensure_ascii=False) for c in CELLS}
    # the small cell: not estimable in every output's tables, with its item count, and kept
    small = crossed[crossed["label"] == f"gender={GENDER[1]} · age band={AGE[1]}"]
    assert len(small) and not small["estimable"].astype(bool).any() and small["auc"].isna().all()
    assert small["note"].str.startswith("not estimable").all()
    fine = crossed[crossed["estimable"].astype(bool)]
    assert len(fine) and (fine["ci_low"] <= fine["auc"]).all() and (fine["auc"] <= fine["ci_high"]).all()
    # an attribute's marginal table holds its crossed cells' positives
    production = cells[(cells["scored_output"] == "production") & (cells["cutoff"] == cells["cutoff"].max())]
    for g in GENDER:
        inside = production[production["label"].str.startswith(f"gender={g} ·")]["n_pos"].sum()
        assert inside == production.set_index("label").loc[f"gender={g}", "n_pos"]
    # comparisons that need the small cell's negatives (too few items hold them) are not estimable
    for name, kind in (("fairness_audit_cell_pairs", None), ("fairness_audit_cell_xauc_deltas", "xauc"),
                       ("fairness_audit_cell_pairwise", "gap")):
        table = _cell_table(home, name)
        assert {"gender", "age band", "gender × age band"} <= set(table["attributes"]), name
        compared = table if kind is None else table[table["kind"] == kind]
        hits_small = compared["label_a"].str.contains("65\\+ × old") & compared["label_a"].str.contains('man "M"') | \
            compared["label_b"].str.contains("65\\+ × old") & compared["label_b"].str.contains('man "M"')
        hits_small &= compared["attributes"] == "gender × age band"
        assert hits_small.any() and not compared.loc[hits_small, "estimable"].astype(bool).any(), name


def test_report_shows_the_audit_by_cells_side_by_side_with_the_not_estimable_note(home):
    report = (home / "reports" / "latest" / "fairness_report.html").read_text()
    start = report.index("Partial AUC, xAUC and pairwise accuracy by protected attribute and crossed cells</h2>")
    section = report[start:report.index("<h2", start + 10)]
    for table in ("marginal: gender", "marginal: age band", "crossed: gender × age band"):
        assert table in section, table
    for label in [f"gender={g} · age band={a}" for g, a in CELLS] + [f"age band={a}" for a in AGE]:
        assert html.escape(label) in section, label
    assert "Not estimable (kept in the tables, never read as fair): " in section
    assert html.escape(f"gender={GENDER[1]} · age band={AGE[1]}") + " [crossed: gender × age band]" in section
    for caption in ("normalized partial AUC", "Δ xAUC", "pairwise accuracy gap"):
        assert caption in section, caption


def test_the_documented_query_runs_on_the_home(home):
    docs = (Path(__file__).resolve().parents[2] / "docs" / "own_logs.md").read_text()
    heading = docs.index("### Protected attributes of the catalogue and their crossing")
    snippet = re.search(r"```python\n(.*?)```", docs[heading:], re.S).group(1)
    namespace = {"home": str(home)}
    exec(snippet.replace("print(cells)", ""), namespace)
    cells = namespace["cells"]
    assert set(cells["attributes"]) == {"gender", "age band", "gender × age band"}
    fine = cells[cells["estimable"].astype(bool)]
    assert len(fine) and ((fine["ci_low"] <= fine["auc_normalized"]) & (fine["auc_normalized"] <= fine["ci_high"])).all()
