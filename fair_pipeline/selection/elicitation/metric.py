"""The fair quadratic performance metric of Definition 4 (a cost: lower is better).

    phi(r^{1:m}) = (1 - lam) <a, 1 - r> + lam/2 sum_{u<v} (r^u - r^v)^T B^{uv} (r^u - r^v),
    r = sum_g tau^g * r^g   (overall rates),
    a >= 0, |a|_2 = 1;  B^{uv} PSD, 1/2 sum_{u<v} |B^{uv}|_F = 1;  lam in [0, 1].

Model selection may add an exposure term to this cost, ``exposure_weight`` x the exposure disparity of a ranking
(`selection.exposure.exposure_disparity`): 0 (the default) ranks by the rates alone. `fair-pipeline elicit` asks
for it after the comparisons (`exposure_question`); ``exposure_weight_source`` records how it was set.

Rates: array (n_groups, n_classes) with entry r_i^g = P(h = i | Y = i, G = g); for k = 2 the
columns are (TPR, TNR).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from fair_pipeline.selection.elicitation.validation import check_group_weights, check_rate_batch


def group_pairs(n_groups: int) -> list[tuple[int, int]]:
    return list(combinations(range(n_groups), 2))


@dataclass(frozen=True)
class FairQuadraticMetric:
    """a: (k,); B: (m, m, k, k) with B[u, v] = B[v, u] = B^{uv} and zero blocks on the diagonal;
    lam: trade-off; group_weights: tau, (m, k).  ``n_queries`` and ``diagnostics`` are filled in by
    elicitation (0 / empty for a metric written down by hand)."""

    a: np.ndarray
    B: np.ndarray
    lam: float
    group_weights: np.ndarray
    n_queries: int = 0
    diagnostics: dict = field(default_factory=dict, compare=False)
    exposure_weight: float = 0.0  # mu: weight of the exposure disparity added to the cost by model selection
    exposure_weight_source: str = ""  # how mu was set (elicited, stated in a config); "" = never set

    def __post_init__(self):
        if not (np.isfinite(self.exposure_weight) and self.exposure_weight >= 0):
            raise ValueError(f"exposure_weight must be a finite number >= 0, got {self.exposure_weight!r}")

    @property
    def n_groups(self) -> int:
        return self.group_weights.shape[0]

    @property
    def n_classes(self) -> int:
        return self.group_weights.shape[1]

    @classmethod
    def from_pairs(cls, a, pair_matrices, lam: float, group_weights=None, **kwargs) -> "FairQuadraticMetric":
        """Build from a list of B^{uv} in ``group_pairs(m)`` order (for m=2: [B^{12}])."""
        a = np.asarray(a, dtype=float)
        k = a.size
        mats = [np.asarray(b, dtype=float) for b in pair_matrices]
        m = int(round((1 + np.sqrt(1 + 8 * len(mats))) / 2))
        if m * (m - 1) // 2 != len(mats) or any(b.shape != (k, k) for b in mats):
            raise ValueError(f"need C(m,2) matrices of shape ({k}, {k}), got {[b.shape for b in mats]}")
        B = np.zeros((m, m, k, k))
        for (u, v), b in zip(group_pairs(m), mats):
            B[u, v] = B[v, u] = b
        tau = check_group_weights(group_weights, m, k)
        return cls(a=a, B=B, lam=float(lam), group_weights=tau, **kwargs)

    def pair_matrices(self) -> list[np.ndarray]:
        return [self.B[u, v] for u, v in group_pairs(self.n_groups)]

    def __call__(self, rates) -> np.ndarray | float:
        """Cost of one profile (m, k) -> float, or of a batch (n, m, k) -> (n,)."""
        single = np.ndim(rates) == 2
        r = check_rate_batch(rates, self.n_groups, self.n_classes)
        overall = np.einsum("gi,ngi->ni", self.group_weights, r)
        linear = (1.0 - overall) @ self.a
        violation = np.zeros(r.shape[0])
        for u, v in group_pairs(self.n_groups):
            diff = r[:, u] - r[:, v]
            violation += np.einsum("ni,ij,nj->n", diff, self.B[u, v], diff)
        cost = (1.0 - self.lam) * linear + 0.5 * self.lam * violation
        return float(cost[0]) if single else cost

    def gradient(self, rates) -> np.ndarray:
        """d cost / d r^g_i, shape (m, k) (used for delta-method standard errors)."""
        r = np.asarray(rates, dtype=float)
        grad = -(1.0 - self.lam) * self.group_weights * self.a[None, :]
        for u, v in group_pairs(self.n_groups):
            g = self.lam * self.B[u, v] @ (r[u] - r[v])
            grad[u] += g
            grad[v] -= g
        return grad


def metric_to_dict(metric: FairQuadraticMetric) -> dict:
    """JSON-ready description (a, B^{uv} per pair, lam, tau, n_queries, and the 95% tolerance band
    of lam when elicited) for MLflow / reports."""
    band = metric.diagnostics.get("tolerance_band", {})
    extra = {"lam_interval": list(band["lam_interval"])} if band.get("n_draws") else {}
    return extra | {
        "a": metric.a.tolist(),
        "B": {f"{u},{v}": metric.B[u, v].tolist() for u, v in group_pairs(metric.n_groups)},
        "lam": metric.lam,
        "group_weights": metric.group_weights.tolist(),
        "n_queries": metric.n_queries,
    } | ({"exposure_weight": metric.exposure_weight} if metric.exposure_weight else {}) | (
        {"exposure_weight_source": metric.exposure_weight_source} if metric.exposure_weight_source else {})


def metric_from_dict(data: dict) -> FairQuadraticMetric:
    tau = np.asarray(data["group_weights"], dtype=float)
    pairs = group_pairs(tau.shape[0])
    try:
        mats = [data["B"][f"{u},{v}"] for u, v in pairs]
    except KeyError as exc:
        raise ValueError(f"metric dict lacks B for group pair {exc.args[0]}") from None
    return FairQuadraticMetric.from_pairs(data["a"], mats, data["lam"], tau, n_queries=int(data.get("n_queries", 0)),
                                          exposure_weight=float(data.get("exposure_weight", 0.0)),
                                          exposure_weight_source=str(data.get("exposure_weight_source", "")))
