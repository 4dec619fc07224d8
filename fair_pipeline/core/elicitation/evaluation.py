"""Ground-truth metrics, feasible profiles and error measures for checking elicitation (tests,
benchmarks, and the simulated oracle of the pipeline)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fair_qpme import DEFAULT_RADIUS, cut_partitions, default_inner_radius
from .metric import FairQuadraticMetric, group_pairs
from .qpme import qpme_centers



def random_fair_metric(rng: np.random.Generator, n_groups: int, n_classes: int = 2,
                       group_weights=None) -> FairQuadraticMetric:
    """a = |N(0, I)| normalised; B^{uv} = Q Q^T with Q standard normal (PSD), jointly normalised to
    1/2 sum |B^{uv}|_F = 1; lam ~ U(0, 1)."""
    a = np.abs(rng.standard_normal(n_classes))
    a /= np.linalg.norm(a)
    mats = []
    for _ in group_pairs(n_groups):
        q = rng.standard_normal((n_classes, n_classes))
        mats.append(q @ q.T)
    scale = 0.5 * sum(np.linalg.norm(b) for b in mats)
    mats = [b / scale for b in mats]
    return FairQuadraticMetric.from_pairs(a, mats, rng.uniform(), group_weights)


def _slices(metric: FairQuadraticMetric):
    """(tau^sigma, W^sigma) of every elicitation slice sigma (eq. 20)."""
    partitions, _ = cut_partitions(metric.n_groups)
    for sigma in partitions:
        tau_sigma = metric.group_weights[list(sigma)].sum(axis=0)
        w = sum(metric.B[u, v] for u in sigma for v in range(metric.n_groups) if v not in sigma)
        yield tau_sigma, w


def slice_gradients(metric: FairQuadraticMetric, radius: float, inner_radius: float) -> np.ndarray:
    """Utility gradients (eq. 20) at the k + 2 QPME centres of every elicitation slice: (n_slices, k+2, k)."""
    k = metric.n_classes
    o = np.full(k, 1.0 / k)
    centers = qpme_centers(o, radius, inner_radius)
    out = []
    for tau_sigma, w in _slices(metric):
        d = (1 - metric.lam) * tau_sigma * metric.a
        out.append([d - metric.lam * w @ (c - o) for c in centers])
    return np.array(out)


def satisfies_assumption4(metric: FairQuadraticMetric, radius: float = DEFAULT_RADIUS,
                          inner_radius: float | None = None, min_gradient: float = 1e-2,
                          curvature_margin: float = 2.0) -> bool:
    """Assumption 4 (non-zero gradients at the QPME centres o, z_1..z_k, -z_1), made quantitative:

    * as in the paper's experiments (appendix H.1), every such gradient has a coordinate larger
      than ``min_gradient`` in absolute value, and
    * the gradient is large against the curvature over a small sphere,
      |grad| > curvature_margin * varrho * lam |W^sigma|_2, i.e. the metric is locally linear there
      (eq. 5) and its unconstrained optimum lies well outside the small sphere.  Without this the
      best point of a small sphere is not where the gradient points, which Algorithm 1 relies on.
    """
    inner = default_inner_radius(radius) if inner_radius is None else inner_radius
    grads = slice_gradients(metric, radius, inner)
    curvature = np.array([metric.lam * np.linalg.norm(w, 2) for _, w in _slices(metric)])
    coordinate_ok = (np.abs(grads).max(axis=2) > min_gradient).all()
    linear_ok = (np.linalg.norm(grads, axis=2) > curvature_margin * inner * curvature[:, None]).all()
    return bool(coordinate_ok and linear_ok)


def random_regular_metrics(rng: np.random.Generator, n_metrics: int, n_groups: int, n_classes: int = 2,
                           radius: float = DEFAULT_RADIUS, **kwargs) -> tuple[list[FairQuadraticMetric], int]:
    """``n_metrics`` random metrics satisfying Assumption 4, and how many draws were rejected."""
    metrics, rejected = [], 0
    while len(metrics) < n_metrics:
        m = random_fair_metric(rng, n_groups, n_classes, **kwargs)
        if satisfies_assumption4(m, radius):
            metrics.append(m)
        else:
            rejected += 1
    return metrics, rejected


def sample_sphere_profiles(rng: np.random.Generator, n: int, n_groups: int, n_classes: int = 2,
                           radius: float = DEFAULT_RADIUS) -> np.ndarray:
    """n profiles (n, m, k); each group's rates uniform in the ball of ``radius`` around o (feasible
    for every group by Remark 3)."""
    x = rng.standard_normal((n, n_groups, n_classes))
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    x *= radius * rng.uniform(size=(n, n_groups, 1)) ** (1.0 / n_classes)
    return 1.0 / n_classes + x


def pairwise_agreement(truth: FairQuadraticMetric, estimate: FairQuadraticMetric,
                       r1: np.ndarray, r2: np.ndarray) -> float:
    """Fraction of pairs (r1[n], r2[n]) that both metrics order the same way."""
    return float(np.mean(np.sign(truth(r1) - truth(r2)) == np.sign(estimate(r1) - estimate(r2))))


@dataclass(frozen=True)
class ElicitationErrors:
    a: float        # |a_hat - a|_2
    B: float        # sum_{u<v} |B_hat^{uv} - B^{uv}|_F
    lam: float      # |lam_hat - lam|


def elicitation_errors(truth: FairQuadraticMetric, estimate: FairQuadraticMetric) -> ElicitationErrors:
    return ElicitationErrors(
        a=float(np.linalg.norm(estimate.a - truth.a)),
        B=float(sum(np.linalg.norm(estimate.B[u, v] - truth.B[u, v]) for u, v in group_pairs(truth.n_groups))),
        lam=float(abs(estimate.lam - truth.lam)),
    )


