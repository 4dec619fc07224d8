"""Confidence interval for a rate whose clusters decide all-or-nothing: a binomial count with unequal item sizes.

A deterministic rule decides once per item, so in a cell (a group's positives, say) every cluster's rows share one
decision b_c in {0, 1} and the rate is A = Σ_c s_c b_c, s_c the cluster's share of the cell's rows. Read the b_c as
independent Bernoulli(π) whatever the item's size (the exchangeable-items model of `audit.stats.exchangeable`:
which items a rule accepts does not depend on how often they are shown). Given the sizes, A is then unbiased for π
with variance π(1 − π) Σ s_c², and its whole distribution is known up to π: the interval is the set of π at which
the observed A is not in either 2.5% tail of that distribution (a test inverted, as Clopper-Pearson's), with the
mid-p convention at atoms. The distribution is exact over the `HEAD` largest items (2^HEAD outcomes) and the rest
is the grid distribution of `audit.stats.bernoulli_sum` (exact for shares of integer counts; otherwise each share
split between two grid points, mean kept). The rest is not a binomial of its effective size (Σ s)² / Σ s²: with a
rare decision its sum is a few jumps of unequal size, more skewed than two matched moments allow; that
approximation's upper limits were too high (the truth above the interval 0.4-1% of the time instead of 2.5%).

Why not a Wald interval: under heavy-tailed popularity A is a sum of a few large jumps. The sandwich variance of
the draw errs with the draw's luck (a sample whose popular items all fell on the common decision has a small error
to one side and a small SE: CR2 missed one-sidedly), while the variance given the sizes is right but the
distribution is far from normal (a dominant item in or out): a symmetric interval with it covered 0.98-0.996.
Inverting the distribution itself covers 0.94-0.96 with both tails near 2.5% (docs/audit_inference.md).
With equal clusters it is the mid-p binomial interval.
A difference of two such rates on disjoint clusters combines the two intervals by MOVER (Newcombe 1998; Zou &
Donner 2008). Pure numpy / scipy.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from fair_pipeline.audit.stats.bernoulli_sum import BernoulliSum

HEAD = 8  # items whose 2^HEAD joint outcomes are enumerated exactly (the rest on the grid)
_EDGE = 1e-12


def _head_outcomes(head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of the head's shares, number of accepted head items) for each of its 2^m outcomes."""
    m = head.size
    bits = (np.arange(2 ** m)[:, None] >> np.arange(m)[None, :]) & 1
    return bits @ head, bits.sum(axis=1)


class WeightedBinomial:
    """The distribution of Σ_c s_c b_c, b_c independent Bernoulli(π), for fixed ``shares`` s_c (summing to 1)."""

    def __init__(self, shares, head: int = HEAD):
        s = np.sort(np.asarray(shares, dtype=np.float64))[::-1]
        s = s[s > 0]
        if s.size == 0:
            raise ValueError("a weighted binomial needs at least one cluster of positive share")
        m = min(head, s.size)
        self.sums, self.accepted = _head_outcomes(s[:m])
        self.m = m
        rest = s[m:]
        self.rest = float(rest.sum())
        self.rest_sum = BernoulliSum(rest) if rest.size else None
        self._seen: dict = {}

    def mid_cdf(self, x: float, rate: float) -> float:
        """P(S < x) + ½ P(S = x) under Bernoulli(``rate``) decisions."""
        key = (float(x), float(rate))
        if key not in self._seen:  # an interval's inversions at several levels revisit the same points
            self._seen[key] = self._mid_cdf(*key)
        return self._seen[key]

    def _mid_cdf(self, x: float, rate: float) -> float:
        pi = float(np.clip(rate, 0.0, 1.0))
        k = self.accepted
        with np.errstate(divide="ignore"):
            log_p = np.where(k > 0, k * np.log(pi), 0.0) + np.where(self.m - k > 0, (self.m - k) * np.log1p(-pi), 0.0)
        prob = np.exp(log_p)
        gap = x - self.sums
        if self.rest_sum is not None and 0 < pi < 1:
            inner = self.rest_sum.mid_cdf(gap, pi)
        else:  # no rest, or a degenerate rate: the rest sits at its mean
            gap = gap - pi * self.rest
            inner = np.where(gap > _EDGE, 1.0, np.where(gap < -_EDGE, 0.0, 0.5))
        return float(prob @ inner)

    def interval(self, estimate: float, confidence: float = 0.95) -> tuple[float, float]:
        """(low, high) for π from A = Σ s_c b_c = ``estimate`` (module doc): the π at which A's mid-p upper tail,
        respectively lower tail, is (1 - confidence) / 2; 0 and 1 bound an estimate of 0 or 1."""
        tail = (1.0 - confidence) / 2.0
        x = float(estimate)

        def solve(target: float) -> float:
            return brentq(lambda pi: self.mid_cdf(x, pi) - target, _EDGE, 1.0 - _EDGE, xtol=1e-10)

        low = 0.0 if x <= _EDGE or self.mid_cdf(x, _EDGE) <= 1.0 - tail else solve(1.0 - tail)
        high = 1.0 if x >= 1.0 - _EDGE or self.mid_cdf(x, 1.0 - _EDGE) >= tail else solve(tail)
        return float(low), float(high)


def weighted_binomial_interval(shares, estimate: float, confidence: float = 0.95,
                               head: int = HEAD) -> tuple[float, float]:
    """`WeightedBinomial.interval` of the distribution of these ``shares``."""
    return WeightedBinomial(shares, head).interval(estimate, confidence)


def mover_difference(estimate_a: float, interval_a, estimate_b: float, interval_b) -> tuple[float, float]:
    """(low, high) for A - B from independent intervals of A and B (MOVER: each side's distance to its limit
    combined in quadrature, the limits that move the difference that way)."""
    (la, ha), (lb, hb) = interval_a, interval_b
    d = estimate_a - estimate_b
    return (float(d - np.hypot(estimate_a - la, hb - estimate_b)),
            float(d + np.hypot(ha - estimate_a, estimate_b - lb)))
