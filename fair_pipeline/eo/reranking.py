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
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from fair_pipeline.eo.aggregate import click_counts, combine_click_counts
from fair_pipeline.ingestion.simulator import (
    SimulationConfig,
    bias_curve,
    production_ranking_chunks,
    simulate_requests,
)

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


CHUNK_REQUESTS = 1 << 14  # held-out requests drawn, re-ranked and reduced per step of evaluate_methods


def held_out_chunks(config: SimulationConfig, items: pd.DataFrame, day: dt.date, n_requests: int,
                    chunk: int = CHUNK_REQUESTS) -> Iterator[HeldOutRequests]:
    """The held-out requests `chunk` at a time (the same requests as `held_out_requests`, in order)."""
    group_of_item = items["group_id"].to_numpy(dtype=str)
    relevance_of_item = items["relevance"].to_numpy()
    rng = np.random.default_rng([config.seed, day.toordinal(), HELD_OUT_STREAM, 1])
    w = bias_curve(config)
    for item_index, scores in production_ranking_chunks(config, items, day, n_requests, HELD_OUT_STREAM, chunk):
        yield HeldOutRequests(scores=scores, groups=group_of_item[item_index],
                              relevance=relevance_of_item[item_index].astype(np.int8),
                              uniforms=rng.random(scores.shape), position_bias=w)


def held_out_requests(config: SimulationConfig, items: pd.DataFrame, day: dt.date, n_requests: int) -> HeldOutRequests:
    parts = list(held_out_chunks(config, items, day, n_requests))
    return HeldOutRequests(*(np.concatenate([getattr(p, f) for p in parts])
                             for f in ("scores", "groups", "relevance", "uniforms")), bias_curve(config))


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


def _ratio_se(sa: int, sb: int, saa: int, sab: int, sbb: int, n: int) -> tuple[float, float]:
    """sum(a) / sum(b) over requests and its request-clustered delta-method standard error, from the sums of a and
    b per request and of their products (integers): sum((a - ratio b)^2) = (saa sb^2 - 2 sa sb sab + sa^2 sbb) / sb^2,
    an integer over sb^2 computed exactly, so the SE is rounded once whatever the order the requests came in."""
    sa, sb, saa, sab, sbb = (int(v) for v in (sa, sb, saa, sab, sbb))
    if sb == 0:
        return float("nan"), float("nan")
    squares = saa * sb * sb - 2 * sa * sb * sab + sa * sa * sbb
    return sa / sb, float(np.sqrt(n / max(n - 1, 1) * (squares / (sb * sb)))) / sb


COLUMNS = ("clicks", "relevant", "impressions")  # per request and group: the method's clicks, Y(1)=1 items, impressions


class _MethodTotals:
    """What the tables and figure 1 need of one method, added up chunk of requests by chunk in memory that does not
    grow with the requests but for the clicked items' fair scores (the KS distance's samples).

    Per request and group it counts COLUMNS and keeps only their sums over requests and the sums of their products
    (a (3 groups)^2 integer matrix): the request-clustered SEs are quadratic forms of these, exact in integers. Per
    group also the positions of its Y(1)=1 items (counts by position, index 0 unused) and the fair scores of its
    clicked items, in request order."""

    def __init__(self, name: str, alpha: float | None, k: int):
        self.name, self.alpha, self.k, self.n = name, alpha, k, 0
        self.columns: dict[str, int] = {}  # group -> its first column in sums / products
        self.sums = np.zeros(0, dtype=np.int64)
        self.products = np.zeros((0, 0), dtype=np.int64)
        self.relevant_positions: dict[str, np.ndarray] = {}
        self.clicked_scores: dict[str, list[np.ndarray]] = {}

    @property
    def groups(self) -> list[str]:
        return sorted(self.columns)

    def _column(self, group: str) -> int:
        if group not in self.columns:  # absent from earlier requests: zero counts there, so zero sums and products
            self.columns[group] = len(self.sums)
            self.sums = np.pad(self.sums, (0, len(COLUMNS)))
            self.products = np.pad(self.products, (0, len(COLUMNS)))
            self.relevant_positions[group] = np.zeros(self.k + 1, dtype=np.int64)
            self.clicked_scores[group] = []
        return self.columns[group]

    def add(self, requests: HeldOutRequests, outcome: MethodOutcome) -> None:
        present = group_labels(requests)
        first = [self._column(group) for group in present]
        counts = np.zeros((requests.scores.shape[0], len(self.sums)), dtype=np.int64)
        for group, j in zip(present, first):
            mine = requests.groups == group
            relevant = mine & (requests.relevance == 1)
            clicked = outcome.clicks & mine
            counts[:, j], counts[:, j + 1], counts[:, j + 2] = clicked.sum(axis=1), relevant.sum(axis=1), mine.sum(axis=1)
            self.relevant_positions[group] += np.bincount(outcome.positions[relevant], minlength=self.k + 1)
            self.clicked_scores[group].append(outcome.fair_scores[clicked])
        self.sums += counts.sum(axis=0)
        self.products += counts.T @ counts
        self.n += requests.scores.shape[0]

    def sum(self, group: str, column: str) -> int:
        return int(self.sums[self.columns[group] + COLUMNS.index(column)])

    def product(self, group: str, column: str, other_group: str, other_column: str) -> int:
        i = self.columns[group] + COLUMNS.index(column)
        return int(self.products[i, self.columns[other_group] + COLUMNS.index(other_column)])

    def ratio_se(self, group: str, numerator: str, denominator: str) -> tuple[float, float]:
        a, b = (group, numerator), (group, denominator)
        return _ratio_se(self.sum(*a), self.sum(*b), self.product(*a, *a), self.product(*a, *b), self.product(*b, *b),
                         self.n)

    def clicked(self, group: str) -> np.ndarray:
        parts = self.clicked_scores[group]
        return np.concatenate(parts) if parts else np.zeros(0)


def _totals(requests: HeldOutRequests, outcome: MethodOutcome) -> _MethodTotals:
    totals = _MethodTotals(outcome.name, outcome.alpha, requests.scores.shape[1])
    totals.add(requests, outcome)
    return totals


def _group_rows(totals: _MethodTotals, w: np.ndarray, min_relevant: int = 30) -> pd.DataFrame:
    rows = []
    for group in totals.groups:
        clicks, relevant, impressions = (totals.sum(group, c) for c in COLUMNS)
        estimable = relevant >= min_relevant
        eom, eom_se = totals.ratio_se(group, "clicks", "relevant") if estimable else (np.nan, np.nan)
        merit, merit_se = totals.ratio_se(group, "relevant", "impressions")
        ctr, ctr_se = totals.ratio_se(group, "clicks", "impressions")
        at = totals.relevant_positions[group][1:]
        rows.append(
            {
                "method": totals.name,
                "alpha": totals.alpha,
                "group": group,
                "n_requests": totals.n,
                "n_impressions": impressions,
                "n_relevant": relevant,
                "n_clicks": clicks,
                "merit": merit,
                "merit_se": merit_se,
                "exposure": ctr,
                "exposure_se": ctr_se,
                "exposure_over_merit": eom,
                "exposure_over_merit_se": eom_se,
                # means over the relevant items from their counts by position (exact for the positions)
                "expected_exposure_over_merit": float(at @ w / at.sum()) if estimable else np.nan,
                "mean_position_relevant": float(at @ np.arange(1, totals.k + 1) / at.sum()) if estimable else np.nan,
                "estimable": bool(estimable),
            }
        )
    return pd.DataFrame(rows)


def group_table(requests: HeldOutRequests, outcome: MethodOutcome, min_relevant: int = 30) -> pd.DataFrame:
    """One row per group: merit, exposure, exposure over merit (with SEs), CTR, sample sizes."""
    return _group_rows(_totals(requests, outcome), requests.position_bias, min_relevant)


def _summary(totals: _MethodTotals, groups: tuple[str, str]) -> dict:
    g0, g1 = groups
    n, k = totals.n, totals.k
    a0, b0, a1, b1 = (totals.sum(g, c) for g in groups for c in ("clicks", "relevant"))
    with np.errstate(divide="ignore", invalid="ignore"):  # a group without clicks: a ratio of 0 or inf, no SE
        ratio = float(np.float64(a0) / b0 / (np.float64(a1) / b1))
    # Delta method on log(ratio), clustered by request (both groups share requests): z = a0/A0 - b0/B0 - a1/A1 + b1/B1
    # per request; times A0 B0 A1 B1 its coefficients are integers, so sum(z^2) is an exact integer quadratic form of
    # the products over requests, divided once.
    scale = a0 * b0 * a1 * b1
    terms = [((g0, "clicks"), scale // a0), ((g0, "relevant"), -scale // b0), ((g1, "clicks"), -scale // a1),
             ((g1, "relevant"), scale // b1)]
    squares = sum(ci * cj * totals.product(*i, *j) for i, ci in terms for j, cj in terms)
    se = ratio * np.sqrt(n / (n - 1) * (squares / (scale * scale))) if scale else float("nan")
    clicked0, clicked1 = (totals.clicked(g) for g in groups)
    ks = stats.ks_2samp(clicked0, clicked1)
    # every candidate has a group: a request's clicks are its groups' clicks, and it shows k candidates
    clicks = sum(totals.sum(g, "clicks") for g in totals.groups)
    clicks_squared = sum(totals.product(g, "clicks", h, "clicks") for g in totals.groups for h in totals.groups)
    ctr, ctr_se = _ratio_se(clicks, n * k, clicks_squared, k * clicks, n * k * k, n)
    return {
        "method": totals.name,
        "alpha": totals.alpha,
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


def reference_pairs(totals: _MethodTotals) -> list[tuple[str, str]]:
    """(group, reference) for every other group; the reference is the group with the most impressions (ties: the
    last label), so that with the simulator's two groups the summary stays group "0" / group "1"."""
    sizes = {g: totals.sum(g, "impressions") for g in totals.groups}
    reference = max(sorted(sizes), key=lambda g: (sizes[g], g))
    return [(g, reference) for g in sorted(sizes) if g != reference]


def method_summary(requests: HeldOutRequests, outcome: MethodOutcome, groups: tuple[str, str]) -> dict:
    """Between-group comparison for one method: exposure/merit ratio gap (SE), KS distance, CTR (SE)."""
    return _summary(_totals(requests, outcome), groups)


def _positions(totals: _MethodTotals) -> pd.DataFrame:
    frames = []
    for group in totals.groups:
        counts = totals.relevant_positions[group][1:]
        frames.append(pd.DataFrame({"method": totals.name, "alpha": totals.alpha, "group": group,
                                    "position": np.arange(1, totals.k + 1), "n_relevant": counts,
                                    "share": counts / max(counts.sum(), 1)}))
    return pd.concat(frames, ignore_index=True)


@dataclasses.dataclass
class FigureData:
    """What figure 1 draws of one method, per group: the fair scores of clicked items and the share of the
    group's Y(1)=1 items at each position (kept instead of the method's (n, K) outcome arrays)."""

    name: str
    clicked: dict[str, np.ndarray]
    position_share: dict[str, np.ndarray]


def _figure_data(totals: _MethodTotals) -> FigureData:
    clicked, share = {}, {}
    for group in totals.groups:
        clicked[group] = totals.clicked(group)
        share[group] = totals.relevant_positions[group][1:] / max(totals.relevant_positions[group].sum(), 1)
    return FigureData(totals.name, clicked, share)


def figure_data(requests: HeldOutRequests, outcome: MethodOutcome) -> FigureData:
    return _figure_data(_totals(requests, outcome))


FIGURE_METHODS = ("raw", "unweighted", "weighted")


def evaluate_methods(
    requests: HeldOutRequests | Iterable[HeldOutRequests], methods: Mapping[str, tuple[Scorer | None, float | None]],
    figure_methods: tuple[str, ...] = FIGURE_METHODS,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, FigureData]]:
    """(per-group table, between-group summary, position distribution, figure data of `figure_methods`).

    `requests`: the held-out requests, whole or as consecutive chunks (`held_out_chunks`). Each chunk is
    re-ranked under every method and reduced to sums of per-request counts and of their products, counts by
    position and clicked scores before the next is drawn, so memory holds one chunk's outcome, a fixed number of
    sums per method and the clicked items' fair scores."""
    chunks = [requests] if isinstance(requests, HeldOutRequests) else requests
    totals: dict[str, _MethodTotals] = {}
    w = None
    for chunk in chunks:
        labels = pd.Categorical(chunk.groups.ravel())
        w = chunk.position_bias
        for name, (scorer, alpha) in methods.items():
            outcome = run_method(chunk, name, scorer, alpha, labels)
            totals.setdefault(name, _MethodTotals(name, alpha, chunk.scores.shape[1])).add(chunk, outcome)
            del outcome
    groups = tuple(next(iter(totals.values())).groups) if totals else ()
    if len(groups) < 2:
        raise ValueError(f"the between-group summary compares groups; held-out requests have {list(groups)}")
    per_group = pd.concat([_group_rows(t, w) for t in totals.values()], ignore_index=True)
    pairs = reference_pairs(next(iter(totals.values())))
    summary = pd.DataFrame([_summary(t, pair) for t in totals.values() for pair in pairs])
    positions = pd.concat([_positions(t) for t in totals.values()], ignore_index=True)
    figures = {name: _figure_data(t) for name, t in totals.items() if name in figure_methods}
    return per_group, summary, positions, figures
