"""Re-ranking evaluation of EO transforms on held-out SIMULATED requests (ground truth from the simulator).

For each held-out request of K candidates (the simulator's production traffic on a day outside the
training window), every method re-scores the candidates, ranks them by descending fair score, and new
clicks are drawn from the simulator's truth: click = Y(1) * 1{U < w_position}, with one uniform U per
(request, candidate) shared by all methods (common random numbers, so differences between methods are
not click noise).

Per method and group c (Corollary 1): merit M_c = P(Y(1)=1 | C=c), observed exposure
v_obs(c) = P(click | C=c), their ratio v_obs(c) / M_c = clicks_c / relevant_c with a request-clustered
delta-method SE, its expectation given the positions (mean of w over relevant items; no click noise),
the distribution of the positions of Y(1)=1 items (Theorem 1, part 1), CTR, and the two-sample
Kolmogorov-Smirnov distance between the groups' fair scores of clicked items (Theorem 1, part 2;
figure 3's EO measure).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from fair_pipeline.eo.aggregate import click_counts, combine_click_counts
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve, simulate_requests

PRODUCTION_STREAM = 1  # the simulator's observational (production) traffic: identical to the landing logs
HELD_OUT_STREAM = 7  # held-out evaluation requests: a stream no logged policy uses

Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (scores, groups) -> fair scores


def simulated_click_counts(
    config: SimulationConfig, items: pd.DataFrame, days: list[dt.date], bin_width: float | None
) -> pd.DataFrame:
    """Click counts of the simulated production (observational) logs of `days`, aggregated per day."""
    group_of_item = items["group_id"].to_numpy(dtype=object)
    per_day = []
    for day in days:
        sim = simulate_requests(config, items, day, "production", config.requests_per_day, stream=PRODUCTION_STREAM)
        per_day.append(
            click_counts(sim["score"], group_of_item[sim["item_index"]], sim["position"], sim["click"], bin_width)
        )
    return combine_click_counts(per_day)


@dataclasses.dataclass(frozen=True)
class HeldOutRequests:
    """K candidates per request: production scores, groups, Y(1) and the shared click uniforms."""

    scores: np.ndarray  # (n, K)
    groups: np.ndarray  # (n, K) str
    relevance: np.ndarray  # (n, K) 0/1
    uniforms: np.ndarray  # (n, K)
    position_bias: np.ndarray  # (K,) the simulator's TRUE w_j (index 0 = position 1)


def held_out_requests(config: SimulationConfig, items: pd.DataFrame, day: dt.date, n_requests: int) -> HeldOutRequests:
    sim = simulate_requests(config, items, day, "production", n_requests, stream=HELD_OUT_STREAM)
    k = config.slots
    item_index = sim["item_index"].reshape(n_requests, k)
    rng = np.random.default_rng([config.seed, day.toordinal(), HELD_OUT_STREAM, 1])
    return HeldOutRequests(
        scores=sim["score"].reshape(n_requests, k),
        groups=items["group_id"].to_numpy(dtype=str)[item_index],
        relevance=items["relevance"].to_numpy()[item_index].astype(np.int8),
        uniforms=rng.random((n_requests, k)),
        position_bias=bias_curve(config),
    )


def group_labels(requests: HeldOutRequests) -> list[str]:
    """The requests' groups, sorted (np.unique: no Python list of every cell)."""
    return np.unique(requests.groups).tolist()


def rank_positions(scores: np.ndarray) -> np.ndarray:
    """1-based position of each candidate when a request is sorted by descending score (ties: stable)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    positions = np.empty_like(order)
    rows = np.arange(scores.shape[0])[:, None]
    positions[rows, order] = np.arange(1, scores.shape[1] + 1)
    return positions


@dataclasses.dataclass
class MethodOutcome:
    name: str
    alpha: float | None
    fair_scores: np.ndarray  # (n, K)
    positions: np.ndarray  # (n, K)
    clicks: np.ndarray  # (n, K) bool


RANK_CHUNK = 1 << 14  # requests ranked per step in run_method


def run_method(requests: HeldOutRequests, name: str, scorer: Scorer | None, alpha: float | None,
               groups: pd.Categorical | None = None) -> MethodOutcome:
    """``groups``: the requests' groups as a Categorical (optional): scorers use its codes as they are,
    instead of converting every label to an object (a day's cells x 8 bytes) on each call."""
    n, k = requests.scores.shape
    if scorer is None:
        fair = requests.scores
    else:
        labels = requests.groups.ravel() if groups is None else groups
        fair = np.asarray(scorer(requests.scores.ravel(), labels), dtype=float).reshape(n, k)
    # the smallest integer type holding position K: a day's positions are n x K of them
    positions, clicks = np.empty((n, k), dtype=np.min_scalar_type(k)), np.empty((n, k), dtype=bool)
    for lo in range(0, n, RANK_CHUNK):  # requests are ranked independently: chunks bound the temporaries
        part = slice(lo, lo + RANK_CHUNK)
        positions[part] = rank_positions(fair[part])
        clicks[part] = (requests.relevance[part] == 1) & (requests.uniforms[part] <
                                                         requests.position_bias[positions[part] - 1])
    return MethodOutcome(name, alpha, fair, positions, clicks)


def _ratio_se(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """sum(a) / sum(b) over requests and its request-clustered delta-method standard error."""
    total_b = b.sum()
    if total_b == 0:
        return float("nan"), float("nan")
    ratio = a.sum() / total_b
    n = len(a)
    resid = a - ratio * b
    return float(ratio), float(np.sqrt(n / max(n - 1, 1) * (resid**2).sum()) / total_b)


def group_table(requests: HeldOutRequests, outcome: MethodOutcome, min_relevant: int = 30) -> pd.DataFrame:
    """One row per group: merit, exposure, exposure over merit (with SEs), CTR, sample sizes."""
    n, k = requests.scores.shape
    w = requests.position_bias
    rows = []
    for group in group_labels(requests):
        mine = requests.groups == group
        relevant = mine & (requests.relevance == 1)
        a = (outcome.clicks & mine).sum(axis=1).astype(float)
        b = relevant.sum(axis=1).astype(float)
        m = mine.sum(axis=1).astype(float)
        estimable = b.sum() >= min_relevant
        eom, eom_se = _ratio_se(a, b) if estimable else (np.nan, np.nan)
        merit, merit_se = _ratio_se(b, m)
        ctr, ctr_se = _ratio_se(a, m)
        rows.append(
            {
                "method": outcome.name,
                "alpha": outcome.alpha,
                "group": group,
                "n_requests": n,
                "n_impressions": int(m.sum()),
                "n_relevant": int(b.sum()),
                "n_clicks": int(a.sum()),
                "merit": merit,
                "merit_se": merit_se,
                "exposure": ctr,
                "exposure_se": ctr_se,
                "exposure_over_merit": eom,
                "exposure_over_merit_se": eom_se,
                "expected_exposure_over_merit": float(w[outcome.positions[relevant] - 1].mean()) if estimable else np.nan,
                "mean_position_relevant": float(outcome.positions[relevant].mean()) if estimable else np.nan,
                "estimable": bool(estimable),
            }
        )
    return pd.DataFrame(rows)


def method_summary(requests: HeldOutRequests, outcome: MethodOutcome, groups: tuple[str, str]) -> dict:
    """Between-group comparison for one method: exposure/merit ratio gap (SE), KS distance, CTR (SE)."""
    n, k = requests.scores.shape
    g0, g1 = groups
    sums = {}
    for g in groups:
        mine = requests.groups == g
        sums[g] = (
            (outcome.clicks & mine).sum(axis=1).astype(float),
            (mine & (requests.relevance == 1)).sum(axis=1).astype(float),
        )
    (a0, b0), (a1, b1) = sums[g0], sums[g1]
    ratio = (a0.sum() / b0.sum()) / (a1.sum() / b1.sum())
    # Delta method on log(ratio), clustered by request (both groups share requests).
    z = a0 / a0.sum() - b0 / b0.sum() - a1 / a1.sum() + b1 / b1.sum()
    se = ratio * np.sqrt(n / (n - 1) * (z**2).sum())
    clicked0 = outcome.fair_scores[outcome.clicks & (requests.groups == g0)]
    clicked1 = outcome.fair_scores[outcome.clicks & (requests.groups == g1)]
    ks = stats.ks_2samp(clicked0, clicked1)
    ctr, ctr_se = _ratio_se(outcome.clicks.sum(axis=1).astype(float), np.full(n, float(k)))
    return {
        "method": outcome.name,
        "alpha": outcome.alpha,
        "groups": f"{g0} vs {g1}",
        "exposure_over_merit_ratio": float(ratio),
        "exposure_over_merit_ratio_se": float(se),
        "relative_gap": float(ratio - 1.0),
        "ks_distance": float(ks.statistic),
        "ks_pvalue": float(ks.pvalue),
        "n_clicks_group0": len(clicked0),
        "n_clicks_group1": len(clicked1),
        "ctr": ctr,
        "ctr_se": ctr_se,
        "n_requests": n,
    }


def position_distribution(requests: HeldOutRequests, outcome: MethodOutcome) -> pd.DataFrame:
    """Share of each group's Y(1)=1 items shown at each position (Theorem 1, part 1)."""
    k = requests.scores.shape[1]
    frames = []
    for group in group_labels(requests):
        relevant = (requests.groups == group) & (requests.relevance == 1)
        counts = np.bincount(outcome.positions[relevant], minlength=k + 1)[1:]
        frames.append(
            pd.DataFrame(
                {
                    "method": outcome.name,
                    "alpha": outcome.alpha,
                    "group": group,
                    "position": np.arange(1, k + 1),
                    "n_relevant": counts,
                    "share": counts / max(counts.sum(), 1),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


@dataclasses.dataclass
class FigureData:
    """What figure 1 draws of one method, per group: the fair scores of clicked items and the share of the
    group's Y(1)=1 items at each position (kept instead of the method's (n, K) outcome arrays)."""

    name: str
    clicked: dict[str, np.ndarray]
    position_share: dict[str, np.ndarray]


def figure_data(requests: HeldOutRequests, outcome: MethodOutcome) -> FigureData:
    k = requests.scores.shape[1]
    clicked, share = {}, {}
    for group in group_labels(requests):
        mine = requests.groups == group
        clicked[group] = outcome.fair_scores[outcome.clicks & mine]
        relevant = mine & (requests.relevance == 1)
        share[group] = np.bincount(outcome.positions[relevant], minlength=k + 1)[1:] / max(relevant.sum(), 1)
    return FigureData(outcome.name, clicked, share)


FIGURE_METHODS = ("raw", "unweighted", "weighted")


def evaluate_methods(
    requests: HeldOutRequests, methods: Mapping[str, tuple[Scorer | None, float | None]],
    figure_methods: tuple[str, ...] = FIGURE_METHODS,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, FigureData]]:
    """(per-group table, between-group summary, position distribution, figure data of `figure_methods`).

    One method at a time: its (n, K) outcome arrays are reduced to the tables and dropped before the next
    method runs, so memory holds one method's outcome, not every method's."""
    groups = tuple(group_labels(requests))
    if len(groups) != 2:
        raise ValueError(f"the between-group summary compares two groups; held-out requests have {list(groups)}")
    labels = pd.Categorical(requests.groups.ravel())
    per_group, summary, positions, figures = [], [], [], {}
    for name, (scorer, alpha) in methods.items():
        outcome = run_method(requests, name, scorer, alpha, labels)
        per_group.append(group_table(requests, outcome))
        summary.append(method_summary(requests, outcome, groups))
        positions.append(position_distribution(requests, outcome))
        if name in figure_methods:
            figures[name] = figure_data(requests, outcome)
        del outcome
    return (pd.concat(per_group, ignore_index=True), pd.DataFrame(summary), pd.concat(positions, ignore_index=True),
            figures)
