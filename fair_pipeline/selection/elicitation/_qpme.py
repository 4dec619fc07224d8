"""Quadratic Performance Metric Elicitation (QPME, paper Algorithm 1 and appendix C).

The oracle's utility on a k-dimensional query sphere around ``o`` is taken to be
    psi(s) = <d, s - o> + 1/2 (s - o)^T B (s - o)         (paper eq. 4; B symmetric)
known only up to a positive scale.  LPME runs on k + 2 small spheres of radius varrho centred at
o, z_j = o + (rho - varrho) e_j (j = 1..k) and o - (rho - varrho) e_1.  Each run returns a unit
direction f_l and a boundary point p_l = centre_l + varrho f_l, and first-order optimality on the
sphere says the gradient there is parallel to f_l:

    d + B (p_l - o) = c_l f_l          for an unknown scalar c_l (one per run).

Stacking all runs gives a homogeneous linear system in (d, vech(B), c_1..c_{k+2}) whose null vector
is the metric up to scale: the right singular vector of the smallest singular value (exact for
k = 2 with the paper's k + 2 spheres, least squares otherwise), or, if several directions are
undetermined at the bisection tolerance, the least curved metric among them.  The paper's closed form (eq. 9) solves the same equations by
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
import scipy.linalg

from fair_pipeline.selection.elicitation._lpme import Compare, LinearEstimate, lpme


@dataclass(frozen=True)
class QuadraticEstimate:
    """(d, B) of psi up to one positive scale factor, and the LPME runs behind them."""

    d: np.ndarray
    B: np.ndarray
    runs: tuple[LinearEstimate, ...]
    singular_values: np.ndarray  # of the stacked system; a large smallest value means noisy answers

    def fits_a_quadratic(self, tolerance: float) -> bool:
        """Whether one quadratic explains every LPME direction to within the bisection tolerance:
        the system's smallest singular value is below the null threshold used to solve it.  A wrong
        answer moves a direction by far more than the tolerance (unless it came late in a bisection,
        where it costs little) and breaks this whenever the runs over-determine (d, B): always with
        ``mirrored="all"`` or ``"star"``; with ``"first"`` only for k >= 3."""
        return bool(self.singular_values[-1] <= null_threshold(tolerance) * self.singular_values[0])


def null_threshold(tolerance: float) -> float:
    """Singular values below this times the largest one are zero to within the bisection tolerance
    (exact answers at tolerance 1e-2 give ratios <= 3e-4 on the evidence benchmark's metrics)."""
    return tolerance / 10


def qpme_centers(origin, radius: float, inner_radius: float, mirrored: str = "all") -> np.ndarray:
    """Centres of the LPME spheres, at distance delta = rho - varrho from o (so every query stays in
    the feasible sphere): o and o + delta e_1..e_k, plus

    * ``"first"``: o - delta e_1 (the paper's k + 2 spheres),
    * ``"all"``: o - delta e_j for every j (2k + 1 spheres),
    * ``"star"``: also o + delta (+-e_i +- e_j)/sqrt 2 for i < j (2k^2 + 1 spheres), which spends
      more queries to average out the bisection error of every slope.
    """
    origin = np.asarray(origin, dtype=float)
    k = origin.size
    if not 0 < inner_radius < radius:
        raise ValueError(f"need 0 < inner_radius < radius, got inner_radius={inner_radius!r}, radius={radius!r}")
    if mirrored not in ("first", "all", "star"):
        raise ValueError(f"mirrored must be 'first', 'all' or 'star', got {mirrored!r}")
    eye = np.eye(k)
    steps = [eye, -eye[:1] if mirrored == "first" else -eye]
    if mirrored == "star":
        steps += [np.array([si * eye[i] + sj * eye[j] for i in range(k) for j in range(i + 1, k)
                            for si in (1, -1) for sj in (1, -1)]) / np.sqrt(2)]
    return np.vstack([origin, origin + (radius - inner_radius) * np.vstack(steps)])


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
    return solve_runs(runs, origin, tolerance, anchor)


def solve_runs(runs, origin, tolerance: float, anchor: str = "boundary") -> QuadraticEstimate:
    """(d, B) up to scale from LPME runs (see the module docstring)."""
    anchors = np.array([r.boundary_point if anchor == "boundary" else r.center for r in runs])
    directions = np.array([r.direction for r in runs])
    d, B, sv = solve_gradient_system(anchors - np.asarray(origin), directions, null_tolerance=null_threshold(tolerance))
    return QuadraticEstimate(d=d, B=B, runs=tuple(runs), singular_values=sv)


def _vech_index(k: int) -> dict[tuple[int, int], int]:
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    return {**{p: n for n, p in enumerate(pairs)}, **{(j, i): n for n, (i, j) in enumerate(pairs)}}


def solve_gradient_system(offsets: np.ndarray, directions: np.ndarray,
                          null_tolerance: float = 1e-9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve d + B u_l = c_l f_l (all l) for (d, symmetric B) up to a positive scale.

    offsets: (L, k) anchor points minus o;  directions: (L, k) unit gradient directions.
    The unknown x = (d, vech B, c) is a null vector of the stacked system A.  Right singular vectors
    whose singular value is below ``null_tolerance`` * (largest) are not pinned down by the answers
    (the directions are only known to the bisection tolerance).  The typical case is lam ~ 0, where
    every gradient is parallel to d and B is free along d d^T, a term that barely changes any
    preference on the slice.  Among those near-null vectors we return the least curved metric:
    smallest |B|_F for |d| = 1.  The sign makes the gradient scales c_l sum to a positive number.
    Returns d, B and the singular values of A.
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
    _, sv, vt = np.linalg.svd(A)
    sv_full = np.zeros(A.shape[1])
    sv_full[: sv.size] = sv
    near_null = vt[sv_full <= null_tolerance * sv_full[0]]
    if near_null.shape[0] <= 1:
        x = vt[-1]
    else:
        x = _least_curved(near_null, k, n_b)
    if x[k + n_b:].sum() < 0:
        x = -x
    d = x[:k]
    B = np.empty((k, k))
    for (i, j), n in vech.items():
        B[i, j] = x[k + n]
    return d, B, sv_full


def _least_curved(basis: np.ndarray, k: int, n_b: int) -> np.ndarray:
    """The vector in span(basis) minimising |B|_F^2 / |d|^2 (generalised eigenproblem)."""
    weights = np.array([1.0 if i == j else 2.0 for i in range(k) for j in range(i, k)])  # Frobenius of vech
    bpart = basis[:, k:k + n_b] * np.sqrt(weights)
    dpart = basis[:, :k]
    curvature = bpart @ bpart.T
    linear = dpart @ dpart.T + 1e-12 * np.eye(basis.shape[0])
    _, vecs = scipy.linalg.eigh(curvature, linear)
    return basis.T @ vecs[:, 0]
