"""Exposure parity from click logs: does each group get attention in proportion to its merit?

Examination hypothesis: P(click | item i at position k) = w_k · r_i, with w_k the examination (position-bias)
curve and r_i the item's relevance (its click rate at position 1). For the impressions of group c:

    exposure E_c = mean of w_{position}                  (attention the ranking gave the group)
    merit    M_c = mean of click / w_{position}          (unbiased for mean relevance: inverse examination)
    ratio_c  = E_c / M_c = Σ w / Σ (click / w)          (exposure per unit of merit; Singh & Joachims'
                                                          disparate exposure, Nandy et al.'s Corollary 1 parity)

and a pair compares ratio_a / ratio_ref (1 = proportional; the scale of w cancels). Inference is on the log
scale: log ratio_c is a smooth function of two sums over impressions, with per-impression influence
a_{c,k} - click · b_{c,k}, a = w_k / Σw, b = (1 / w_k) / Σ(click / w). Influence totals per cluster give the
cluster-robust (sandwich) covariance of the K log ratios. Exposure is zero-sum: the examination a list hands out is
fixed by its slots, so a cluster (an item) whose impressions got X = Σ (w - mean w) more than average took it from
every impression of the log, and moves each group's log exposure by -d_c X, d_c = (N_c / N) / Σ_c w. Without that
term the largest group's own value is over-confident (its popular items mostly take exposure from its other items,
which the sandwich would count as the group's gain; Monte Carlo: SE / SD 0.6-0.8 without, 0.8-1.0 with); ratios
between groups change little. Each cluster's own total is divided by sqrt(1 - h), h the cluster's
share of its group's merit sum (CR2, Bell & McCaffrey: a popular item pulls the estimate towards itself, so its
own residual comes out too small; with equal clusters this is the group's G_c / (G_c - 1)); two-way clustering
(items and requests) uses V_1 + V_2 - V_12 (Cameron, Gelbach & Miller 2011), falling back to the larger one-way
variance when that difference is not positive. An estimated examination curve adds its own delta-method term
(`exposure_examination`). Verdicts compare |log ratio| with a margin δ (default log 1.25: ratios within
[0.8, 1.25] are too small to matter, the four-fifths band) through `equivalence.classify_gaps`, Holm-adjusted
over the family of pairs.

Everything runs on sufficient statistics: impressions and clicks per (group, position) and the K×K cross
products of per-cluster influence totals, so a warehouse computes them with two GROUP BYs
(`exposure_parity_from_aggregates`); `exposure_parity` builds them from arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.equivalence import classify_gaps
from fair_pipeline.audit.stats.exposure_clusters import cluster_dimensions
from fair_pipeline.audit.stats.exposure_df import effective_df, lone_click_fourth
from fair_pipeline.audit.stats.exposure_examination import Examination, as_examination, check_positions
from fair_pipeline.audit.stats.inference import holm
from fair_pipeline.audit.stats.records import records
from fair_pipeline.audit.stats.small_sample import t_wald
from fair_pipeline.audit.stats.validation import AuditInputError, as_groups, as_labels

DEFAULT_EXPOSURE_MARGIN = float(np.log(1.25))
DEFAULT_MIN_CLICKS = 10  # clicks a group needs before its merit (a sum of 1/w over clicks) is estimated
PAIR_FAMILIES = ("reference", "all")


@dataclass(frozen=True)
class ClusterSums:
    """One clustering dimension: raw cross products Σ_g T_g T_g' of the per-cluster influence totals (K×K),
    the number of clusters G and, per group, how many clusters hold at least one of its impressions; ``fourth``
    (K×K, optional): Σ_g T_a⁴ on the diagonal and Σ_g (T_a - T_b)⁴ off it, for the effective number of clusters
    (None: normal critical values)."""

    name: str
    cross: np.ndarray
    n_clusters: int
    per_group: np.ndarray
    fourth: np.ndarray | None = None
    leverage_adjusted: bool = False  # totals already divided by sqrt(1 - h) (CR2): no G / (G - 1) factor

    def covariance(self) -> np.ndarray:
        g = self.n_clusters
        if g < 2:
            return np.full_like(self.cross, np.nan)
        return self.cross if self.leverage_adjusted else self.cross * (g / (g - 1))


@dataclass
class ExposureParity:
    """``per_group``: one row per group; ``pairs``: one row per compared pair; effect = log ratio."""

    per_group: pd.DataFrame
    pairs: pd.DataFrame
    reference: object
    variance_estimand: str
    confidence: float
    margin: float
    notes: list = field(default_factory=list)
    examination: Examination | None = None
    examination_gradient: np.ndarray | None = None  # K×J: d log(E_c / M_c) / d log w_j
    cluster_totals: dict = field(default_factory=dict)  # `exposure_parity(keep_totals=True)`: name -> clusters × groups

    def to_dict(self) -> dict:
        return {"per_group": records(self.per_group), "pairs": records(self.pairs), "reference": self.reference,
                "variance_estimand": self.variance_estimand, "confidence": self.confidence, "margin": self.margin,
                "notes": list(self.notes)}


def influence_coefficients(impressions: np.ndarray, clicks: np.ndarray, weights: np.ndarray):
    """(a, b), each K×J: an impression of group c at position k with click y has influence a[c,k-1] - y·b[c,k-1]
    on log(E_c / M_c). Groups without clicks (no merit) get zeros: they are not estimable."""
    w = np.where(np.isnan(weights), 1.0, weights)  # positions without impressions carry no weight anyway
    s_w = impressions @ w
    s_m = clicks @ (1.0 / w)
    ok = (s_w > 0) & (s_m > 0)
    a = np.where(ok[:, None], w[None, :] / np.where(ok, s_w, 1.0)[:, None], 0.0)
    b = np.where(ok[:, None], (1.0 / w)[None, :] / np.where(ok, s_m, 1.0)[:, None], 0.0)
    return a, b


def displacement_coefficients(impressions: np.ndarray, clicks: np.ndarray, weights: np.ndarray):
    """(d, mean_w): a cluster whose impressions got X = Σ (w - mean_w) more exposure than average impressions took
    it from every impression of the log pro rata (the examination a list hands out is fixed by its slots), so it
    moves group c's log exposure by -d_c X, d_c = (N_c / N) / Σ_c w; mean_w = exposure per impression over all
    groups. Not-estimable groups (no clicks) get d = 0 as their other coefficients."""
    w = np.where(np.isnan(weights), 1.0, weights)
    n_c, s_w, s_m = impressions.sum(axis=1), impressions @ w, clicks @ (1.0 / w)
    total = float(n_c.sum())
    ok = (s_w > 0) & (s_m > 0)
    d = np.where(ok, n_c / total / np.where(ok, s_w, 1.0), 0.0)
    return d, float(impressions.sum(axis=0) @ w / total)


def cluster_totals(cluster_codes, group_codes, position_index, clicks, a, b, logged_index=None, excess=None,
                   d=None) -> tuple[np.ndarray, np.ndarray]:
    """(G×K CR2-adjusted influence totals of each group's log ratio per cluster, G×K whether the cluster holds
    impressions of the group), clusters in the order of ``np.unique(cluster_codes)``.
    ``position_index``: 0-based slot under the audited ranking (exposure); ``logged_index``: the slot the click
    was logged at (merit; default the same); ``excess`` (per impression, w - mean_w) and ``d``
    (`displacement_coefficients`): the exposure a cluster takes from every group (None: left out)."""
    k = a.shape[0]
    codes = np.unique(np.asarray(cluster_codes), return_inverse=True)[1].ravel()
    g = int(codes.max()) + 1
    logged = position_index if logged_index is None else logged_index
    flat = codes * k + group_codes
    share_e = np.bincount(flat, weights=a[group_codes, position_index], minlength=g * k).reshape(g, k)
    share_m = np.bincount(flat, weights=clicks * b[group_codes, logged], minlength=g * k).reshape(g, k)
    totals = (share_e - share_m) * leverage_factor(share_m)
    if excess is not None:
        totals = totals - np.bincount(codes, weights=excess, minlength=g)[:, None] * np.asarray(d)[None, :]
    return totals, np.bincount(flat, minlength=g * k).reshape(g, k) > 0


MAX_LEVERAGE = 0.99  # a cluster holding (nearly) all of a group's merit: its factor is capped at 10; the df (~1) and
#                      the t critical value then carry the uncertainty


def leverage_factor(merit_share) -> np.ndarray:
    """CR2's 1 / sqrt(1 - h) with h a cluster's share of its group's merit sum Σ click / w: the ratio estimator's
    hat value (Σw / Σ(click / w) is a through-the-origin regression of exposure on merit)."""
    return 1.0 / np.sqrt(1.0 - np.minimum(np.asarray(merit_share, dtype=np.float64), MAX_LEVERAGE))


def fourth_sums(totals: np.ndarray) -> np.ndarray:
    """`ClusterSums.fourth` of per-cluster totals (G×K): Σ (T_a - T_b)⁴ expanded into K×K products."""
    t2, t3 = totals**2, totals**3
    s4 = (t2 * t2).sum(axis=0)
    diff = s4[:, None] + s4[None, :] - 4 * (t3.T @ totals) - 4 * (totals.T @ t3) + 6 * (t2.T @ t2)
    np.fill_diagonal(diff, s4)
    return np.maximum(diff, 0.0)


def fourth_from_differences(d4: np.ndarray) -> np.ndarray:
    """`ClusterSums.fourth` from D[a, b] = Σ over clusters holding both a and b of (T_a - T_b)⁴ - T_a⁴ - T_b⁴
    (an inner join of per-cluster totals, as SQL computes it; D[a, a] = -2 Σ T_a⁴)."""
    s4 = -np.diag(d4) / 2.0
    out = d4 + s4[:, None] + s4[None, :]
    np.fill_diagonal(out, s4)
    return np.maximum(out, 0.0)


def _contrast_variance(dims: list[ClusterSums], lam: np.ndarray) -> float:
    """Sandwich variance of λ'·log ratios: one-way, or two-way V_1 + V_2 - V_12 (dims[2] is the intersection)."""
    v = [float(lam @ d.covariance() @ lam) for d in dims]
    if len(dims) == 1:
        return v[0]
    combined = v[0] + v[1] - v[2]
    return combined if combined > 0 else max(v[0], v[1])


def _impression_sums(n: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, weights) -> ClusterSums:
    """Impressions as clusters (CR2 as for any clusters), from the (group, position) cells: an unclicked impression
    of group g at slot k has own total a[g, k] and no merit share, a clicked one a - b and share b (y is 0/1); both
    take d · (w_k - mean_w) from every group (`displacement_coefficients`)."""
    k = n.shape[0]
    d, mean_w = displacement_coefficients(n, y, weights)
    excess = np.where(np.isnan(weights), 1.0, weights) - mean_w
    cross = np.zeros((k, k))
    for own, count in ((a, n - y), ((a - b) * leverage_factor(b), y)):
        for g in range(k):
            totals = -excess[:, None] * d[None, :]  # (J, K): one row per slot
            totals[:, g] += own[g]
            cross += (totals * count[g][:, None]).T @ totals
    return ClusterSums("impression", cross, int(n.sum()), n.sum(axis=1), leverage_adjusted=True)


def _estimability(n, clicks, per_cluster: list[np.ndarray], min_clicks: int):
    notes = []
    for c in range(n.size):
        why = []
        if clicks[c] < min_clicks:
            why.append(f"{int(clicks[c])} clicks (need >= {min_clicks})")
        for counts in per_cluster:
            if counts[c] < 2:
                why.append(f"{int(counts[c])} cluster(s) (need >= 2)")
        notes.append("not estimable: " + ", ".join(why) if why else "")
    return np.array([not s for s in notes]), notes


def _pairs_of(k: int, ref: int, family: str) -> list[tuple[int, int]]:
    if family == "reference":
        return [(c, ref) for c in range(k) if c != ref]
    return [(a, b) for a, b in combinations(range(k), 2)]


def _variance_estimand(dims: list[ClusterSums], examination: Examination) -> str:
    if not dims or dims[0].name == "impression":
        clustering = "every impression treated as independent: for these items and requests under new clicks"
    elif len(dims) == 1:
        clustering = f"clustered by {dims[0].name}: for new {dims[0].name} values drawn like these"
    else:
        clustering = (f"two-way clustered by {dims[0].name} and {dims[1].name}: for new values of both "
                      "(Cameron-Gelbach-Miller)")
    return f"{clustering}; {examination.description}"


def exposure_parity_from_aggregates(cells: pd.DataFrame, clusters: list[ClusterSums] | None, examination, *,
                                    reference=None, pairs: str = "reference", confidence: float = 0.95,
                                    margin: float = DEFAULT_EXPOSURE_MARGIN, min_clicks: int = DEFAULT_MIN_CLICKS,
                                    examination_covariance=None, examination_df=None,
                                    group_order=None) -> ExposureParity:
    """Exposure parity from (group, position, impressions, clicks) cells and per-dimension cluster sums.

    ``impressions`` counts the impressions the audited ranking puts at ``position`` (exposure); ``clicks`` counts
    the clicks logged at ``position`` (merit). For the logged ranking both are the logged slots.

    ``clusters``: None (impressions independent; computed from the cells) or one / three `ClusterSums` (two-way:
    dimension 1, dimension 2, their intersection), built with `influence_coefficients` of these cells, their
    rows and columns in ``group_order`` (default: the cells' groups sorted as text).
    """
    if pairs not in PAIR_FAMILIES:
        raise AuditInputError(f"pairs must be one of {PAIR_FAMILIES}, got {pairs!r}")
    if not np.isfinite(margin) or margin <= 0:
        raise AuditInputError(f"margin (δ on the log-ratio scale) must be positive, got {margin}")
    exam = as_examination(examination, examination_covariance, examination_df)
    missing = {"group", "position", "impressions", "clicks"} - set(cells.columns)
    if missing:
        raise AuditInputError(f"exposure cells lack column(s) {sorted(missing)}")
    labels = np.array(sorted(pd.unique(cells["group"]), key=str) if group_order is None else list(group_order),
                      dtype=object)
    if len(set(cells["group"]) - set(labels)):
        raise AuditInputError("group_order misses groups present in the cells")
    k, j = labels.size, exam.weights.size
    positions = cells["position"].to_numpy(dtype=np.int64)
    check_positions(exam, np.unique(positions))
    gi = pd.Index(labels).get_indexer(cells["group"])
    n = np.zeros((k, j))
    y = np.zeros((k, j))
    np.add.at(n, (gi, positions - 1), cells["impressions"].to_numpy(dtype=np.float64))
    np.add.at(y, (gi, positions - 1), cells["clicks"].to_numpy(dtype=np.float64))
    if k < 2:
        raise AuditInputError(f"exposure parity compares groups; got {k} group(s): {labels.tolist()}")
    w = np.where(np.isnan(exam.weights), 1.0, exam.weights)
    a, b = influence_coefficients(n, y, exam.weights)
    if not clusters:
        clusters = [_impression_sums(n, y, a, b, exam.weights)]
    if len(clusters) not in (1, 3):
        raise AuditInputError(f"clusters must be one dimension or two plus their intersection, got {len(clusters)}")
    n_c, y_c = n.sum(axis=1), y.sum(axis=1)
    per_cluster = [d.per_group for d in clusters[:2]] if clusters[0].name != "impression" else []
    estimable, notes = _estimability(n_c, y_c, per_cluster, min_clicks)
    with np.errstate(divide="ignore", invalid="ignore"):
        exposure = (n @ w) / n_c
        merit = (y @ (1.0 / w)) / n_c
        log_ratio = np.where(estimable, np.log(exposure) - np.log(merit), np.nan)
    gradient = n * w / (n @ w)[:, None] + y / w / np.where(y @ (1 / w) > 0, y @ (1 / w), 1.0)[:, None]
    eye = np.eye(k)
    var_cl = np.array([_contrast_variance(clusters, eye[c]) for c in range(k)])
    var_ex = np.array([exam.variance(gradient[c])[0] for c in range(k)])
    var_group = np.where(estimable, var_cl + var_ex, np.nan)
    lone = lone_click_fourth(y, b)
    df_group = np.array([effective_df(clusters, eye[c], var_cl[c], var_ex[c], exam.df, lone) if estimable[c]
                         else np.nan for c in range(k)])
    group_t = t_wald(log_ratio, var_group, df_group, confidence)
    se_group = group_t["se"]
    per_group = pd.DataFrame({"group": labels, "n": n_c.astype(np.int64), "clicks": y_c.astype(np.int64)})
    for d, col in zip(clusters[:2], ("n_clusters", "n_clusters_2")):
        if d.name != "impression":
            per_group[col] = np.asarray(d.per_group, dtype=np.int64)
    per_group = per_group.assign(
        exposure=exposure, merit=merit, exposure_over_merit=np.exp(log_ratio), se_log=se_group,
        ci_low=np.exp(group_t["ci_low"]), ci_high=np.exp(group_t["ci_high"]), df=df_group,
        estimable=estimable, note=notes)
    ref = _reference(labels, n_c, reference)
    pair_idx = _pairs_of(k, ref, pairs)
    rows = []
    for c, r in pair_idx:
        lam = eye[c] - eye[r]
        ok = bool(estimable[c] and estimable[r])
        v_cl = _contrast_variance(clusters, lam) if ok else np.nan
        v_ex = exam.variance(gradient[c] - gradient[r])[0] if ok else np.nan
        df = effective_df(clusters, lam, v_cl, v_ex, exam.df, lone) if ok else np.nan
        est = log_ratio[c] - log_ratio[r] if ok else np.nan
        why = "; ".join(f"{labels[i]!s}: {notes[i]}" for i in (c, r) if notes[i])
        rows.append((labels[c], labels[r], est, v_cl + v_ex, df, why))
    table = pd.DataFrame(rows, columns=["group", "reference", "log_ratio", "variance", "df", "note"])
    test = t_wald(table["log_ratio"].to_numpy(), table["variance"].to_numpy(), table["df"].to_numpy(), confidence)
    p_holm = holm(test["p_value"]) if len(table) > 1 else test["p_value"]
    verdict, p_tost = classify_gaps(table["log_ratio"].to_numpy(), test["se"], margin,
                                    p_adjusted=p_holm, confidence=confidence, df=test["df"])
    table = pd.DataFrame({
        "group": table["group"], "reference": table["reference"], "ratio": np.exp(table["log_ratio"]),
        "ci_low": np.exp(test["ci_low"]), "ci_high": np.exp(test["ci_high"]), "log_ratio": table["log_ratio"],
        "se_log": test["se"], "df": table["df"], "p_value": test["p_value"], "p_holm": p_holm, "margin": margin,
        "p_tost": p_tost,
        "verdict": verdict, "note": table["note"]})
    return ExposureParity(per_group, table, labels[ref], _variance_estimand(clusters, exam), confidence, margin,
                          examination=exam, examination_gradient=gradient)


def _reference(labels: np.ndarray, n: np.ndarray, reference) -> int:
    if reference is None:
        return int(np.argmax(n))  # the largest group: the most precise baseline
    hits = [i for i, label in enumerate(labels) if label == reference]
    if not hits:
        raise AuditInputError(f"reference group {reference!r} is not among the groups {labels.tolist()[:20]}")
    return hits[0]


def _as_positions(positions, name: str, n: int | None = None) -> np.ndarray:
    pos = np.asarray(positions)
    if pos.ndim != 1 or pos.size == 0 or (n is not None and pos.size != n):
        raise AuditInputError(f"{name} must be a non-empty 1-d array{'' if n is None else f' of length {n}'}, "
                              f"got shape {pos.shape}")
    if not np.issubdtype(pos.dtype, np.integer):
        if not (np.issubdtype(pos.dtype, np.floating) and np.all(np.isfinite(pos)) and np.all(pos == np.round(pos))):
            raise AuditInputError(f"{name} must be whole numbers (1 = top), got dtype {pos.dtype}")
    return pos.astype(np.int64)


def exposure_parity(positions, clicks, sensitive_features, examination, *, clusters=None, reference=None,
                    pairs: str = "reference", confidence: float = 0.95, margin: float = DEFAULT_EXPOSURE_MARGIN,
                    min_clicks: int = DEFAULT_MIN_CLICKS, examination_covariance=None, examination_df=None,
                    ranked_positions=None, keep_totals: bool = False) -> ExposureParity:
    """Exposure per unit of merit of every group, and its ratio to a reference group's, with cluster-robust CIs.

    ``positions``: displayed slot of each impression (1 = top); ``clicks``: 0/1; ``sensitive_features``: group
    label per impression (missing labels are an error: label them, e.g. "unknown", to audit them);
    ``examination``: weights (``examination[k-1]`` for position k) or the position-bias stage's curve (its SEs
    enter the CI); ``clusters``: an array (e.g. item ids), a tuple of two or a dict ``{"item_id": ..,
    "request_id": ..}`` for two-way clustering (or their `exposure_clusters.cluster_dimensions`, factorized once for
    several audits of the same impressions); ``reference``: the baseline group (default: the largest);
    ``pairs``: "reference" (each group vs the reference) or "all" (every pair), Holm-adjusted as one family;
    ``margin``: δ on the log-ratio scale; a group with fewer than ``min_clicks`` clicks or fewer than two
    clusters is reported as not estimable (it stays in both tables).

    Off-policy (another ranking of the same logged requests): ``ranked_positions`` are the slots the audited
    ranking gives each impression; exposure reads them, merit still reads the logged ``positions`` and clicks.
    ``examination_df``: the df of an estimated curve's uncertainty (default: the clicks behind it, from a table's
    `clicks`; unknown: the clustered part's df). ``keep_totals``: keep each dimension's per-cluster influence totals
    (``cluster_totals``, rows the cluster values, columns the groups) for joining with other estimates' totals.
    """
    pos = _as_positions(positions, "positions")
    ranked = pos if ranked_positions is None else _as_positions(ranked_positions, "ranked_positions", pos.size)
    y = as_labels(clicks, pos.size, "clicks").astype(np.float64)
    codes, labels = as_groups(sensitive_features, pos.size)
    exam = as_examination(examination, examination_covariance, examination_df)
    check_positions(exam, np.unique(np.concatenate([pos, ranked])))
    k, j = labels.size, exam.weights.size
    n = np.zeros((k, j))
    c = np.zeros((k, j))
    np.add.at(n, (codes, ranked - 1), 1.0)
    np.add.at(c, (codes, pos - 1), y)
    gi, pi = np.nonzero((n > 0) | (c > 0))
    cells = pd.DataFrame({"group": labels[gi], "position": pi + 1, "impressions": n[gi, pi], "clicks": c[gi, pi]})
    dims = list(cluster_dimensions(clusters, pos.size, labelled=keep_totals).dims)
    sums, kept = None, {}
    if dims:
        a, b = influence_coefficients(n, c, exam.weights)
        d, mean_w = displacement_coefficients(n, c, exam.weights)
        excess = np.where(np.isnan(exam.weights), 1.0, exam.weights)[ranked - 1] - mean_w
        parts = (codes, ranked - 1, y, a, b, pos - 1, excess, d)
        sums = []
        for name, arr, uniques in dims:  # factorized codes: np.unique keeps their order
            totals, present = cluster_totals(arr, *parts)
            sums.append(ClusterSums(name, totals.T @ totals, totals.shape[0], present.sum(axis=0),
                                    fourth_sums(totals), leverage_adjusted=True))
            if keep_totals:
                kept[name] = pd.DataFrame(totals, index=uniques, columns=labels)
    result = exposure_parity_from_aggregates(
        cells, sums, exam, reference=reference, pairs=pairs,
        confidence=confidence, margin=margin, min_clicks=min_clicks, group_order=labels)
    result.cluster_totals = kept
    return result
