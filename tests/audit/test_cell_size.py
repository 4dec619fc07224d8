"""The minimum cell size: who is too small (items in the window, items with positives / negatives in the sampled
queries), and what flagging does to a stored table (NaN estimates, verdict, note, Holm over what remains)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.cell_size import flag_small_cells, sampled_small_cells, small_cells
from fair_pipeline.audit.stats.inference import holm


def test_small_cells_count_items():
    notes = small_cells(pd.Series({'["F", "65+"]': 3, '["M", "18–34"]': 40}), 15)
    assert list(notes) == ['["F", "65+"]']
    assert notes['["F", "65+"]'].startswith("not estimable (3 items; a cell needs >= 15 items")


def test_sampled_small_cells_count_items_with_positives_and_with_negatives():
    rows = pd.DataFrame({"group": ["a"] * 4 + ["b"] * 4, "item_id": ["i1", "i2", "i2", "i3", "j1", "j2", "j3", "j4"],
                         "n_pos": [1, 0, 1, 0, 1, 1, 0, 0], "n_neg": [0, 1, 0, 2, 1, 1, 1, 1]})
    notes = sampled_small_cells(rows, 3)
    assert set(notes) == {"a", "b"}  # a: i1, i2 with positives; b: j1, j2 (2 < 3 each)
    rows.loc[6, "n_pos"] = 1
    assert set(sampled_small_cells(rows, 3)) == {"a"}
    assert "2 items with positives, 2 with negatives" in notes["a"]


def test_flagging_blanks_every_comparison_of_the_cell_and_reruns_holm():
    p = np.array([0.001, 0.02, 0.04, 0.03, 0.5, 0.01])
    pairs = pd.DataFrame({"scored_output": "m", "cutoff": 0.1,
                          "group_a": ["a", "a", "a", "b", "b", "c"], "group_b": ["b", "c", "d", "c", "d", "d"],
                          "diff": 0.1, "p_value": p, "p_holm": holm(p), "estimable": True, "verdict": "inconclusive"})
    out = flag_small_cells("pairs", pairs, {"d": "not estimable (3 items; ...)"})
    hit = out["group_b"] == "d"
    assert out.loc[hit, ["diff", "p_value", "p_holm"]].isna().all().all()
    assert not out.loc[hit, "estimable"].any() and (out.loc[hit, "verdict"] == "not estimable").all()
    assert (out.loc[hit, "note"] == "not estimable (3 items; ...)").all()
    np.testing.assert_allclose(out.loc[~hit, "p_holm"], holm(p[~hit.to_numpy()]))
    assert len(out) == len(pairs)  # nothing dropped
