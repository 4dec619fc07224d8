"""ThresholdPostProcessor on Adult and COMPAS against Fairlearn's ThresholdOptimizer (same constraint)."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from fair_pipeline.postprocessing import ThresholdPostProcessor, equalized_odds_gap
from fair_pipeline.training.reference.data import adult_split, compas_split


def _expected_accuracy(p, y):
    return float(np.mean(np.where(y == 1, p, 1 - p)))


@pytest.fixture(scope="module", params=["adult", "compas"])
def scored(request):
    split = adult_split() if request.param == "adult" else compas_split()
    lr = LogisticRegression(max_iter=2000).fit(split.X_train, split.y_train)
    return split, lr


def test_equalized_odds_in_sample_and_held_out_against_fairlearn(scored):
    split, lr = scored
    s_tr, s_te = lr.predict_proba(split.X_train)[:, 1], lr.predict_proba(split.X_test)[:, 1]
    pp = ThresholdPostProcessor("equalized_odds").fit(s_tr, split.y_train, sensitive_features=split.groups_train)
    p_tr = pp.predict_expected(s_tr, sensitive_features=split.groups_train)
    assert equalized_odds_gap(p_tr, split.y_train, split.groups_train) <= 0.01
    ours = _expected_accuracy(pp.predict_expected(s_te, sensitive_features=split.groups_test), split.y_test)

    fairlearn = pytest.importorskip("fairlearn.postprocessing",
                                    reason="fairlearn is not installed (pip install '.[bench]')")
    to = fairlearn.ThresholdOptimizer(estimator=lr, constraints="equalized_odds", objective="accuracy_score",
                                      prefit=True, predict_method="predict_proba")
    to.fit(split.X_train, split.y_train, sensitive_features=split.groups_train)
    q_tr = to._pmf_predict(split.X_train, sensitive_features=split.groups_train)[:, 1]
    q_te = to._pmf_predict(split.X_test, sensitive_features=split.groups_test)[:, 1]
    theirs = _expected_accuracy(q_te, split.y_test)
    assert abs(ours - theirs) <= 0.005, (ours, theirs)
    # in sample the exact LP is at least as accurate as Fairlearn's grid over the hull intersection
    assert pp.objective_value_ >= _expected_accuracy(q_tr, split.y_train) - 1e-6
