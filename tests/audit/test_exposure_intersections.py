"""Exposure parity by attribute and crossed: equal to exposure_parity on the labels, small cells not estimable."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import AuditInputError, exposure_parity
from fair_pipeline.audit.stats.exposure_intersections import exposure_parity_by_attributes, side_by_side

W = 1.0 / np.log2(1.0 + np.arange(1, 9))


def _log(seed=0, n=30_000):
    rng = np.random.default_rng(seed)
    gender = rng.choice(["women", "men", "non-binary"], n, p=[0.48, 0.48, 0.04])
    age = rng.choice(["18–29", "30–49", "50+"], n, p=[0.3, 0.4, 0.3])
    # the ranker pushes older women down: each attribute alone looks milder than the cell
    penalty = ((gender == "women") & (age == "50+")).astype(float)
    position = np.clip(rng.integers(1, 9, n) + (penalty * rng.integers(0, 5, n)).astype(int), 1, 8)
    click = (rng.random(n) < W[position - 1] * 0.3).astype(int)
    return pd.DataFrame({"position": position, "click": click, "gender": gender, "age_band": age,
                         "item": rng.integers(0, 2000, n)})


def test_each_attribute_and_the_crossing_equal_exposure_parity_on_their_labels():
    d = _log()
    res = exposure_parity_by_attributes(d["position"], d["click"], d[["gender", "age_band"]], W,
                                        clusters=d["item"], min_cell=50)
    assert list(res) == ["gender", "age_band", "gender × age_band"]
    direct = exposure_parity(d["position"], d["click"], d["gender"], W, clusters=d["item"])
    pd.testing.assert_frame_equal(res["gender"].pairs, direct.pairs)
    crossed = res["gender × age_band"]
    assert len(crossed.per_group) == 9
    assert set(crossed.per_group["gender"]) == {"women", "men", "non-binary"}
    cell = crossed.per_group.set_index(["gender", "age_band"]).loc[("women", "50+")]
    labels = d["gender"] + " × " + d["age_band"]
    want = exposure_parity(d["position"], d["click"], labels, W, clusters=d["item"]).per_group.set_index("group")
    assert cell["exposure_over_merit"] == pytest.approx(want.loc["women × 50+", "exposure_over_merit"], rel=1e-12)
    assert cell["label"] == "gender=women · age_band=50+"
    # the crossed cell is worse off than either of its attributes' groups
    table = side_by_side(res)
    ratio = table.set_index(["attributes", "group"])["ratio"]
    assert ratio[("gender × age_band", '["women", "50+"]')] < min(ratio[("gender", "women")], ratio[("age_band", "50+")])


def test_small_cells_are_not_estimable_with_the_reason_and_stay():
    d = _log(1, n=6000)
    res = exposure_parity_by_attributes(d["position"], d["click"], d[["gender", "age_band"]], W, min_cell=200)
    crossed = res["gender × age_band"]
    small = crossed.per_group[crossed.per_group["n"] < 200]
    assert len(small) >= 3 and (~small["estimable"]).all()
    assert small["note"].str.contains("minimum cell size").all() and small["exposure_over_merit"].isna().all()
    pairs = crossed.pairs.set_index("group")
    assert (pairs.loc[small["group"], "verdict"] == "not estimable").all()
    table = side_by_side(res)
    assert set(table["attributes"]) == {"gender", "age_band", "gender × age_band"}
    assert len(table) == 3 + 3 + 9 and (table["verdict"] == "reference").sum() == 3


def test_missing_attribute_values_are_named():
    d = _log(2, n=500)
    attrs = d[["gender", "age_band"]].astype(object)
    attrs.loc[3, "age_band"] = None
    with pytest.raises(AuditInputError, match=r"missing values \{'age_band': 1\}"):
        exposure_parity_by_attributes(d["position"], d["click"], attrs, W)


def test_cells_are_keyed_without_ambiguity_whatever_the_labels_text():
    """Values holding the separators ("a × b", quotes, "·", "=") or non-Latin text: two different cells whose
    joined text would collide stay two cells."""
    rng = np.random.default_rng(4)
    n = 8000
    first = rng.choice(["a × b", "a"], n)
    second = np.where(first == "a", "b × c", rng.choice(['c "q"', "65+"], n))
    second = np.where((first == "a × b") & (rng.random(n) < 0.5), "c", second)  # "a × b"+"c" vs "a"+"b × c"
    position = rng.integers(1, 9, n)
    click = (rng.random(n) < W[position - 1] * 0.4).astype(int)
    attrs = pd.DataFrame({"x=1": first, "возраст": second})
    res = exposure_parity_by_attributes(position, click, attrs, W, min_cell=10)
    crossed = res["x=1 × возраст"].per_group.set_index("group")
    assert crossed.loc['["a × b", "c"]', "n"] + crossed.loc['["a", "b × c"]', "n"] == \
        ((first == "a × b") & (second == "c")).sum() + ((first == "a") & (second == "b × c")).sum()
    assert crossed.loc['["a × b", "c"]', "n"] == ((first == "a × b") & (second == "c")).sum()
    assert crossed.loc['["a × b", "c \\"q\\""]', "label"] == 'x=1=a × b · возраст=c "q"'
