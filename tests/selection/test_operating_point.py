"""Group rates at a selection-rate threshold, against a brute force over expanded examples."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.selection.elicitation.operating_point import group_rates, selection_threshold


def _counts(rng, n=60):
    return pd.DataFrame({"group": rng.choice(["a", "b"], n), "score": rng.integers(0, 15, n) / 7.0,
                         "n_pos": rng.integers(0, 4, n), "n_neg": rng.integers(0, 4, n)})


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("rate", [0.1, 0.37, 0.5, 1.0])
def test_rates_match_brute_force_over_examples(seed, rate):
    frame = _counts(np.random.default_rng(seed))
    # one row per example: (group, score, label)
    ex = [(r.group, r.score, y) for r in frame.itertuples() for y, n in ((1, r.n_pos), (0, r.n_neg)) for _ in range(n)]
    scores = sorted((s for _, s, _ in ex), reverse=True)
    t = scores[int(np.ceil(rate * len(ex))) - 1]
    assert selection_threshold(frame, rate) == t
    assert sum(s >= t for _, s, _ in ex) >= rate * len(ex)
    got = group_rates(frame, t).set_index("group")
    for g in ("a", "b"):
        pos = [s for gg, s, y in ex if gg == g and y == 1]
        neg = [s for gg, s, y in ex if gg == g and y == 0]
        assert got.at[g, "tpr"] == pytest.approx(sum(s >= t for s in pos) / len(pos), rel=1e-15)
        assert got.at[g, "tnr"] == pytest.approx(sum(s < t for s in neg) / len(neg), rel=1e-15)
        assert (got.at[g, "n_pos"], got.at[g, "n_neg"]) == (len(pos), len(neg))


def test_absent_class_gives_nan_rate_and_bad_input_is_named():
    frame = pd.DataFrame({"group": ["a", "a", "b"], "score": [0.1, 0.9, 0.5], "n_pos": [1, 1, 0], "n_neg": [1, 0, 3]})
    rates = group_rates(frame, 0.5).set_index("group")
    assert np.isnan(rates.at["b", "tpr"]) and rates.at["b", "tnr"] == 0.0
    with pytest.raises(ValueError, match="selection_rate"):
        selection_threshold(frame, 0.0)
    with pytest.raises(ValueError, match="lack columns \\['n_neg'\\]"):
        group_rates(frame.drop(columns="n_neg"), 0.5)
    with pytest.raises(ValueError, match="non-finite scores"):
        selection_threshold(frame.assign(score=[np.nan, 1, 2]), 0.5)
