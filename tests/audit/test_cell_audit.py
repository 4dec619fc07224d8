"""The audit by attribute cells (DuckDB path, spilled in batches) equals the in-memory audit of the same rows grouped
by each item's cell by hand, with outputs scoring by the logged group; a cell held by too few items stays in every
table as not estimable, and Holm runs over the comparisons that remain."""
from __future__ import annotations

import datetime as dt
import json

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import audit_aggregates
from fair_pipeline.audit.cell_audit import audit_cells
from fair_pipeline.audit.outputs import ScoredOutput
from fair_pipeline.audit.sql import UNKNOWN_GROUP, label_source
from fair_pipeline.audit.stats.inference import holm
from fair_pipeline.platform.windows import PartitionWindow

DAY = dt.date(2026, 1, 3)
GENDER = ["женщина", 'man "M"']
AGE = ["18–34", "65+ × old"]
CUTOFFS = [0.2, 1.0]


def _warehouse(seed=0):
    rng = np.random.default_rng(seed)
    n = 260
    gender = rng.choice(GENDER, n).astype(object)
    age = rng.choice(AGE, n, p=[0.7, 0.3]).astype(object)
    age[(gender == GENDER[1]) & (age == AGE[1])] = AGE[0]
    age[:8], gender[:8] = AGE[1], GENDER[1]  # the small cell: 8 items
    gender[8:12] = None  # a missing attribute value
    items = pd.DataFrame({"item_id": [f"it'{i}" for i in range(n)], "gender": gender, "age band": age})
    logged = rng.choice(["a", "b"], n)
    quality = rng.normal(size=n)
    rows = []
    for q in range(400):
        shown = rng.choice(n + 5, 6, replace=False)  # ids past n: items the catalogue does not hold
        for i in shown:
            relevant = quality[i] if i < n else 0.0
            score = relevant + rng.normal() + (0.5 if i < n and logged[i] == "b" else 0.0)
            click = int(rng.random() < 1 / (1 + np.exp(-2 * relevant)))
            rows.append((f"q{q}", f"it'{i}", logged[i] if i < n else "a", score, click))
    frame = pd.DataFrame(rows, columns=["query_id", "item_id", "group_id", "score", "click"])
    frame = frame.assign(partition_date=DAY, policy="shuffle")
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging")
    for name, table in (("stg_randomized_impressions", frame), ("stg_items", items)):
        con.register("f", table)
        con.execute(f"CREATE TABLE staging.{name} AS SELECT * FROM f")
        con.unregister("f")
    return con, frame, items


def _flip_b(frame):  # scores by the logged group: wrong if the audit handed it the cell instead
    return np.where(frame["group"].to_numpy() == "b", -frame["score"].to_numpy(), frame["score"].to_numpy())


OUTPUTS = [ScoredOutput("production", "logged", "logged_score", lambda f: f["score"].to_numpy(dtype=float)),
           ScoredOutput("flip_b", "negated for logged group b", "logged_score", _flip_b)]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    con, frame, items = _warehouse()
    window = PartitionWindow(DAY, DAY, (DAY,))
    source = label_source("randomized_clicks", tmp_path_factory.mktemp("landing"), window, ["shuffle"])
    tables, notes = audit_cells(con, str(tmp_path_factory.mktemp("scratch")), source, window, OUTPUTS,
                                ["gender", "age band"], variance="item_clustered", max_queries=1000, cutoffs=CUTOFFS,
                                min_count=5, confidence=0.95, con=con)
    con.close()
    return tables, notes, frame, items


def _by_hand(frame, items, columns):
    """Each row's cell as the audit defines it, from the catalogue (NULL or absent: `<unknown>`)."""
    merged = frame.merge(items, on="item_id", how="left")
    values = merged[columns].astype(object).where(merged[columns].notna(), UNKNOWN_GROUP)
    if len(columns) == 1:
        return values[columns[0]].to_numpy(dtype=object)
    return np.array([json.dumps(list(v), ensure_ascii=False) for v in values.itertuples(index=False)], dtype=object)


@pytest.mark.parametrize("columns", [["gender"], ["age band"], ["gender", "age band"]])
@pytest.mark.parametrize("output", OUTPUTS, ids=lambda o: o.name)
def test_each_table_equals_the_in_memory_audit_of_the_rows_grouped_by_cell(audited, columns, output):
    tables, notes, frame, items = audited
    assert not notes
    name = " × ".join(columns)
    rows = frame.assign(group=frame["group_id"])
    want = audit_aggregates(pd.DataFrame({"group": _by_hand(frame, items, columns), "score": output.score(rows),
                                          "n_pos": frame["click"], "n_neg": 1 - frame["click"],
                                          "item_id": frame["item_id"]}),
                            CUTOFFS, cluster_cols=["item_id"], min_count=5, estimand="item_clustered")
    got = tables["fairness_audit_cell_groups"]
    got = got[(got["attributes"] == name) & (got["scored_output"] == output.name) & ~got["is_overall"]]
    got = got.set_index(["group", "cutoff"]).sort_index()
    expected = want.groups.set_index(["group", "cutoff"]).sort_index()
    assert list(got.index) == list(expected.index)  # every cell, the small and the unknown ones included
    assert (got["n_pos"].to_numpy() == expected["n_pos"].to_numpy()).all()
    ok = got["estimable"].to_numpy(dtype=bool)
    np.testing.assert_allclose(got["auc"].to_numpy(float)[ok], expected["auc"].to_numpy(float)[ok], rtol=1e-9)
    np.testing.assert_allclose(got["se"].to_numpy(float)[ok], expected["se"].to_numpy(float)[ok], rtol=1e-6)


def test_the_small_crossed_cell_is_not_estimable_everywhere_and_stays(audited):
    tables, _, _, _ = audited
    small = json.dumps([GENDER[1], AGE[1]], ensure_ascii=False)
    groups = tables["fairness_audit_cell_groups"]
    cell = groups[groups["group"] == small]
    assert len(cell) == 2 * len(CUTOFFS) and not cell["estimable"].any() and cell["auc"].isna().all()
    assert (cell["items"] == 8).all() and cell["note"].str.startswith("not estimable (8 items").all()
    assert set(cell["label"]) == {f"gender={GENDER[1]} · age band={AGE[1]}"}
    for name in ("fairness_audit_cell_pairs", "fairness_audit_cell_xauc_deltas", "fairness_audit_cell_pairwise"):
        table = tables[name]
        hit = table[(table["group_a"] == small) | (table["group_b"] == small)]
        assert len(hit), name
        assert not hit["estimable"].astype(bool).any() and (hit["verdict"].dropna() == "not estimable").all(), name


def test_holm_runs_over_the_comparisons_of_estimable_cells(audited):
    tables, _, _, _ = audited
    small = json.dumps([GENDER[1], AGE[1]], ensure_ascii=False)
    pairs = tables["fairness_audit_cell_pairs"]
    crossed = pairs[(pairs["attributes"] == "gender × age band") & (pairs["scored_output"] == "production")
                    & (pairs["cutoff"] == 1.0)]
    cells = tables["fairness_audit_cell_groups"].query("attributes == 'gender × age band' and not is_overall")
    k = cells["group"].nunique()
    assert k == 7  # 2 x 2, the two with a missing gender, and the items the catalogue lacks
    assert len(crossed) == k * (k - 1) // 2  # comparisons="auto": all pairs of up to 10 cells
    kept = crossed[(crossed["group_a"] != small) & (crossed["group_b"] != small)]
    np.testing.assert_allclose(kept["p_holm"].to_numpy(float), holm(kept["p_value"].to_numpy(float)))
    assert kept["p_holm"].notna().any()


def test_the_stored_tables_render_side_by_side_with_the_not_estimable_note(audited, tmp_path):
    from fair_pipeline.audit.store import write_audit
    from fair_pipeline.reporting.cell_sections import audit_by_cells
    from fair_pipeline.reporting.model import ReportInputs, Table, Text

    tables, _, _, _ = audited
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        written = write_audit(con, "randomized_clicks", DAY, DAY, tables)
    assert written["fairness_audit_cell_groups"] == len(tables["fairness_audit_cell_groups"])
    inputs = ReportInputs(home=tmp_path, warehouse_path=path)
    section = audit_by_cells(inputs)
    inputs.close()
    estimates = next(b for b in section.blocks if isinstance(b, Table) and "normalized partial AUC" in b.caption).frame
    assert list(estimates.columns[:3]) == ["table", "cell", "items"]
    assert {"production", "flip_b"} <= set(estimates.columns)
    # marginal tables first, the crossing last, every cell a row
    assert estimates["table"].iloc[0].startswith("marginal:") and estimates["table"].iloc[-1] == \
        "crossed: gender × age band"
    small = f"gender={GENDER[1]} · age band={AGE[1]}"
    row = estimates[estimates["cell"] == small].iloc[0]
    assert row["items"] == "8" and row["production"] == "not estimable"
    note = next(b.markdown for b in section.blocks if isinstance(b, Text) and b.markdown.startswith("Not estimable"))
    assert f"{small} [crossed: gender × age band]: not estimable (8 items" in note
    captions = [b.caption for b in section.blocks if isinstance(b, Table)]
    assert any("Δ xAUC" in c for c in captions) and any("pairwise accuracy gap" in c for c in captions)
    assert any("comparisons show a gap larger than δ" in f.text for f in section.findings)
