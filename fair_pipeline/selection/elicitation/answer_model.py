"""How a person answers "A, B or about the same?" about two rate profiles, given a metric.

A metric's cost has no unit (Definition 4 fixes it only up to the normalisation), so what a person
can see is a *relative* cost difference |c_A - c_B| / max(c_A, c_B).  Below a resolution (a few
percent) they call the two "about the same"; above it they pick the cheaper one, except for a small
share of slips.  This module holds that answer model as likelihoods for the adaptive elicitation,
the features that make a Definition-4 cost linear in its parameters, and a scripted answerer that
follows a hidden metric (for tests and benchmarks).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric, group_pairs

ABOUT_THE_SAME = None  # what an oracle returns for "about the same" (True: r1 preferred, False: r2 preferred)

# Answer model: a difference above the resolution is seen (logistic edge, width a quarter of the
# resolution).  Seen: right side, wrong side with the error rate, "same" with half of it.  Not seen:
# "same" half of the time, either side otherwise (people who must pick, or a yes/no oracle, guess).
_UNSEEN_SAME = 0.5


def relative_difference(c1, c2):
    """Signed (c2 - c1) / max(c1, c2): positive when the first profile is cheaper (preferred)."""
    c1, c2 = np.asarray(c1, dtype=float), np.asarray(c2, dtype=float)
    return (c2 - c1) / np.maximum(np.maximum(c1, c2), 1e-12)


def cost_features(rates: np.ndarray, group_weights: np.ndarray) -> np.ndarray:
    """phi(r) with cost = <w, phi(r)> for w = ((1 - lam) a, lam vec B^{uv} per group pair):
    (1 - overall rates, 1/2 vec (r^u - r^v)(r^u - r^v)^T per pair).  rates: (n, m, k) -> (n, D)."""
    r = np.asarray(rates, dtype=float)
    overall = np.einsum("gi,ngi->ni", group_weights, r)
    parts = [1.0 - overall]
    for u, v in group_pairs(r.shape[1]):
        diff = r[:, u] - r[:, v]
        parts.append(0.5 * np.einsum("ni,nj->nij", diff, diff).reshape(r.shape[0], -1))
    return np.concatenate(parts, axis=1)


def answer_probabilities(rel: np.ndarray, resolution: float, error_rate: float) -> np.ndarray:
    """P(answer) for signed relative differences ``rel`` (any shape): (..., 3) for (r1, r2, same)."""
    seen = 1.0 / (1.0 + np.exp(-(np.abs(rel) - resolution) / (0.25 * resolution)))
    right, wrong, same = 1.0 - 1.5 * error_rate, error_rate, 0.5 * error_rate
    first = np.where(rel > 0, right, wrong)
    second = np.where(rel > 0, wrong, right)
    unseen_side = 0.5 * (1.0 - _UNSEEN_SAME)
    return np.stack([seen * first + (1 - seen) * unseen_side,
                     seen * second + (1 - seen) * unseen_side,
                     seen * same + (1 - seen) * _UNSEEN_SAME], axis=-1)


def answer_index(answer) -> int:
    """0: r1 preferred, 1: r2 preferred, 2: about the same; a yes/no oracle never gives 2."""
    if answer is ABOUT_THE_SAME:
        return 2
    if isinstance(answer, (bool, np.bool_)):
        return 0 if answer else 1
    raise TypeError(f"oracle must return True (r1 preferred), False (r2 preferred) or None (about the same), "
                    f"got {type(answer).__name__}: {answer!r}")


class ScriptedAnswerer:
    """Answers like a person who follows a hidden ``metric``: "about the same" (None) when the relative cost
    difference is below ``resolution``, otherwise the cheaper profile, flipped with probability ``error_rate``.
    ``can_say_same=False`` gives a yes/no oracle that guesses (fair coin) when it sees no difference."""

    label = "scripted"

    def __init__(self, metric: FairQuadraticMetric, resolution: float = 0.02, error_rate: float = 0.05,
                 seed=None, can_say_same: bool = True):
        if not 0.0 <= error_rate < 0.5:
            raise ValueError(f"error_rate must be in [0, 0.5), got {error_rate!r}")
        self.metric, self.resolution, self.error_rate = metric, float(resolution), float(error_rate)
        self.can_say_same = can_say_same
        self._rng = np.random.default_rng(seed)
        self.n_calls = self.n_wrong = self.n_same = 0

    def __call__(self, r1, r2):
        self.n_calls += 1
        rel = float(relative_difference(self.metric(r1), self.metric(r2)))
        if abs(rel) < self.resolution:
            self.n_same += 1
            return ABOUT_THE_SAME if self.can_say_same else bool(self._rng.random() < 0.5)
        if self._rng.random() < self.error_rate:
            self.n_wrong += 1
            return not rel > 0
        return rel > 0
