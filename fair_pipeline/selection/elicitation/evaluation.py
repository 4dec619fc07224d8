"""Ground-truth metrics, feasible profiles and error measures for checking elicitation (tests,
benchmarks, and the simulated oracle of the pipeline)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from fair_pipeline.selection.elicitation.fair_qpme import (
    DEFAULT_RADIUS,
    cut_partitions,
    default_inner_radius,
    elicit_fair_quadratic_metric,
)
from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric, group_pairs
from fair_pipeline.selection.elicitation.oracles import SimulatedOracle
from fair_pipeline.selection.elicitation._qpme import qpme_centers
from fair_pipeline.selection.elicitation.query_log import InconsistentOracleError, InconsistentOracleWarning


def random_fair_metric(rng: np.random.Generator, n_groups: int, n_classes: int = 2, group_weights=None,
                       lam_range: tuple[float, float] = (0.25, 0.75)) -> FairQuadraticMetric:
    """A random Definition-4 metric, drawn like the paper authors' experiments:

    a ~ U(0, 1)^k normalised (redrawn until every a_i >= 0.01); each B^{uv} = U diag(1 + U(0, 1)) U^T
    with U a random orthogonal matrix (positive definite, like sklearn's make_spd_matrix), scaled so
    that the |B^{uv}|_F are a random split of 2 (1/2 sum |B^{uv}|_F = 1); lam ~ U(lam_range);
    ``group_weights="random"`` draws tau with columns ~ U(0, 1) normalised, None means uniform.
    """
    a = rng.uniform(size=n_classes)
    while (a / np.linalg.norm(a) < 1e-2).any():
        a = rng.uniform(size=n_classes)
    a /= np.linalg.norm(a)
    pairs = group_pairs(n_groups)
    split = rng.uniform(size=len(pairs))
    split *= 2.0 / split.sum()
    mats = []
    for share in split:
        u, _, _ = np.linalg.svd(rng.uniform(size=(n_classes, n_classes)))
        b = (u * (1.0 + rng.uniform(size=n_classes))) @ u.T
        mats.append(b * share / np.linalg.norm(b))
    if isinstance(group_weights, str) and group_weights == "random":
        tau = rng.uniform(size=(n_groups, n_classes))
        group_weights = tau / tau.sum(axis=0)
    return FairQuadraticMetric.from_pairs(a, mats, rng.uniform(*lam_range), group_weights)


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
                          inner_radius: float | None = None, min_gradient: float = 0.1,
                          curvature_margin: float = 2.0) -> bool:
    """Assumption 4 (non-zero gradients at the QPME centres), made quantitative as in the paper
    authors' experiments, for every elicitation slice sigma:

    * the unit gradient at o, at every z_j and at -z_1 has |first coordinate| >= ``min_gradient``
      (0.1 in their code), and the slopes f_2/f_1 at z_1 and -z_1 differ by >= ``min_gradient`` (the
      denominator of eq. 17);
    * and, because Algorithm 1 reads gradients off small spheres, the gradient is large against the
      curvature there: |grad| > curvature_margin * varrho * lam |W^sigma|_2 (otherwise the best point
      of a small sphere is not where the gradient points).
    """
    inner = default_inner_radius(radius) if inner_radius is None else inner_radius
    grads = slice_gradients(metric, radius, inner)  # centres: o, z_1..z_k, -z_1..-z_k
    k = metric.n_classes
    unit = grads / np.linalg.norm(grads, axis=2, keepdims=True)
    used = list(range(k + 2))  # o, z_1..z_k, -z_1: the paper's centres
    if (np.abs(unit[:, used, 0]) < min_gradient).any():
        return False
    slope_plus, slope_minus = unit[:, 1, 1] / unit[:, 1, 0], unit[:, k + 1, 1] / unit[:, k + 1, 0]
    if (np.abs(slope_plus - slope_minus) < min_gradient).any():
        return False
    curvature = np.array([metric.lam * np.linalg.norm(w, 2) for _, w in _slices(metric)])
    return bool((np.linalg.norm(grads, axis=2) > curvature_margin * inner * curvature[:, None]).all())


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




@dataclass(frozen=True)
class EvidenceSummary:
    """Elicitation quality over many random ground-truth metrics."""

    n_groups: int
    n_classes: int
    n_metrics: int
    n_rejected: int            # random draws that failed Assumption 4
    flip_fraction: float
    votes: int
    vote_scope: str
    tolerance: float
    agreement: np.ndarray      # per metric: share of random profile pairs ordered like the truth
    errors: list               # per metric: ElicitationErrors
    n_queries: np.ndarray      # per metric
    n_failed: int              # elicitations that stopped with InconsistentOracleError (agreement 0.5)

    def median_errors(self) -> ElicitationErrors:
        return ElicitationErrors(*(float(np.nanmedian([getattr(e, f) for e in self.errors]))
                                   for f in ("a", "B", "lam")))

    def row(self) -> dict:
        med = self.median_errors()
        se = self.agreement.std(ddof=1) / np.sqrt(self.agreement.size)
        return {
            "m": self.n_groups, "k": self.n_classes, "metrics": self.n_metrics, "flips": self.flip_fraction,
            "votes": self.votes, "vote_scope": self.vote_scope, "tolerance": self.tolerance,
            "agreement_mean": float(self.agreement.mean()), "agreement_se": float(se),
            "agreement_min": float(self.agreement.min()),
            "median_err_a": med.a, "median_err_B": med.B, "median_err_lam": med.lam,
            "queries_mean": float(self.n_queries.mean()), "failed": self.n_failed, "rejected": self.n_rejected,
        }


def evaluate_elicitation(n_metrics: int, n_groups: int, n_classes: int = 2, *, flip_fraction: float = 0.0,
                         votes: int = 1, vote_scope: str = "all", tolerance: float = 1e-2, n_pairs: int = 2000,
                         radius: float = DEFAULT_RADIUS, seed: int = 0, group_weights="random",
                         lam_range: tuple[float, float] = (0.25, 0.75), **elicit_options) -> EvidenceSummary:
    """Elicit ``n_metrics`` random metrics satisfying Assumption 4 with simulated oracles and compare
    with the truth on ``n_pairs`` random pairs of profiles from the feasible sphere.
    ``elicit_options`` (e.g. anchor, mirrored) go to ``elicit_fair_quadratic_metric``."""
    rng = np.random.default_rng(seed)
    metrics, rejected = random_regular_metrics(rng, n_metrics, n_groups, n_classes, radius,
                                               group_weights=group_weights, lam_range=lam_range)
    r1 = sample_sphere_profiles(rng, n_pairs, n_groups, n_classes, radius)
    r2 = sample_sphere_profiles(rng, n_pairs, n_groups, n_classes, radius)
    agreement, errors, queries, failed = [], [], [], 0
    for i, truth in enumerate(metrics):
        oracle = SimulatedOracle(truth, flip_fraction, seed=seed * 100003 + i)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InconsistentOracleWarning)
                est = elicit_fair_quadratic_metric(oracle, n_groups, n_classes, tolerance, radius,
                                                   truth.group_weights, votes=votes, vote_scope=vote_scope,
                                                   n_band_draws=0, **elicit_options)
        except InconsistentOracleError:
            failed += 1
            agreement.append(0.5)  # no metric: as good as a coin
            errors.append(ElicitationErrors(np.nan, np.nan, np.nan))
            queries.append(oracle.n_calls)
            continue
        agreement.append(pairwise_agreement(truth, est, r1, r2))
        errors.append(elicitation_errors(truth, est))
        queries.append(est.n_queries)
    return EvidenceSummary(n_groups, n_classes, n_metrics, rejected, flip_fraction, votes, vote_scope, tolerance,
                           np.array(agreement), errors, np.array(queries), failed)
