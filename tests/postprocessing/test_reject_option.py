"""RejectOptionClassifier: the flip rule, the grid search against a plain loop, COMPAS."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from fair_pipeline.postprocessing import PostProcessingInputError, RejectOptionClassifier, UnseenGroupError
from fair_pipeline.training.reference.data import compas_split


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    g = np.where(rng.random(n) < 0.5, "priv", "unpriv")
    y = (rng.random(n) < np.where(g == "priv", 0.55, 0.35)).astype(int)
    s = 1 / (1 + np.exp(-rng.normal(1.5 * y - 0.75 + 0.4 * (g == "priv"), 1.0)))
    return s, y, g


def test_critical_region_flips_by_group():
    roc = RejectOptionClassifier(margin=0.1, threshold=0.5, privileged="p").fit(
        [0.1, 0.9, 0.2, 0.8], [0, 1, 0, 1], sensitive_features=["p", "p", "u", "u"])
    s = np.array([0.35, 0.45, 0.55, 0.65, 0.35, 0.45, 0.55, 0.65])
    g = ["p"] * 4 + ["u"] * 4
    # privileged: 1 only above t + margin; unprivileged: 1 from t - margin up
    np.testing.assert_array_equal(roc.predict(s, sensitive_features=g), [0, 0, 0, 1, 0, 1, 1, 1])
    assert roc.threshold_ == 0.5 and roc.margin_ == 0.1
    np.testing.assert_array_equal(
        RejectOptionClassifier(margin=0.0, threshold=0.5, privileged="p").fit(
            [0.1, 0.9, 0.2, 0.8], [0, 1, 0, 1], sensitive_features=["p", "p", "u", "u"]).predict(s, sensitive_features=g),
        (s > 0.5).astype(int))


@pytest.mark.parametrize("metric", ["statistical_parity", "equal_opportunity", "average_odds"])
def test_grid_search_matches_a_plain_loop(metric):
    s, y, g = _data()
    roc = RejectOptionClassifier(metric=metric, bound=0.05, privileged="priv", n_thresholds=25, n_margins=10).fit(
        s, y, sensitive_features=g)
    best, best_bal = None, -np.inf
    for t in np.linspace(0.01, 0.99, 25):
        for m in np.linspace(0, min(t, 1 - t), 10):
            d = np.where(g == "priv", s > t + m, s >= t - m)
            u, p = g == "unpriv", g == "priv"
            if metric == "statistical_parity":
                val = d[u].mean() - d[p].mean()
            elif metric == "equal_opportunity":
                val = d[u & (y == 1)].mean() - d[p & (y == 1)].mean()
            else:
                val = 0.5 * (d[u & (y == 1)].mean() - d[p & (y == 1)].mean() + d[u & (y == 0)].mean() - d[p & (y == 0)].mean())
            bal = 0.5 * (d[y == 1].mean() + 1 - d[y == 0].mean())
            if abs(val) <= 0.05 and bal > best_bal + 1e-12:
                best, best_bal = (t, m, val), bal
    assert roc.feasible_
    assert (roc.threshold_, roc.margin_) == pytest.approx(best[:2])
    assert roc.metric_value_ == pytest.approx(best[2]) and roc.balanced_accuracy_ == pytest.approx(best_bal)


def test_accuracy_objective_picks_the_most_accurate_feasible_point():
    s, y, g = _data(2)
    roc = RejectOptionClassifier(objective="accuracy", privileged="priv", n_thresholds=30, n_margins=8).fit(
        s, y, sensitive_features=g)
    grid = roc.grid_[roc.grid_["metric"].abs() <= 0.05]
    d = roc.predict(s, sensitive_features=g)
    assert np.mean(d == y) == pytest.approx(grid["accuracy"].max())


def test_infeasible_bound_warns_and_takes_the_fairest_point():
    s, y, g = _data(1)
    with pytest.warns(UserWarning, match="no \\(threshold, margin\\)"):
        roc = RejectOptionClassifier(bound=0.001, privileged="priv", low=0.4, high=0.6, n_thresholds=3, n_margins=1).fit(
            s, y, sensitive_features=g)
    assert not roc.feasible_ and abs(roc.metric_value_) == pytest.approx(np.abs(roc.grid_["metric"]).min())


def test_errors():
    s, y, g = _data()
    with pytest.raises(PostProcessingInputError, match="privileged='x'"):
        RejectOptionClassifier(privileged="x").fit(s, y, sensitive_features=g)
    with pytest.raises(PostProcessingInputError, match="'priv' has"):
        RejectOptionClassifier().fit(s, np.where(g == "priv", 0, y), sensitive_features=g)
    roc = RejectOptionClassifier(n_thresholds=5, n_margins=3).fit(s, y, sensitive_features=g)
    assert roc.privileged_ == "priv"  # inferred: the higher positive rate
    with pytest.raises(UnseenGroupError):
        roc.predict(s[:2], sensitive_features=["priv", "other"])
    with pytest.raises(PostProcessingInputError, match="metric must be"):
        RejectOptionClassifier(metric="odds").fit(s, y, sensitive_features=g)


def test_compas_parity_gap_falls_within_the_bound_on_held_out_data():
    split = compas_split()
    lr = LogisticRegression(max_iter=2000).fit(split.X_train, split.y_train)
    # favourable outcome = no recidivism predicted: score = P(y = 0), label 1 = no recidivism
    s_tr, s_te = lr.predict_proba(split.X_train)[:, 0], lr.predict_proba(split.X_test)[:, 0]
    y_tr, y_te = 1 - split.y_train, 1 - split.y_test
    roc = RejectOptionClassifier(metric="statistical_parity", bound=0.05, privileged="Caucasian").fit(
        s_tr, y_tr, sensitive_features=split.groups_train)
    assert roc.feasible_ and roc.margin_ > 0
    t = roc.evaluate(s_te, y_te, sensitive_features=split.groups_test).set_index(["group", "metric"])
    gap = t.loc[("African-American - Caucasian", "selection_rate")]
    plain = (s_te > 0.5)
    g = split.groups_test
    plain_gap = plain[g == "African-American"].mean() - plain[g == "Caucasian"].mean()
    assert abs(plain_gap) > 0.1  # the plain 0.5 threshold is far from parity on COMPAS
    assert abs(gap.estimate) < abs(plain_gap) - 2 * gap.se
    assert gap.ci_low <= 0.05 and gap.ci_high >= -0.05
