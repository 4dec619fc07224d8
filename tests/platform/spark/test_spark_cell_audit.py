"""The audit by attribute cells (`audit.cell_audit`, `$FAIR_PIPELINE_GROUP_COLUMNS`) on Spark equals its DuckDB
path on the same rows: every cell table (groups, pairs, xAUC, xAUC deltas, pairwise accuracies), every value to
1e-9, for each attribute on its own and their crossing, for an output that scores by the logged group (it negates
group b's scores: wrong if either engine handed it the cell instead). The pairwise
accuracies run on a sample of queries small enough that some cells with enough items in the window have too few
items with positives or negatives in the sample: on Spark that count is made on the executors
(`audit.spark_pairwise.sampled_cell_items`), and those cells are not estimable on both engines."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit.cell_audit import CELL_TABLES, audit_cells
from fair_pipeline.audit.sql import label_source
from fair_pipeline.platform.engines.spark_engine import SparkEngine
from fair_pipeline.platform.windows import PartitionWindow
from tests.audit.test_cell_audit import CUTOFFS, DAY, OUTPUTS, _warehouse

WINDOW = PartitionWindow(DAY, DAY, (DAY,))
COLUMNS = ["gender", "age band"]
OUTPUT = [o for o in OUTPUTS if o.name == "flip_b"]  # one output: every Spark audit pass is many small jobs
SAMPLED_QUERIES = 40  # of 400: the pairwise cell rule then flags cells the window rule keeps
TABLES = [name for name, _ in CELL_TABLES.values()]


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory):
    con, frame, items = _warehouse()
    engine = SparkEngine(spark, tmp_path_factory.mktemp("cells_spark"))
    for name, data in (("stg_randomized_impressions", frame), ("stg_items", items)):
        engine.register_frame(f"cells_{name}", data)
        engine.create_view(("staging", name), f"SELECT * FROM cells_{name}")
    source = label_source("randomized_clicks", tmp_path_factory.mktemp("landing"), WINDOW, ["shuffle"])
    options = dict(variance="item_clustered", max_queries=SAMPLED_QUERIES, cutoffs=CUTOFFS, min_count=5,
                   confidence=0.95)
    on_duckdb = audit_cells(con, str(tmp_path_factory.mktemp("scratch")), source, WINDOW, OUTPUT, COLUMNS,
                            con=con, **options)
    on_spark = audit_cells(engine, str(tmp_path_factory.mktemp("scratch_spark")), source, WINDOW, OUTPUT, COLUMNS,
                           **options)
    con.close()
    return on_duckdb, on_spark


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in one order on both engines: by every text column and the cutoff (their values as text)."""
    keys = [c for c in frame.columns if frame[c].dtype == object or c == "cutoff"]
    order = frame[keys].astype(str).sort_values(keys).index
    return frame.loc[order].reset_index(drop=True)


@pytest.mark.parametrize("name", TABLES)
def test_every_cell_table_on_spark_equals_duckdbs(both, name):
    (duck, duck_notes), (spark, spark_notes) = both
    assert duck_notes == spark_notes == []
    want, got = _sorted(duck[name]), _sorted(spark[name])
    assert len(want) > 0 and list(got.columns) == list(want.columns), name
    assert set(want["attributes"]) == {"gender", "age band", "gender × age band"}
    for column in want.columns:
        w, g = want[column], got[column]
        if pd.api.types.is_numeric_dtype(w) and not pd.api.types.is_bool_dtype(w):
            np.testing.assert_allclose(g.to_numpy(float), w.to_numpy(float), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name}.{column}")
        else:
            assert g.astype(object).where(g.notna(), None).tolist() == \
                w.astype(object).where(w.notna(), None).tolist(), f"{name}.{column}"


def test_the_sampled_queries_rule_flags_pairwise_cells_on_spark_too(both):
    (duck, _), (spark, _) = both
    for tables in (duck, spark):
        pairwise = tables["fairness_audit_cell_pairwise"]
        sampled = pairwise["note"].fillna("").str.contains("in the sampled queries")
        assert sampled.any() and pairwise.loc[~sampled, "estimable"].astype(bool).any()
        assert not pairwise.loc[sampled, "estimable"].astype(bool).any()
        assert pairwise.loc[sampled, "accuracy"].isna().all() if "accuracy" in pairwise else True
        # a flagged cell holds enough items in the window: only the sample's count made it not estimable
        groups = tables["fairness_audit_cell_groups"]
        flagged = set(pairwise.loc[sampled, ["group_a", "group_b"]].stack()) & set(groups["group"])
        assert (groups[groups["group"].isin(flagged)]["items"] >= 15).any()
