"""The real Open Bandit sample (uniform-random log, 3 slots, 38 clicks): honest, wide intervals."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.datasets import open_bandit
from fair_pipeline.position_bias import estimate_position_bias


@pytest.fixture(scope="module")
def random_log():
    impressions, _ = open_bandit.impressions_and_extras("random", open_bandit.items_table())
    return impressions


def test_randomized_estimate_on_open_bandit_is_the_ctr_ratio_with_wide_cis(random_log):
    curve = estimate_position_bias(random_log, method="randomized")
    counts = random_log.groupby("position")["click"].agg(["size", "sum"])
    assert curve["impressions"].tolist() == counts["size"].tolist() and curve["clicks"].sum() == counts["sum"].sum()
    ctr = counts["sum"] / counts["size"]
    np.testing.assert_allclose(curve["weight"], ctr / ctr.iloc[0])
    # ~13 clicks per slot: the intervals span a factor > 4 and contain "no position bias" (w = 1).
    assert (curve["ci_high"].iloc[1:] / curve["ci_low"].iloc[1:] > 4).all()
    assert ((curve["ci_low"].iloc[1:] < 1) & (curve["ci_high"].iloc[1:] > 1)).all()
    assert not curve.attrs["warnings"]


def test_open_bandit_random_log_has_no_scores_for_binned_estimators(random_log):
    """Its score is the constant propensity 1/80 and its policy is shuffle: binned estimators need production."""
    with pytest.raises(ValueError, match="no 'production' impressions"):
        estimate_position_bias(random_log, method="adjacent_pairwise")
