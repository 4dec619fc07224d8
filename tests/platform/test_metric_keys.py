"""Group labels become stable MLflow keys, and the label table reads each key back as its exact label."""
from __future__ import annotations

import re

import pytest

from fair_pipeline.platform.metric_keys import MAX_NAME_LENGTH, group_key, label_table, metric_name

LABELS = ["Women's", "age 65+", "L" * 2_000 + "<b>&'\"+", "x" * 10_240, "👩‍🦳 older", "نساء", "<script>alert(1)</script>",
          'he said "no"', "a - b", "a_b", "a b", "", " ", "0", "1", None]
MLFLOW_NAME = re.compile(r"[A-Za-z0-9_\-. :/]{1,250}")


def test_every_label_gets_a_valid_distinct_key_that_is_the_same_in_every_run():
    keys = [group_key(label) for label in LABELS]
    assert len(set(keys)) == len(LABELS)  # 'a_b' and 'a b' slug alike, the hash tells them apart
    for key in keys:
        name = metric_name("heldout_clicks", "pauc", key, "0.1")
        assert MLFLOW_NAME.fullmatch(name), name
    assert group_key("Women's") == "women_s-" + __import__("hashlib").sha256("Women's".encode()).hexdigest()[:8]
    assert group_key(float("nan")) == group_key(None) == "missing"


def test_the_label_table_maps_keys_back_to_the_exact_labels():
    table = label_table(LABELS + ["Women's"])
    assert len(table) == len(LABELS)
    back = dict(zip(table["key"], table["label"]))
    for label in LABELS:
        assert back[group_key(label)] == label


def test_a_label_used_as_a_name_part_is_refused_before_logging():
    with pytest.raises(ValueError, match="use group_key for labels"):
        metric_name("pauc", "Women's")
    with pytest.raises(ValueError, match=f"at most {MAX_NAME_LENGTH}"):
        metric_name("x" * 251)
