"""training.click_training: per-item IPW binomial rows vs the per-impression IPW loss, clipping, bad input, audit rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from fair_pipeline.training.click_training import AUDIT_COLUMNS, ClickTrainingError, audit_rows, relevance_rows


def _impressions(rng, n_items=40, w=None):
    w = np.array([1.0, 0.7, 0.5, 0.4]) if w is None else w
    item = rng.integers(0, n_items, size=600)
    position = rng.integers(1, w.size + 1, size=item.size)
    relevance = rng.random(n_items) < 0.4
    click = (relevance[item] & (rng.random(item.size) < w[position - 1])).astype(int)
    return item, position, click, w


def _per_item(item, position, click, w, n_items):
    N = np.bincount(item, minlength=n_items).astype(float)
    R = np.bincount(item, weights=click / w[position - 1], minlength=n_items)
    shown = N > 0
    return N[shown], R[shown], shown


def _rows_loss(rows, theta):
    p = expit(rows.X @ theta)
    return float(np.sum(rows.sample_weight * -(rows.y * np.log(p) + (1 - rows.y) * np.log(1 - p))))


@pytest.mark.parametrize(("seed", "n_items"), [(0, 40), (1, 40), (2, 300)])
def test_rows_reproduce_the_per_impression_ipw_loss_plus_the_clipped_part(seed, n_items):
    rng = np.random.default_rng(seed)
    item, position, click, w = _impressions(rng, n_items)
    X_items = rng.standard_normal((n_items, 3))
    groups = np.where(rng.random(n_items) < 0.5, "a", "b")
    N, R, shown = _per_item(item, position, click, w, n_items)
    rows = relevance_rows(X_items[shown], groups[shown], N, R)
    theta = rng.standard_normal(3)
    # Brute force over impressions: (c / w_j)(-log p) + (1 - c / w_j)(-log(1 - p)).
    p = expit(X_items[item] @ theta)
    ipw = click / w[position - 1]
    impression_loss = float(np.sum(ipw * -np.log(p) + (1 - ipw) * -np.log(1 - p)))
    p_item = expit(X_items[shown] @ theta)
    over = np.maximum(R - N, 0.0)
    assert _rows_loss(rows, theta) == pytest.approx(impression_loss + float(np.sum(over * -np.log(1 - p_item))), rel=1e-12)
    assert rows.clipped_items == int(np.sum(R > N)) and rows.clipped_weight == pytest.approx(over.sum())
    assert n_items == 40 or rows.clipped_items > 0  # 2 impressions per item: some IPW estimates overshoot
    assert rows.n_items == int(shown.sum())
    assert set(np.unique(rows.groups)) <= {"a", "b"} and np.all(rows.sample_weight > 0)


def test_without_position_bias_rows_are_click_counts():
    rows = relevance_rows(np.array([[1.0], [2.0]]), ["a", "b"], [5, 3], [2.0, 0.0])
    # Item 1: 2 clicks, 3 non-clicks; item 2: 0 clicks (no positive row), 3 non-clicks.
    assert rows.y.tolist() == [1, 0, 0] and rows.sample_weight.tolist() == [2.0, 3.0, 3.0]
    assert rows.X[:, 0].tolist() == [1.0, 1.0, 2.0] and rows.groups.tolist() == ["a", "a", "b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"groups": ["a", None]}, "1 items have no group"),
        ({"impressions": [3, 0]}, "1 items have no impressions"),
        ({"relevant_weight": [1.0, -0.5]}, "relevant_weight must be finite and >= 0"),
        ({"features": [[1.0], [np.nan]]}, "missing or infinite feature"),
        ({"groups": ["a"]}, "groups has shape (1,), expected (2,)"),
    ],
)
def test_bad_aggregates_are_named(kwargs, message):
    args = {"features": [[1.0], [2.0]], "groups": ["a", "b"], "impressions": [3, 2], "relevant_weight": [1.0, 0.0]}
    with pytest.raises(ClickTrainingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        relevance_rows(**{**args, **kwargs})


def test_audit_rows_stack_groups_and_gaps():
    per_group = pd.DataFrame({
        "group": ["a", "b"], "cutoff": [0.1, 0.1], "n_pos": [10, 12], "n_neg": [20, 25], "estimable": [True, True],
        "pauc": [0.3, 0.2], "se": [0.05, 0.04], "ci_low": [0.2, 0.12], "ci_high": [0.4, 0.28], "note": ["", ""],
        "lam": [1.0, 1.0],
    })
    gaps = pd.DataFrame({"cutoff": [0.1], "group_a": ["a"], "group_b": ["b"], "gap": [0.1], "se": [0.064],
                         "ci_low": [-0.025], "ci_high": [0.225], "z": [1.56], "p_value": [0.12], "estimable": [False],
                         "n_a": [30], "n_b": [37], "lam": [1.0]})
    rows = audit_rows(per_group, gaps)
    assert list(rows.columns) == ["lam", *AUDIT_COLUMNS]
    assert rows["row_type"].tolist() == ["group", "group", "gap"]
    assert rows["group"].tolist() == ["a", "b", "a - b"] and rows["auc"].tolist() == [0.3, 0.2, 0.1]
    assert rows["note"].iloc[2] == "not estimable in at least one group" and not rows["estimable"].iloc[2]
    assert np.isnan(rows["p_value"].iloc[0]) and rows["n_a"].iloc[2] == 30
