"""Adaptive elicitation for a person: few questions, each with a visible difference, robust to slips.

The paper's QPME bisects gradient directions on small spheres: its later questions compare profiles
that differ in the 3rd-4th decimal, one wrong answer sends a bisection astray for good, and it needs
hundreds of answers.  Here the same Definition-4 metric is learnt from the same kind of question,
but each question is chosen to be informative *for a person*:

* cost(r) = <w, phi(r)> is linear in w = ((1 - lam) a, lam vec B^{uv}) (``answer_model.cost_features``),
  so every answer is a noisy statement about the sign of <w, phi(r1) - phi(r2)>, or, for "about
  the same", about its size relative to the costs.
* A particle posterior over w (prior: a = |z| / |z|, B^{uv} = L L^T scaled to 1/2 sum |B^{uv}|_F = 1,
  lam = sigmoid(1.5 l), all of z, L, l standard normal) is updated with the answer model's
  likelihood; a slip costs a factor ~20, it never ends the session.  When the particles
  degenerate they are resampled and moved by preconditioned Crank-Nicolson steps, which keep the prior
  invariant so the acceptance ratio is the likelihood ratio.
* The next question is the pair of whole-percent profiles (from a seeded pool; the day's candidates
  too) whose answer the particles disagree about most (mutual information of the 3-way answer).
  A pair whose difference the particles expect to be below the resolution teaches nothing, so it is
  never asked.
* The session stops when the estimate (posterior mean of w) orders random pairs that differ by at least
  the resolution like the posterior does with probability ``target_agreement`` -- or, given
  ``candidates``, as soon as the order of every pair of candidates is settled up to the resolution
  with that probability -- or after ``max_answers``.

Elicitation is deterministic given its answers (seeded pools and moves), so a stored session replays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fair_pipeline.selection.elicitation.answer_model import (
    answer_index,
    answer_probabilities,
    cost_features,
    relative_difference,
)
from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric, group_pairs


@dataclass(frozen=True)
class AdaptiveSettings:
    resolution: float = 0.02        # relative cost difference below which a person says "about the same"
    error_rate: float = 0.1         # share of clear questions assumed answered the wrong way (answer model)
    max_answers: int = 40
    min_answers: int = 12
    target_agreement: float = 0.95
    n_particles: int = 1500
    n_pool: int = 300               # candidate questions per step
    seed: int = 0

    def check(self) -> None:
        if not 0 < self.resolution < 1:
            raise ValueError(f"resolution must be a relative cost difference in (0, 1), got {self.resolution!r}")
        if not 0 <= self.error_rate < 0.4:
            raise ValueError(f"error_rate must be in [0, 0.4), got {self.error_rate!r}")
        if int(self.max_answers) != self.max_answers or self.max_answers < 1:
            raise ValueError(f"max_answers must be a positive integer, got {self.max_answers!r}")
        if not 0.5 < self.target_agreement < 1:
            raise ValueError(f"target_agreement must be in (0.5, 1), got {self.target_agreement!r}")


@dataclass
class _Answers:
    features: list  # per answer: (phi(r1), phi(r2))
    outcomes: list  # per answer: 0 r1, 1 r2, 2 same

    def loglik(self, weights: np.ndarray, settings: AdaptiveSettings) -> np.ndarray:
        """Log-likelihood of all answers for each particle's w (n, D) -> (n,)."""
        if not self.outcomes:
            return np.zeros(weights.shape[0])
        f = np.array(self.features)  # (q, 2, D)
        c1, c2 = weights @ f[:, 0].T, weights @ f[:, 1].T
        probs = answer_probabilities(relative_difference(c1, c2), settings.resolution, settings.error_rate)
        picked = np.take_along_axis(probs, np.array(self.outcomes)[None, :, None], axis=2)[..., 0]
        return np.log(picked).sum(axis=1)


class _Prior:
    """theta (standard normal) -> w of a Definition-4 metric, normalised so (1 - lam) + lam = 1."""

    def __init__(self, n_groups: int, n_classes: int):
        self.m, self.k = n_groups, n_classes
        self.n_pairs = len(group_pairs(n_groups))
        self.dim = n_classes + self.n_pairs * n_classes * n_classes + 1

    def weights(self, theta: np.ndarray) -> np.ndarray:
        k, p = self.k, self.n_pairs
        z = np.abs(theta[:, :k]) + 1e-12
        a = z / np.linalg.norm(z, axis=1, keepdims=True)
        lower = theta[:, k:k + p * k * k].reshape(-1, p, k, k)
        mats = lower @ np.swapaxes(lower, -1, -2)
        fro = np.linalg.norm(mats, axis=(2, 3)).sum(axis=1)
        mats = mats * (2.0 / np.maximum(fro, 1e-12))[:, None, None, None]
        lam = 1.0 / (1.0 + np.exp(-1.5 * theta[:, -1]))
        return np.concatenate([(1 - lam)[:, None] * a, lam[:, None] * mats.reshape(len(theta), -1)], axis=1)


def metric_from_weights(w: np.ndarray, n_groups: int, n_classes: int, group_weights, **kwargs) -> FairQuadraticMetric:
    """Definition 4 form of w = ((1 - lam) a, lam vec B^{uv}): |a| = 1, 1/2 sum |B^{uv}|_F = 1."""
    k = n_classes
    lin = w[:k]
    mats = w[k:].reshape(-1, k, k)
    mats = 0.5 * (mats + np.swapaxes(mats, 1, 2))
    one_minus_lam, lam = np.linalg.norm(lin), 0.5 * np.linalg.norm(mats, axis=(1, 2)).sum()
    lam = lam / (one_minus_lam + lam)
    a = lin / np.linalg.norm(lin) if np.linalg.norm(lin) > 0 else np.full(k, 1 / np.sqrt(k))
    scale = 0.5 * np.linalg.norm(mats, axis=(1, 2)).sum()
    pair_mats = [b / scale if scale > 0 else b for b in mats]
    return FairQuadraticMetric.from_pairs(a, pair_mats, lam, group_weights, **kwargs)


def whole_percent_profiles(rng: np.random.Generator, n: int, n_groups: int, n_classes: int,
                           radius: float) -> np.ndarray:
    """n profiles (n, m, k): each group's rates uniform in the ball of ``radius`` around 1/k, rounded
    to whole percents (so what a person reads is exactly what is compared) and kept in the ball."""
    o = 1.0 / n_classes
    x = rng.standard_normal((n, n_groups, n_classes))
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    x *= radius * rng.uniform(size=(n, n_groups, 1)) ** (1.0 / n_classes)
    return round_into_ball(o + x, radius)


def round_into_ball(profiles: np.ndarray, radius: float) -> np.ndarray:
    """Rates rounded to whole percents; a group pushed out of the ball of ``radius`` is pulled in first."""
    o = 1.0 / profiles.shape[2]
    r = np.round(profiles * 100.0) / 100.0
    for _ in range(20):
        outside = np.linalg.norm(r - o, axis=2) > radius + 1e-12
        if not outside.any():
            break
        r[outside] = o + np.trunc((r[outside] - o) * 97.0) / 100.0  # towards the centre, never back out
    return np.clip(r, 0.0, 1.0)


def equal_overall_partners(rng: np.random.Generator, profiles: np.ndarray, group_weights: np.ndarray,
                           radius: float) -> np.ndarray:
    """For each profile, another with the same overall rates but different gaps between groups (only the
    fairness term tells them apart); moved as far as the ball allows, at whole percents where possible."""
    o = 1.0 / profiles.shape[2]
    step = rng.standard_normal(profiles.shape)
    step -= np.einsum("gi,ngi->ni", group_weights, step)[:, None, :]  # sum_g tau^g step^g = 0 per class
    step /= np.linalg.norm(step, axis=2).max(axis=1)[:, None, None]
    # the largest t with |profile + t step - o| <= radius for every group, then a random share of it
    off = profiles - o
    b = np.einsum("ngi,ngi->ng", off, step)
    c = np.einsum("ngi,ngi->ng", off, off) - radius ** 2
    s2 = np.einsum("ngi,ngi->ng", step, step)
    t_max = np.min(np.where(s2 > 0, (-b + np.sqrt(np.maximum(b ** 2 - s2 * c, 0))) / np.maximum(s2, 1e-12), np.inf),
                   axis=1)
    t = t_max * rng.uniform(0.5, 1.0, size=len(profiles))
    return round_into_ball(profiles + t[:, None, None] * step, radius)


class AdaptiveElicitation:
    """One elicitation: ``ask`` the oracle until a stopping rule holds, then ``result``."""

    def __init__(self, oracle, n_groups: int, n_classes: int, group_weights: np.ndarray, radius: float,
                 settings: AdaptiveSettings, candidates=None):
        settings.check()
        self.oracle, self.m, self.k, self.tau = oracle, n_groups, n_classes, group_weights
        self.radius, self.settings = radius, settings
        self.prior = _Prior(n_groups, n_classes)
        self.rng = np.random.default_rng(settings.seed)
        self.theta = self.rng.standard_normal((settings.n_particles, self.prior.dim))
        self.logw = np.zeros(settings.n_particles)
        self.answers = _Answers([], [])
        self.records: list[tuple[np.ndarray, np.ndarray, object]] = []
        self.candidates = None if candidates is None else np.asarray(candidates, dtype=float)
        if self.candidates is not None and self.candidates.shape[1:] != (n_groups, n_classes):
            raise ValueError(f"candidates must have shape (n, {n_groups}, {n_classes}), got {self.candidates.shape}")
        test = np.random.default_rng([settings.seed, 7])
        r1 = whole_percent_profiles(test, 400, n_groups, n_classes, radius)
        r2 = whole_percent_profiles(test, 400, n_groups, n_classes, radius)
        r2[200:] = equal_overall_partners(test, r1[200:], self.tau, radius)  # the fairness term must be learnt too
        self._test = [cost_features(r1, self.tau), cost_features(r2, self.tau)]
        self.step_size = 0.3
        self.stopped_because = ""

    # posterior ---------------------------------------------------------------------------------------
    def _normalised(self) -> np.ndarray:
        w = np.exp(self.logw - self.logw.max())
        return w / w.sum()

    def _weights(self) -> np.ndarray:
        return self.prior.weights(self.theta)

    def estimate_weights(self) -> np.ndarray:
        w = self._normalised() @ self._weights()
        return w / (np.linalg.norm(w[:self.k]) + 0.5 * np.linalg.norm(w[self.k:].reshape(-1, self.k, self.k),
                                                                         axis=(1, 2)).sum())

    def _rejuvenate(self) -> None:
        """Resample (systematic) and move every particle by pCN steps targeting the posterior."""
        n = len(self.theta)
        positions = (self.rng.uniform() + np.arange(n)) / n
        idx = np.minimum(np.searchsorted(np.cumsum(self._normalised()), positions), n - 1)
        theta = self.theta[idx]
        loglik = self.answers.loglik(self.prior.weights(theta), self.settings)
        for _ in range(12):
            beta = self.step_size
            proposal = np.sqrt(1 - beta ** 2) * theta + beta * self.rng.standard_normal(theta.shape)
            new = self.answers.loglik(self.prior.weights(proposal), self.settings)
            accept = np.log(self.rng.uniform(size=n)) < new - loglik
            theta[accept], loglik[accept] = proposal[accept], new[accept]
            rate = accept.mean()
            self.step_size = float(np.clip(self.step_size * (1.2 if rate > 0.3 else 0.8), 0.02, 0.9))
        self.theta, self.logw = theta, np.zeros(n)

    def _update(self, f1: np.ndarray, f2: np.ndarray, outcome: int) -> None:
        self.answers.features.append((f1, f2))
        self.answers.outcomes.append(outcome)
        single = _Answers([(f1, f2)], [outcome])
        self.logw = self.logw + single.loglik(self._weights(), self.settings)
        p = self._normalised()
        if 1.0 / np.sum(p ** 2) < 0.5 * len(p):
            self._rejuvenate()

    # questions ---------------------------------------------------------------------------------------
    def _pool(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.settings.seed, 1, len(self.records)])
        n = self.settings.n_pool
        r1 = whole_percent_profiles(rng, n, self.m, self.k, self.radius)
        r2 = whole_percent_profiles(rng, n, self.m, self.k, self.radius)
        third = n // 3  # a third changes one group only (easy to read, isolates that group), a third keeps
        groups = rng.integers(self.m, size=third)  # the overall rates and moves the gaps (the fairness term)
        r2[:third] = r1[:third]
        r2[np.arange(third), groups] = whole_percent_profiles(rng, third, 1, self.k, self.radius)[:, 0]
        r2[third:2 * third] = equal_overall_partners(rng, r1[third:2 * third], self.tau, self.radius)
        if self.candidates is not None:
            i, j = np.triu_indices(len(self.candidates), 1)
            r1 = np.concatenate([r1, self.candidates[i]])
            r2 = np.concatenate([r2, self.candidates[j]])
        same = np.all(np.isclose(r1, r2), axis=(1, 2))
        return r1[~same], r2[~same]

    def _next_question(self) -> tuple[np.ndarray, np.ndarray]:
        r1, r2 = self._pool()
        f1, f2 = cost_features(r1, self.tau), cost_features(r2, self.tau)
        w, p = self._weights(), self._normalised()
        rel = relative_difference(w @ f1.T, w @ f2.T)  # (particles, pool)
        probs = answer_probabilities(rel, self.settings.resolution, self.settings.error_rate)  # (..., 3)
        predictive = np.einsum("n,nqa->qa", p, probs)
        entropy = lambda x: -(x * np.log(np.clip(x, 1e-300, None))).sum(axis=-1)  # noqa: E731
        information = entropy(predictive) - np.einsum("n,nq->q", p, entropy(probs))
        visible = p @ (np.abs(rel) >= 1.5 * self.settings.resolution) >= 0.5  # a difference the person likely sees
        if visible.any():
            information = np.where(visible, information, -np.inf)
        best = int(np.argmax(information))
        return r1[best], r2[best]

    # stopping ----------------------------------------------------------------------------------------
    def expected_agreement(self) -> float:
        """Posterior probability that the estimate orders a pair of profiles whose costs differ by at least the
        resolution (under the true metric) the right way: the smaller of random pairs and of pairs with the
        same overall rates (where only the fairness term decides)."""
        est = self.estimate_weights()
        f1, f2 = self._test
        sign = np.sign(f2 @ est - f1 @ est)
        rel = relative_difference(self._weights() @ f1.T, self._weights() @ f2.T)  # (particles, pairs)
        clear = np.abs(rel) >= self.settings.resolution
        right = (np.sign(rel) == sign) & clear
        half = rel.shape[1] // 2  # random pairs, then pairs that differ only in their gaps: the worse of the two
        return min(float(self._normalised() @ (right[:, part].sum(axis=1) / np.maximum(clear[:, part].sum(axis=1), 1)))
                   for part in (slice(0, half), slice(half, None)))

    def candidate_order_settled(self) -> float:
        """Smallest posterior probability, over pairs of candidates, that the estimate's order of the pair is
        right or the two differ by less than the resolution."""
        f = cost_features(self.candidates, self.tau)
        est_cost = f @ self.estimate_weights()
        costs = self._weights() @ f.T  # (particles, candidates)
        i, j = np.triu_indices(len(f), 1)
        if i.size == 0:
            return 1.0
        rel = relative_difference(costs[:, i], costs[:, j])
        est_sign = np.sign(est_cost[j] - est_cost[i])
        fine = (np.sign(rel) == est_sign) | (np.abs(rel) < self.settings.resolution)
        return float((self._normalised() @ fine).min())

    def _done(self) -> bool:
        s = self.settings
        if len(self.records) >= s.max_answers:
            self.stopped_because = f"the limit of {s.max_answers} answers"
            return True
        if len(self.records) < s.min_answers:
            return False
        if self.candidates is not None:
            if self.candidate_order_settled() >= s.target_agreement:
                self.stopped_because = "the answers settle the order of the candidates"
                return True
            return False
        if self.expected_agreement() >= s.target_agreement:
            self.stopped_because = f"the metric is resolved to {s.resolution:.0%} cost differences"
            return True
        return False

    # driver ------------------------------------------------------------------------------------------
    def run(self) -> FairQuadraticMetric:
        while not self._done():
            r1, r2 = self._next_question()
            answer = self.oracle(r1.copy(), r2.copy())
            outcome = answer_index(answer)
            self.records.append((r1, r2, answer))
            self._update(cost_features(r1[None], self.tau)[0], cost_features(r2[None], self.tau)[0], outcome)
        return self.result()

    def result(self) -> FairQuadraticMetric:
        p, w = self._normalised(), self._weights()
        lam = 1.0 - np.linalg.norm(w[:, :self.k], axis=1)
        order = np.argsort(lam)
        cdf = np.cumsum(p[order])
        interval = tuple(float(lam[order][min(np.searchsorted(cdf, q), len(lam) - 1)]) for q in (0.025, 0.975))
        outcomes = np.array(self.answers.outcomes)
        diagnostics = {
            "method": "adaptive",
            "cycles": [],
            "stopped_because": self.stopped_because,
            "expected_agreement": self.expected_agreement(),
            "n_about_same": int((outcomes == 2).sum()) if outcomes.size else 0,
            "n_unexpected_answers": self._n_unexpected(),
            "records": list(self.records),
            "tolerance_band": {"n_draws": len(p), "lam_interval": interval, "kind": "posterior"},
            "resolution": self.settings.resolution,
        }
        if self.candidates is not None:
            diagnostics["candidate_order_settled"] = self.candidate_order_settled()
        return metric_from_weights(self.estimate_weights(), self.m, self.k, self.tau,
                                   n_queries=len(self.records), diagnostics=diagnostics)

    def _n_unexpected(self) -> int:
        """Answers the estimate finds clearly wrong (a slip, or a sign the metric form cannot express)."""
        est = self.estimate_weights()
        n = 0
        for (f1, f2), outcome in zip(self.answers.features, self.answers.outcomes):
            rel = float(relative_difference(f1 @ est, f2 @ est))
            if outcome < 2 and abs(rel) >= self.settings.resolution and (rel > 0) != (outcome == 0):
                n += 1
        return n
