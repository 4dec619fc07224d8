"""Linear Performance Metric Elicitation (LPME, paper appendix A, Algorithm 2).

Finds the direction u (unit vector) of the point centre + radius * u that the oracle likes best on
the boundary of a small sphere.  For a linear metric <g, s> that direction is g / |g| (Lemma 1); for
a smooth metric it is the direction of the gradient at the found boundary point (first-order
optimality on the sphere), which QPME exploits.

The search is coordinate-wise over the hyperspherical angles: k queries fix the orthant (sign of each
coordinate), then each angle is bisected with ShrinkInterval (at most three queries per halving).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fair_pipeline.selection.elicitation.sphere import angle_ranges_for_signs, direction_from_angles

Compare = Callable[[np.ndarray, np.ndarray], bool]  # compare(s1, s2) -> True iff s1 preferred


@dataclass(frozen=True)
class LinearEstimate:
    center: np.ndarray
    radius: float
    angles: np.ndarray  # hyperspherical angles of the estimated direction (interval midpoints)
    widths: np.ndarray  # width of each angle's final bisection interval (the truth lies inside)

    @property
    def direction(self) -> np.ndarray:
        """Unit vector; the estimated slope of the local linear metric."""
        return direction_from_angles(self.angles)

    @property
    def boundary_point(self) -> np.ndarray:
        return self.center + self.radius * self.direction

    def perturbed(self, rng: np.random.Generator) -> "LinearEstimate":
        """A direction drawn uniformly from the final bisection intervals (for tolerance bands)."""
        jitter = rng.uniform(-0.5, 0.5, size=self.angles.size) * self.widths
        return LinearEstimate(self.center, self.radius, self.angles + jitter, self.widths)


def default_cycles(n_classes: int) -> int:
    """Paper: 3 cycles over the k-1 angles.  With k = 2 there is a single angle, and repeating its
    bisection would only re-ask questions whose answers are already known, so one cycle suffices."""
    return 1 if n_classes == 2 else 3


def lpme(compare: Compare, center, radius: float, tolerance: float, n_cycles: int | None = None) -> LinearEstimate:
    """Elicit the locally preferred direction on the sphere of ``radius`` around ``center``."""
    center = np.asarray(center, dtype=float)
    k = center.size
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance!r}")
    n_cycles = default_cycles(k) if n_cycles is None else n_cycles

    # Orthant: compare the two boundary points that differ only in the sign of coordinate i.
    signs = np.empty(k, dtype=int)
    base = np.full(k, 1.0 / np.sqrt(k))
    for i in range(k):
        flipped = base.copy()
        flipped[i] = -flipped[i]
        signs[i] = 1 if compare(center + radius * base, center + radius * flipped) else -1

    ranges = angle_ranges_for_signs(signs)
    theta = ranges.mean(axis=1)
    widths = ranges[:, 1] - ranges[:, 0]

    def point(angle_j: float, j: int) -> np.ndarray:
        th = theta.copy()
        th[j] = angle_j
        return center + radius * direction_from_angles(th)

    for t in range(n_cycles * (k - 1)):
        j = t % (k - 1)
        lo, hi = _bisect(compare, point, j, *ranges[j], tolerance)
        edge = _touched_edge(ranges[j], lo, hi, primary=(j == k - 2))
        if edge is not None:
            # The orthant queries compare two mirrored boundary points, so curvature can misjudge the
            # sign of a near-zero coordinate; the optimum then sits just across this edge.
            ranges[j] = (edge - np.pi / 4, edge + np.pi / 4)
            lo, hi = _bisect(compare, point, j, *ranges[j], tolerance)
        theta[j], widths[j] = 0.5 * (lo + hi), hi - lo
    return LinearEstimate(center=center, radius=float(radius), angles=theta, widths=widths)


def _bisect(compare: Compare, point, j: int, lo: float, hi: float, tolerance: float) -> tuple[float, float]:
    while hi - lo > tolerance:
        lo, hi = _shrink_interval(compare, point, j, lo, hi)
    return lo, hi


def _touched_edge(search_range, lo: float, hi: float, primary: bool) -> float | None:
    """The range end the bisection never moved away from, unless it is a pole (0 or pi) of a
    non-primary angle, where the direction does not depend on the later angles."""
    start, end = search_range
    for edge, untouched in ((start, lo == start), (end, hi == end)):
        if untouched and (primary or 0.0 < edge < np.pi):
            return edge
    return None


def _shrink_interval(compare: Compare, point, j: int, lo: float, hi: float) -> tuple[float, float]:
    """Halve [lo, hi] around the maximiser of a unimodal function with at most three comparisons.

    (The printed subroutine's last branch keeps [c, b]; [d, b] is what f(d) <= f(e) implies and
    halves the interval like the other branches.)
    """
    c, d, e = 0.75 * lo + 0.25 * hi, 0.5 * (lo + hi), 0.25 * lo + 0.75 * hi
    if compare(point(lo, j), point(c, j)):
        return lo, d
    if compare(point(c, j), point(d, j)):
        return lo, d
    if compare(point(d, j), point(e, j)):
        return c, e
    return d, hi
