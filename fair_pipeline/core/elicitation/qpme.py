"""Quadratic Performance Metric Elicitation (QPME, paper Algorithm 1 and appendix C).

The oracle's utility on a k-dimensional query sphere around ``o`` is taken to be
    psi(s) = <d, s - o> + 1/2 (s - o)^T B (s - o)         (paper eq. 4; B symmetric)
known only up to a positive scale.  LPME runs on k + 2 small spheres of radius varrho centred at
o, z_j = o + (rho - varrho) e_j (j = 1..k) and o - (rho - varrho) e_1.  Each run returns a unit
direction f_l and a boundary point p_l = centre_l + varrho f_l, and first-order optimality on the
sphere says the gradient there is parallel to f_l:

    d + B (p_l - o) = c_l f_l          for an unknown scalar c_l (one per run).

Stacking all runs gives a homogeneous linear system in (d, vech(B), c_1..c_{k+2}) whose null vector
is the metric up to scale; we fix c_0 = 1 and take the minimum-norm least-squares solution (exact
for k = 2, least squares for k > 2).  The paper's closed form (eq. 9) solves the same equations by
pivoting on coordinate 1 with the anchors p_l replaced by the sphere centres (first-order Taylor
approximation); ``anchor="center"`` reproduces that approximation, ``anchor="boundary"`` (default)
removes its O(varrho) bias at no extra query cost.

The paper mirrors only z_1 (eq. 8), which leaves the system singular when B e_1 happens to be
parallel to d (eq. 17 divides by the difference of the slopes at z_1 and -z_1).  By default we also
mirror every z_j (``mirrored="all"``, k - 1 more LPME runs), making the system over-determined.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lpme import Compare, LinearEstimate, lpme


@dataclass(frozen=True)
class QuadraticEstimate:
    """(d, B) of psi up to one positive scale factor, and the LPME runs behind them."""

    d: np.ndarray
    B: np.ndarray
    runs: tuple[LinearEstimate, ...]
    singular_values: np.ndarray  # of the stacked system; a large smallest value means noisy answers


def qpme_centers(origin, radius: float, inner_radius: float, mirrored: str = "all") -> np.ndarray:
    """Centres of the LPME spheres: o, o + delta e_1..e_k and the mirrored o - delta e_1 (paper,
    ``mirrored="first"``, k + 2 spheres) or o - delta e_j for every j (``"all"``, 2k + 1 spheres);
    delta = rho - varrho."""
    origin = np.asarray(origin, dtype=float)
    k = origin.size
    if not 0 < inner_radius < radius:
        raise ValueError(f"need 0 < inner_radius < radius, got inner_radius={inner_radius!r}, radius={radius!r}")
    if mirrored not in ("first", "all"):
        raise ValueError(f"mirrored must be 'first' or 'all', got {mirrored!r}")
    delta = radius - inner_radius
    minus = np.eye(k)[:1] if mirrored == "first" else np.eye(k)
    return np.vstack([origin, origin + delta * np.eye(k), origin - delta * minus])


def qpme(
    compare: Compare,
    origin,
    radius: float,
    inner_radius: float,
    tolerance: float,
    *,
    anchor: str = "boundary",
    mirrored: str = "all",
    n_cycles: int | None = None,
) -> QuadraticEstimate:
    """Run Algorithm 1's LPME calls and solve for (d, B) up to a positive scale."""
    if anchor not in ("boundary", "center"):
        raise ValueError(f"anchor must be 'boundary' or 'center', got {anchor!r}")
    origin = np.asarray(origin, dtype=float)
    runs = tuple(
        lpme(compare, c, inner_radius, tolerance, n_cycles) for c in qpme_centers(origin, radius, inner_radius, mirrored)
    )
    anchors = np.array([r.boundary_point if anchor == "boundary" else r.center for r in runs])
    directions = np.array([r.direction for r in runs])
    d, B, sv = solve_gradient_system(anchors - origin, directions)
    return QuadraticEstimate(d=d, B=B, runs=runs, singular_values=sv)


def _vech_index(k: int) -> dict[tuple[int, int], int]:
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    return {**{p: n for n, p in enumerate(pairs)}, **{(j, i): n for n, (i, j) in enumerate(pairs)}}


def solve_gradient_system(offsets: np.ndarray, directions: np.ndarray,
                          rcond: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve d + B u_l = c_l f_l (all l) for (d, symmetric B) up to a positive scale.

    offsets: (L, k) anchor points minus o;  directions: (L, k) unit gradient directions; row 0 must
    be the run centred at o.  The scale is fixed by c_0 = 1 (the gradient at o points along f_0,
    which Assumption 4 makes non-zero) and the remaining unknowns are the minimum-norm least-squares
    solution: when lam is ~0 every gradient is parallel and B is only determined up to multiples of
    f_0 f_0^T (they do not change any preference), and minimum norm picks the smallest such B.
    Returns d, B and the singular values of the system.
    """
    L, k = offsets.shape
    vech = _vech_index(k)
    n_b = k * (k + 1) // 2
    A = np.zeros((L * k, k + n_b + L))
    for l in range(L):
        for i in range(k):
            row = l * k + i
            A[row, i] = 1.0
            for j in range(k):
                A[row, k + vech[(i, j)]] += offsets[l, j]
            A[row, k + n_b + l] = -directions[l, i]
    c0 = k + n_b
    rhs = -A[:, c0]  # move c_0 = 1 to the right-hand side
    reduced = np.delete(A, c0, axis=1)
    y, *_ = np.linalg.lstsq(reduced, rhs, rcond=rcond)
    sv = np.linalg.svd(A, compute_uv=False)
    d = y[:k]
    B = np.empty((k, k))
    for (i, j), n in vech.items():
        B[i, j] = y[k + n]
    return d, B, sv
