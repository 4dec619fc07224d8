"""The distribution of a weighted sum Σ_c s_c b_c of independent Bernoulli(π) decisions, on a fine grid by FFT.

When the weights are whole multiples of a common unit (shares of integer counts: one count's share) and the sum's
range fits GRID points of that unit, the grid holds every weight exactly and the result is exact
(up to floating error): at a grid point P(S < x) + ½ P(S = x), between grid points P(S <= x). Otherwise each weight
is split between its two neighbouring grid points with the mean kept (s = (j + f) δ goes to j δ with probability
1 − f and to (j + 1) δ with probability f) and the mid-distribution is read linearly between grid points (which
gives a split atom exactly half its mass at its own position). The sum's characteristic function is the product
of the weights' factors 1 − π + π (…), over distinct weights with their multiplicities, and one inverse FFT gives
every grid point's probability at once (the FFT is as long as the grid's whole range: no wrap-around).

Why not a binomial of the weights' effective size (Σ s)² / Σ s² or a normal: with a rare decision (π near 0 or 1)
and heavy-tailed weights the sum is a handful of jumps of very unequal size, far more skewed than a binomial with
the same two moments; the tails decide a confidence interval's limits, and a two-moment match moved them.
Pure numpy.
"""
from __future__ import annotations

import numpy as np

GRID = 4096  # grid points over the sum's range when the weights are not multiples of a coarser step
_EDGE = 1e-9  # in grid steps: how far outside the range still counts as its end (floating error in x)

_DIVISORS = 64  # a common unit is looked for among the smallest weight / 1, 2, ..., _DIVISORS


def _common_unit(weights: np.ndarray) -> float:
    """The largest u = min(weights) / d (d <= _DIVISORS) of which every weight is a whole multiple (shares of integer
    counts: one count's share), or 0 where there is none."""
    distinct = np.unique(weights)
    for d in range(1, _DIVISORS + 1):
        unit = distinct[0] / d
        ratio = distinct / unit
        if np.all(np.abs(ratio - np.rint(ratio)) <= 1e-7 * np.maximum(ratio, 1.0)):
            return float(unit)
    return 0.0


class BernoulliSum:
    """S = Σ_c weights_c b_c, b_c independent Bernoulli(π), its mid-distribution function at any π."""

    def __init__(self, weights, grid: int = GRID):
        w = np.asarray(weights, dtype=np.float64)
        w = w[w > 0]
        if w.size == 0:
            raise ValueError("a Bernoulli sum needs at least one positive weight")
        total = float(w.sum())
        unit = _common_unit(w)
        self.exact = unit > 0 and total / unit <= grid - 1
        self.step = unit if self.exact else total / max(grid // 2, grid - 1 - w.size)  # room to split
        position = w / self.step
        low = np.floor(position + _EDGE)
        frac = np.clip(position - low, 0.0, 1.0)
        frac[frac < _EDGE] = 0.0
        keys, counts = np.unique(np.column_stack([low, np.round(frac, 12)]), axis=0, return_counts=True)
        self.count = counts.astype(np.float64)
        self.top = total / self.step
        reach = float(self.count @ (keys[:, 0] + (keys[:, 1] > 0)))  # the grid's sum when every decision is 1
        self.size = int(2 ** np.ceil(np.log2(reach + 1.0)))  # no wrap-around
        angle = 2.0 * np.pi * np.arange(self.size // 2 + 1) / self.size
        placed = np.exp(-1j * angle[None, :] * keys[:, :1]) * ((1.0 - keys[:, 1:]) + keys[:, 1:] * np.exp(-1j * angle))
        self._real, self._imag = placed.real.copy(), placed.imag.copy()  # (distinct weights, frequencies)

    def probabilities(self, rate: float) -> np.ndarray:
        """P(S = j δ) for every grid point j."""
        pi = float(rate)
        real, imag = (1.0 - pi) + pi * self._real, pi * self._imag  # each weight's factor; its log in real arithmetic
        with np.errstate(divide="ignore"):
            phi = np.exp(0.5 * (self.count @ np.log(real * real + imag * imag)) + 1j * (self.count @ np.arctan2(imag, real)))
        return np.clip(np.fft.irfft(phi, n=self.size), 0.0, None)

    def mid_cdf(self, x, rate: float) -> np.ndarray:
        """P(S < x) + ½ P(S = x) at each of ``x`` (an array) under Bernoulli(``rate``) decisions, 0 < rate < 1."""
        prob = self.probabilities(rate)
        mid = np.cumsum(prob) - 0.5 * prob
        y = np.asarray(x, dtype=np.float64) / self.step
        if self.exact:  # mid at a grid point, else P(S <= the grid point below)
            nearest = np.clip(np.rint(y), 0, self.size - 1).astype(np.int64)
            below = np.clip(np.floor(y), 0, self.size - 1).astype(np.int64)
            inside = np.where(np.abs(y - nearest) <= 1e-6, mid[nearest], np.cumsum(prob)[below])
        else:
            inside = np.interp(y, np.arange(self.size), mid)
        return np.where(y < -_EDGE, 0.0, np.where(y > self.top + _EDGE, 1.0, inside))
