"""PairwiseFairRanker: the pair sampler against enumeration, held-out gaps on the simulator and Adult."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from fair_pipeline.audit.stats.pairwise import pairwise_accuracies
from fair_pipeline.audit.stats.pairwise_gap import cross_group_gaps, marginal_gaps
from fair_pipeline.training import PairwiseFairnessError, PairwiseFairRanker
from fair_pipeline.training.pairwise_data import adult_queries, simulator_queries
from fair_pipeline.training.pairwise_fair import _CellSampler


def test_sampler_is_uniform_over_the_cells_pairs():
    rng = np.random.default_rng(0)
    n = 40
    q = rng.integers(0, 6, n)
    y = rng.random(n) < 0.4
    g = rng.random(n) < 0.5
    rows = np.arange(n)
    better, worse = rows[y & g], rows[~y & ~g]
    pairs = {(i, j) for i, j in itertools.product(better, worse) if q[i] == q[j]}
    sampler = _CellSampler(q, better, worse, 6)
    assert sampler.n_pairs == len(pairs)
    b, w = sampler.draw(rng, 200_000)
    drawn = list(zip(b.tolist(), w.tolist()))
    assert set(drawn) == pairs
    counts = np.array([drawn.count(p) for p in sorted(pairs)]) if len(pairs) < 60 else None
    if counts is not None:
        expected = 200_000 / len(pairs)
        assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)


def test_weighted_sampler_draws_pairs_in_proportion_to_the_weight_products():
    rng = np.random.default_rng(1)
    n = 30
    q = rng.integers(0, 4, n)
    y = rng.random(n) < 0.4
    w = rng.uniform(0.2, 3.0, n)
    rows = np.arange(n)
    pairs = {(i, j): w[i] * w[j] for i, j in itertools.product(rows[y], rows[~y]) if q[i] == q[j]}
    sampler = _CellSampler(q, rows[y], rows[~y], 4, w)
    assert sampler.n_pairs == pytest.approx(sum(pairs.values()))
    N = 300_000
    b, v = sampler.draw(rng, N)
    keys, counts = np.unique(np.c_[b, v], axis=0, return_counts=True)
    assert {tuple(k) for k in keys.tolist()} <= set(pairs)
    total = sum(pairs.values())
    for (i, j), c in zip(keys.tolist(), counts):
        p = pairs[(i, j)] / total
        assert abs(c / N - p) < 5 * np.sqrt(p * (1 - p) / N) + 1e-4


@pytest.fixture(scope="module")
def sim():
    return simulator_queries()


def _gap(model, d):
    return cross_group_gaps(model.score(d.X_test), d.y_test, d.groups_test, d.queries_test).iloc[0]


def _auc(model, d):
    return pairwise_accuracies(model.score(d.X_test), d.y_test, d.groups_test, d.queries_test).overall.iloc[0]


def test_cross_group_constraint_halves_the_held_out_gap_on_the_simulator(sim):
    plain = PairwiseFairRanker(constraint=None, random_state=0).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    fair = PairwiseFairRanker(random_state=0).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    g0, g1 = _gap(plain, sim), _gap(fair, sim)
    assert fair.feasible_
    assert abs(g1.gap) <= 0.5 * abs(g0.gap) and abs(g0.gap) > 0.2
    assert abs(g1.gap) < 0.05  # slack 0.02 plus held-out noise
    cost = _auc(plain, sim).accuracy - _auc(fair, sim).accuracy
    assert 0 < cost < 0.05


def test_marginal_constraint_on_the_simulator(sim):
    def marg(model):
        m = pairwise_accuracies(model.score(sim.X_test), sim.y_test, sim.groups_test, sim.queries_test).marginals
        m = m[m.role == "better"].set_index("group")["accuracy"]
        return m["1"] - m["0"]

    plain = PairwiseFairRanker(constraint=None, random_state=0, n_iter=500).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    fair = PairwiseFairRanker("marginal_equal_opportunity", random_state=0, n_iter=500).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    assert abs(marg(fair)) <= 0.5 * abs(marg(plain))


def test_continuous_constraint_on_a_simulated_attribute(sim):
    def diff(model):
        c = pairwise_accuracies(model.score(sim.X_test), sim.y_test, sim.groups_test, sim.queries_test,
                                continuous_feature=sim.z_test).continuous.set_index("metric")
        return c.loc["A_> - A_<"]

    plain = PairwiseFairRanker(constraint=None, random_state=0, n_iter=500).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    fair = PairwiseFairRanker("continuous", random_state=0, n_iter=500).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.z_train, query_ids=sim.queries_train)
    d0, d1 = diff(plain), diff(fair)
    assert abs(d1.accuracy) <= 0.5 * abs(d0.accuracy) and d0.accuracy > 0.2
    assert abs(d1.accuracy) < 0.03 + 2 * d1.se


def test_marginal_constraint_with_three_groups(sim):
    # group "1" split at random in two: three groups, six marginal constraints
    rng = np.random.default_rng(0)

    def three(groups):
        return np.where(groups == "1", np.where(rng.random(groups.size) < 0.5, "1a", "1b"), "0").astype(object)

    g_tr, g_te = three(sim.groups_train), three(sim.groups_test)

    def worst(model):
        r = marginal_gaps(model.score(sim.X_test), sim.y_test, g_te, sim.queries_test)
        assert len(r) == 3
        return r["gap"].abs().max()

    kw = dict(random_state=0, n_iter=400)
    plain = PairwiseFairRanker(None, **kw).fit(sim.X_train, sim.y_train, sensitive_features=g_tr,
                                               query_ids=sim.queries_train)
    fair = PairwiseFairRanker("marginal_equal_opportunity", **kw).fit(
        sim.X_train, sim.y_train, sensitive_features=g_tr, query_ids=sim.queries_train)
    assert len(fair.constraint_names_) == 6 and fair.groups_ == ["0", "1a", "1b"]
    assert worst(fair) <= 0.5 * worst(plain)


@pytest.mark.slow
def test_cross_group_constraint_halves_the_held_out_gap_on_adult():
    d = adult_queries()
    kw = dict(random_state=0, n_iter=400)
    plain = PairwiseFairRanker(constraint=None, **kw).fit(
        d.X_train, d.y_train, sensitive_features=d.groups_train, query_ids=d.queries_train)
    fair = PairwiseFairRanker(**kw).fit(d.X_train, d.y_train, sensitive_features=d.groups_train,
                                        query_ids=d.queries_train)
    g0, g1 = _gap(plain, d), _gap(fair, d)
    assert abs(g1.gap) <= 0.5 * abs(g0.gap)
    assert _auc(plain, d).accuracy - _auc(fair, d).accuracy < 0.05


def test_snapshots_best_iterate_and_shrunk_mixture(sim):
    m = PairwiseFairRanker(random_state=1, n_iter=300, n_snapshots=30).fit(
        sim.X_train, sim.y_train, sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    h = m.history_
    assert len(h) == 30 and m.snapshot_coefs_.shape == (30, sim.X_train.shape[1])
    feasible = h[h.max_violation <= 0]
    assert m.feasible_ and m.train_auc_ == pytest.approx(feasible.auc.max())
    np.testing.assert_array_equal(m.coef_, m.snapshot_coefs_[feasible.auc.idxmax()])
    w = m.mixture_.set_index("snapshot")["weight"]
    assert w.sum() == pytest.approx(1.0) and len(w) <= len(m.constraint_names_) + 1
    viol = h[[c for c in h.columns if c.startswith("violation[")]].to_numpy()
    assert np.all(w.to_numpy() @ viol[w.index] <= 1e-9)  # the stochastic model meets the constraints in expectation
    assert w.to_numpy() @ h.auc.to_numpy()[w.index] >= m.train_auc_ - 1e-9  # and is at least as good as the best iterate


def test_unit_weights_change_nothing_and_zero_weights_drop_rows(sim):
    kw = dict(random_state=3, n_iter=50, n_snapshots=5)
    args = (sim.X_train, sim.y_train)
    fit = dict(sensitive_features=sim.groups_train, query_ids=sim.queries_train)
    a = PairwiseFairRanker(**kw).fit(*args, **fit)
    b = PairwiseFairRanker(**kw).fit(*args, **fit, sample_weight=np.ones(sim.y_train.size))
    np.testing.assert_allclose(a.coef_, b.coef_)
    keep = sim.queries_train < 700
    c = PairwiseFairRanker(**kw).fit(*args, **fit, sample_weight=keep.astype(float))
    d = PairwiseFairRanker(**kw).fit(sim.X_train[keep], sim.y_train[keep], sensitive_features=sim.groups_train[keep],
                                     query_ids=sim.queries_train[keep])
    np.testing.assert_allclose(c.coef_, d.coef_)
    with pytest.raises(PairwiseFairnessError, match="sample_weight"):
        PairwiseFairRanker(**kw).fit(*args, **fit, sample_weight=-np.ones(sim.y_train.size))


def test_errors_name_the_problem(sim):
    X, y, g, q = sim.X_train[:200], sim.y_train[:200], sim.groups_train[:200], sim.queries_train[:200]
    with pytest.raises(PairwiseFairnessError, match="query_ids is required"):
        PairwiseFairRanker().fit(X, y, sensitive_features=g, query_ids=None)
    with pytest.raises(PairwiseFairnessError, match="no query has both"):
        PairwiseFairRanker().fit(X, np.ones(200), sensitive_features=g, query_ids=q)
    with pytest.raises(PairwiseFairnessError, match="constraint must be"):
        PairwiseFairRanker("equal_odds").fit(X, y, sensitive_features=g, query_ids=q)
    with pytest.raises(PairwiseFairnessError, match="n_iter must be an integer"):
        PairwiseFairRanker(n_iter=0).fit(X, y, sensitive_features=g, query_ids=q)
    with pytest.raises(PairwiseFairnessError, match="not fitted"):
        PairwiseFairRanker().score(X)
    with pytest.raises(PairwiseFairnessError, match="shape"):
        PairwiseFairRanker(n_iter=5).fit(X, y, sensitive_features=g, query_ids=q).score(X[:, :3])
