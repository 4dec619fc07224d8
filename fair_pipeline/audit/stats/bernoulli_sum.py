"""The distribution of a weighted sum Σ_c s_c b_c of independent Bernoulli(π) decisions, on a fine grid by FFT.

When the weights are whole multiples of a common unit (shares of integer counts: one count's share) the grid's step
is that unit, every weight sits on it exactly and the result is exact (up to floating error and the window below):
at a grid point P(S < x) + ½ P(S = x), between grid points P(S <= x). Otherwise each weight is split between its two
neighbouring grid points of GRID over the sum's range with the mean kept (s = (j + f) δ goes to j δ with
probability 1 − f and to (j + 1) δ with probability f) and the mid-distribution is read linearly between grid
points (which gives a split atom exactly half its mass at its own position). The sum's characteristic function is
the product of the weights' factors 1 − π + π (…), over distinct weights with their multiplicities, and one inverse
FFT gives every grid point's probability at once. The FFT spans a window of S's range that holds all but
WINDOW_TAIL of its mass on each side at that π (Bernstein's inequality), or the whole range when that is not
longer; a DFT of the window's length gives P(S ≡ j mod length), which is P(S = j) on the window.

Why the window: with thousands of items of a few rows each, a grid of GRID points over the whole range has a step
larger than most items' shares, and splitting such a share adds π f (1 − f) δ² to each item's variance π (1 − π) s²:
two to four times the sum's variance (7,000 items of ~5 rows: an interval twice as wide as the binomial's). The
window spans a few standard deviations of S, so the step stays one count however many items there are.
Why not a binomial of the weights' effective size (Σ s)² / Σ s² or a normal: with a rare decision (π near 0 or 1)
and heavy-tailed weights the sum is a handful of jumps of very unequal size, far more skewed than a binomial with
the same two moments; the tails decide a confidence interval's limits, and a two-moment match moved them.
Pure numpy.
"""
from __future__ import annotations

import numpy as np

GRID = 4096  # grid points over the sum's range when the weights have no common unit
_EDGE = 1e-9  # in grid steps: how far outside the range still counts as its end (floating error in x)
WINDOW_TAIL = 1e-13  # mass a window may leave out on each side (`BernoulliSum._window`)

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
        self.exact = unit > 0  # on the lattice of that unit every weight sits exactly, whatever the range
        self.step = unit if self.exact else total / max(grid // 2, grid - 1 - w.size)  # room to split
        position = w / self.step
        if self.exact:  # whole multiples of the step: nothing to split
            low, frac = np.rint(position), np.zeros_like(position)
        else:
            low = np.floor(position + _EDGE)
            frac = np.clip(position - low, 0.0, 1.0)
            frac[frac < _EDGE] = 0.0
        keys, counts = np.unique(np.column_stack([low, np.round(frac, 12)]), axis=0, return_counts=True)
        self.count = counts.astype(np.float64)
        self._keys = keys
        self.top = total / self.step
        # each weight's jump on the grid: low, or low + 1 with probability frac (mean kept): its moments per decision
        self._jump_mean = keys[:, 0] + keys[:, 1]
        self._jump_square = keys[:, 0] ** 2 * (1.0 - keys[:, 1]) + (keys[:, 0] + 1.0) ** 2 * keys[:, 1]
        self._largest = float(np.max(keys[:, 0] + (keys[:, 1] > 0)))
        reach = float(self.count @ (keys[:, 0] + (keys[:, 1] > 0)))  # the grid's sum when every decision is 1
        self.size = int(2 ** np.ceil(np.log2(reach + 1.0)))  # the whole range: no wrap-around
        self._phases: dict = {}

    def _placed(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Each distinct weight's characteristic-function factor at the ``length``-point DFT's frequencies, as
        (real, imaginary) parts (distinct weights, frequencies); it does not depend on π."""
        if length not in self._phases:
            angle = 2.0 * np.pi * np.arange(length // 2 + 1) / length
            keys = self._keys
            placed = np.exp(-1j * angle[None, :] * keys[:, :1]) * ((1.0 - keys[:, 1:]) + keys[:, 1:] * np.exp(-1j * angle))
            self._phases[length] = (placed.real.copy(), placed.imag.copy())
        return self._phases[length]

    def _window(self, rate: float) -> tuple[int, int]:
        """(first grid point, number of points) holding all but WINDOW_TAIL of S's mass on each side under ``rate``
        (Bernstein's inequality for a sum of independent jumps of at most the largest weight), as a power of 2; the
        whole range when that is not shorter. A window spans a few standard deviations of S, so the grid's unit can
        stay one count however many items there are."""
        pi = float(rate)
        mean = pi * float(self.count @ self._jump_mean)
        variance = float(self.count @ (pi * self._jump_square - pi ** 2 * self._jump_mean ** 2))
        log_tail = np.log(2.0 / WINDOW_TAIL)
        linear = self._largest * log_tail / 3.0
        reach = linear + np.sqrt(linear ** 2 + 2.0 * max(variance, 0.0) * log_tail)
        first = max(0, int(np.floor(mean - reach)))
        length = int(2 ** np.ceil(np.log2(int(np.ceil(mean + reach)) - first + 2.0)))
        return (0, self.size) if length >= self.size else (first, length)

    def _window_probabilities(self, rate: float) -> tuple[int, np.ndarray]:
        """(first grid point j0, P(S = (j0 + i) δ) for i < the window's length): the DFT of that length gives
        P(S ≡ j mod length) exactly, which is P(S = j) on the window up to the mass left outside it."""
        pi = float(rate)
        first, length = self._window(pi)
        placed_real, placed_imag = self._placed(length)
        real, imag = (1.0 - pi) + pi * placed_real, pi * placed_imag  # each weight's factor; its log in real arithmetic
        with np.errstate(divide="ignore"):
            phi = np.exp(0.5 * (self.count @ np.log(real * real + imag * imag)) + 1j * (self.count @ np.arctan2(imag, real)))
        folded = np.clip(np.fft.irfft(phi, n=length), 0.0, None)
        return first, np.roll(folded, -(first % length))

    def probabilities(self, rate: float) -> np.ndarray:
        """P(S = j δ) for every grid point j of the whole range."""
        first, prob = self._window_probabilities(rate)
        out = np.zeros(self.size)
        out[first:first + prob.size] = prob[: self.size - first]
        return out

    def mid_cdf(self, x, rate: float) -> np.ndarray:
        """P(S < x) + ½ P(S = x) at each of ``x`` (an array) under Bernoulli(``rate``) decisions, 0 < rate < 1."""
        first, prob = self._window_probabilities(rate)
        mid = np.cumsum(prob) - 0.5 * prob
        y = np.asarray(x, dtype=np.float64) / self.step
        local = y - first
        last = prob.size - 1
        if self.exact:  # mid at a grid point, else P(S <= the grid point below)
            nearest = np.clip(np.rint(local), 0, last).astype(np.int64)
            below = np.clip(np.floor(local), 0, last).astype(np.int64)
            inside = np.where(np.abs(local - nearest) <= 1e-6, mid[nearest], np.cumsum(prob)[below])
        else:
            inside = np.interp(local, np.arange(prob.size), mid)
        inside = np.where(local < -_EDGE, 0.0, np.where(local > last + _EDGE, 1.0, inside))  # beyond the window
        return np.where(y < -_EDGE, 0.0, np.where(y > self.top + _EDGE, 1.0, inside))
