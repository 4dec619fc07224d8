"""Bad input gets errors naming the column, group and count."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import (
    AuditInputError,
    audit_aggregates,
    compare_groups,
    pairwise_accuracies,
    truncated_auc,
    xauc,
)

S = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
Y = np.array([1, 1, 0, 1, 0, 0, 1, 0])


def test_single_class():
    with pytest.raises(AuditInputError, match="single class.*0 positives and 8 negatives"):
        truncated_auc(S, np.zeros(8, int))
    with pytest.raises(AuditInputError, match="single class"):
        compare_groups(S, np.ones(8, int), ["a"] * 8)
    with pytest.raises(AuditInputError, match="single class"):
        audit_aggregates(pd.DataFrame({"group": ["a"], "score": [1.0], "n_pos": [3], "n_neg": [0]}))


def test_too_few_for_a_variance():
    with pytest.raises(AuditInputError, match="1 positives and 7 negatives"):
        truncated_auc(S, [1, 0, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("bad, what", [(np.nan, "1 NaN, 0 infinite"), (np.inf, "0 NaN, 1 infinite")])
def test_non_finite_scores(bad, what):
    s = S.copy()
    s[3] = bad
    with pytest.raises(AuditInputError, match=f"scores contains 1 non-finite values \\({what}\\) out of 8"):
        truncated_auc(s, Y)
    with pytest.raises(AuditInputError, match="non-finite"):
        xauc(s, Y, ["a", "b"] * 4)


def test_labels_other_than_0_1():
    with pytest.raises(AuditInputError, match="only 0 and 1; found 2 other values \\(e.g. 2, 5\\)"):
        truncated_auc(S, [1, 2, 0, 1, 0, 5, 1, 0])
    with pytest.raises(AuditInputError, match="must be 0/1"):
        truncated_auc(S, list("10101010"))


@pytest.mark.parametrize("cut", [0, -0.1, 1.5, np.nan])
def test_cutoffs_outside_unit_interval(cut):
    with pytest.raises(AuditInputError, match="cutoffs must lie in \\(0, 1\\]; 1 value"):
        truncated_auc(S, Y, [0.1, cut])


def test_missing_or_empty_groups():
    with pytest.raises(AuditInputError, match="sensitive_features has 2 missing values"):
        compare_groups(S, Y, ["a", None, "b", "a", None, "b", "a", "b"])
    with pytest.raises(AuditInputError, match="sensitive_features has 1 missing"):
        compare_groups(S, Y, [0, 1, np.nan, 0, 1, 0, 1, 0])
    with pytest.raises(AuditInputError, match="single value"):
        xauc(S, Y, ["a"] * 8)
    # a group present with no positives is reported, not silently dropped or called fair
    res = compare_groups(np.r_[S, [0.1, 0.05]], np.r_[Y, [0, 0]], ["a"] * 8 + ["empty"] * 2, min_count=2)
    e = res.groups[res.groups["group"] == "empty"]
    assert (~e["estimable"]).all() and e["note"].str.contains("0 positives, 2 negatives").all()


def test_shapes_and_types():
    with pytest.raises(AuditInputError, match="length 8"):
        truncated_auc(S, Y[:5])
    with pytest.raises(AuditInputError, match="empty"):
        truncated_auc([], [])
    with pytest.raises(AuditInputError, match="numeric"):
        truncated_auc(np.array(list("abcdefgh")), Y)
    with pytest.raises(AuditInputError, match="either scores/labels or aggregates"):
        truncated_auc(S, Y, aggregates=pd.DataFrame({"score": [1.0], "n_pos": [1], "n_neg": [1]}))
    with pytest.raises(AuditInputError, match="lack column\\(s\\) \\['n_neg'\\]"):
        truncated_auc(aggregates=pd.DataFrame({"score": [1.0], "n_pos": [1]}))
    with pytest.raises(AuditInputError, match="aggregates.n_pos must be non-negative integers; 1 rows"):
        truncated_auc(aggregates=pd.DataFrame({"score": [1.0, 0.5], "n_pos": [1, -2], "n_neg": [1, 3]}))
    with pytest.raises(AuditInputError, match="query_ids has 1 missing"):
        pairwise_accuracies(S, Y, ["a"] * 8, [1, 1, 1, 1, None, 2, 2, 2])
