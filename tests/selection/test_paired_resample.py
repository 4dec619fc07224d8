"""Selection-rate candidates' paired differences from items resampled into the observed sizes: every resample's
costs against the candidates rebuilt row by row from the drawn items (thresholds re-chosen by
`selection_threshold`), the resampling world's centre, and one row per impression against one row per item. Its
coverage is measured by benchmarks/selection_rate_coverage.py."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.selection.elicitation import FairQuadraticMetric
from fair_pipeline.selection.elicitation.paired import candidate_parts, group_codes
from benchmarks.selection_resample import SEED, resampled_costs

LABELS = ["a", "b"]
METRIC = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2) * np.sqrt(2)], lam=0.5)
RATE = 0.4
SHIFT = 2.0  # W: the merit plus this in group "a" (the minority, mostly below the 40% threshold)


def _items(rng, n_items, tail=1.3):
    """One row per item: group, label counts (an item's impressions share its relevance), two scores."""
    group = np.where(rng.random(n_items) < 0.7, "b", "a")
    relevant = rng.random(n_items) < np.where(group == "b", 0.45, 0.35)
    merit = 0.6 * relevant + 2.0 * (group == "b") + 0.5 * rng.standard_normal(n_items)
    shows = np.ceil(2.0 * (1.0 + rng.pareto(tail, n_items))).astype(int)
    rows = pd.DataFrame({"group": group, "n_pos": shows * relevant, "n_neg": shows * ~relevant,
                         "item_id": [f"it'em+{i}" for i in range(n_items)]})
    return rows, merit, merit + SHIFT * (group == "a")


def _cost(rows, score):
    return candidate_parts(METRIC, rows, score, LABELS, selection_rate=RATE)[0]


def _resampled(rows, a, w, reps, clusters=None):
    """Candidates A and W on ``rows`` (clustered by ``clusters``, default the rows' items), resampled ``reps`` times."""
    return resampled_costs(METRIC, rows, group_codes(rows["group"], LABELS), {"A": a, "W": w}, selection_rate=RATE,
                           clusters=rows["item_id"] if clusters is None else clusters, reps=reps)


def test_every_resample_is_the_drawn_items_put_into_the_observed_sizes():
    rows, a, w = _items(np.random.default_rng(1), 60)
    out = _resampled(rows, a, w, reps=4)
    sizes = (rows["n_pos"] + rows["n_neg"]).to_numpy()
    drawn = np.random.default_rng(SEED).integers(0, len(rows), (4, len(rows)))
    for b in range(4):
        pick = rows.iloc[drawn[b]].reset_index(drop=True)  # slot k holds item drawn[b, k] at slot k's size
        relevant = pick["n_pos"].to_numpy() > 0
        rebuilt = pick.assign(n_pos=sizes * relevant, n_neg=sizes * ~relevant)
        want = [_cost(rebuilt, s[drawn[b]]) for s in (a, w)]
        assert out.costs[b] == pytest.approx(want, abs=1e-12), b
    # the resampling world's truth: every item weighing the same
    ones = rows.assign(n_pos=(rows["n_pos"] > 0).astype(int), n_neg=(rows["n_neg"] > 0).astype(int))
    assert out.centre == pytest.approx([_cost(ones, a), _cost(ones, w)], abs=1e-12)


def test_an_items_rows_keep_their_shares_and_impression_rows_give_the_item_rows_costs():
    rows, a, w = _items(np.random.default_rng(2), 80)
    per_item = _resampled(rows, a, w, reps=50)
    shows = (rows["n_pos"] + rows["n_neg"]).to_numpy()
    expand = np.repeat(np.arange(len(rows)), shows)  # one row per impression, as the benchmark's logs
    imp = pd.DataFrame({"group": rows["group"].to_numpy()[expand], "n_pos": (rows["n_pos"].to_numpy()[expand] > 0) * 1,
                        "n_neg": (rows["n_neg"].to_numpy()[expand] > 0) * 1})
    per_row = _resampled(imp, a[expand], w[expand], reps=50, clusters=rows["item_id"].to_numpy()[expand])
    assert per_row.costs == pytest.approx(per_item.costs, abs=1e-12)
    low, high, p, sd = per_item.difference("A", "W", _cost(rows, a) - _cost(rows, w))
    assert low < high and 0 < p <= 1 and sd > 0
