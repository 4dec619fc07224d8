"""Pairwise ranking accuracies within queries (Narasimhan et al. 2020, "Pairwise Fairness").

Pairs are formed only inside a query, from an item labelled better (label 1) and one labelled
worse (label 0); a pair is ranked correctly when the better item scores higher (ties count 1/2,
as in the AUC). Reported, each with its pair count, number of queries, SE and CI:

* ``matrix``: A_{Gi>Gj} = P(f(x) > f(x') | y > y', x in Gi, x' in Gj)                      (1)
* ``marginals``: A_{Gi>:} (Gi is the better item) and A_{:>Gi} (Gi is the worse item)    (2, 3)
* ``parity``: pairwise statistical parity P(f(x) > f(x') | x in Gi, x' in Gj), labels ignored (8)
* ``continuous``: A_> = P(f(x) > f(x') | y > y', z > z') and A_< (z < z') for a continuous
  protected attribute z, with their difference                                          (9-11)

Every estimate is a ratio (correct pairs / pairs) summed over queries. Queries are the
independent units, so the SE is the cluster (linearization) SE of a ratio estimator:
var = Q/(Q-1) sum_q (C_q - A T_q)^2 / (sum_q T_q)^2. Counting is sort-based: O(n log n) per query
for the group statistics, O(n log^2 n) for the continuous attribute; never O(n^2).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.equivalence import EQUIVALENCE_COLUMNS, add_equivalence
from fair_pipeline.audit.stats.inference import holm, wald
from fair_pipeline.audit.stats.pairwise_cells import TwoWayMoments
from fair_pipeline.audit.stats.pairwise_clustered import PairwiseClusters, clustered_tables, score_blocks
from fair_pipeline.audit.stats.pairwise_moments import pairwise_contrasts
from fair_pipeline.audit.stats.records import records
from fair_pipeline.audit.stats.validation import AuditInputError, as_groups, as_labels, as_scores


TWO_WAY_DIMS = ("n_items", "n_queries")  # clusters holding each figure's pairs, item then query


@dataclass
class PairwiseResult:
    matrix: pd.DataFrame
    marginals: pd.DataFrame
    parity: pd.DataFrame
    overall: pd.DataFrame
    continuous: pd.DataFrame | None
    gaps: pd.DataFrame | None = None  # cross-group gaps A_{a>b} - A_{b>a} with SE, p, Holm and verdict

    def to_dict(self) -> dict:
        names = ["matrix", "marginals", "parity", "overall"] + [n for n in ("continuous", "gaps")
                                                                 if getattr(self, n) is not None]
        return {name: records(getattr(self, name)) for name in names}


def _ratio(C: np.ndarray, T: np.ndarray):
    """Ratio of sums over queries (axis 0), its cluster-robust variance and query count."""
    A, var, Tt, q = _ratio_from_sums(*_query_sums(C, T))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (C - A * T) / np.where(Tt > 0, Tt, 1.0)
    return A, var, Tt, q, e


def _query_sums(C: np.ndarray, T: np.ndarray) -> tuple:
    """Sufficient statistics over queries of a ratio estimator (summable across query chunks)."""
    return (C.sum(axis=0), T.sum(axis=0), (C * C).sum(axis=0), (C * T).sum(axis=0),
            (T * T).sum(axis=0), (T > 0).sum(axis=0))


def _ratio_from_sums(Ct, Tt, CC, CT, TT, q):
    """A = sum C / sum T; var = q/(q-1) sum_q (C_q - A T_q)^2 / (sum T)^2 (NaN if q < 2)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        A = Ct / Tt
        ss = np.maximum(CC - 2 * A * CT + A * A * TT, 0.0)
        var = q / (q - 1) * ss / Tt**2
    var = np.where(q > 1, var, np.nan)
    return A, var, Tt, q


def _row(estimate, var, pairs, queries, confidence):
    w = wald(estimate, var, confidence, null=0.5)
    ok = bool(pairs > 0 and queries > 1)
    return {"accuracy": float(estimate) if pairs > 0 else np.nan, "se": float(w["se"]),
            "ci_low": float(w["ci_low"]), "ci_high": float(w["ci_high"]),
            "n_pairs": float(pairs), "n_queries": int(queries), "estimable": ok}


def _below_within_query(counts: np.ndarray, block_query: np.ndarray) -> np.ndarray:
    """Per block, the counts in lower-scoring blocks of the same query (exclusive prefix sums)."""
    excl = np.cumsum(counts, axis=0) - counts
    first = np.flatnonzero(np.r_[True, block_query[1:] != block_query[:-1]])
    start = np.repeat(first, np.diff(np.r_[first, block_query.size]))
    return excl - excl[start]


def _per_query(values: np.ndarray, block_query: np.ndarray, n_queries: int) -> np.ndarray:
    """Sum block rows into query rows (all queries, including ones without blocks)."""
    out = np.zeros((n_queries,) + values.shape[1:])
    np.add.at(out, block_query, values)
    return out


def _cross_counts(qcode, s, cells, n_cells, better, worse, weights=None):
    """Per query: for each (better cell a, worse cell b), pairs and correctly ordered pairs.

    ``weights``: multiplicity of each row (rows of an aggregate table), default 1.
    """
    order, block, bq = score_blocks(qcode, s)
    B = bq.size
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[order]
    counts = np.bincount(block * n_cells + cells[order], weights=w, minlength=B * n_cells)
    counts = counts.reshape(B, n_cells).astype(np.float64)
    below = _below_within_query(counts, bq)
    hi, lo = counts[:, better], counts[:, worse]
    credit = below[:, worse] + 0.5 * lo  # worse items strictly below + half the tied ones
    Q = int(qcode.max()) + 1
    C = _per_query(hi[:, :, None] * credit[:, None, :], bq, Q)
    tot_hi, tot_lo = _per_query(hi, bq, Q), _per_query(lo, bq, Q)
    T = tot_hi[:, :, None] * tot_lo[:, None, :]
    return C, T


def _dominance_counts(qcode, z, s, left, right, right_scores_higher: bool):
    """Per query: pairs (l in left, r in right) with z_l < z_r, and those ranked correctly.

    Correct means s_r > s_l if ``right_scores_higher`` else s_r < s_l (ties 1/2). A bottom-up
    merge over the bits of the within-query rank of z: every pair with z_l < z_r is split at
    exactly one bit level (the highest bit where their ranks differ), where it is counted by a
    sort on (bucket, s). Pairs with equal z are never counted.
    """
    order = np.lexsort((z, qcode))
    qs, zs = qcode[order], z[order]
    new_q = np.r_[True, qs[1:] != qs[:-1]]
    new_z = new_q | np.r_[True, zs[1:] != zs[:-1]]
    dense = np.cumsum(new_z) - 1
    rank = np.empty(z.size, dtype=np.int64)
    rank[order] = dense - (dense[new_q])[np.cumsum(new_q) - 1]  # dense rank of z within query
    Q = int(qcode.max()) + 1
    C, T = np.zeros(Q), np.zeros(Q)
    for k in range(int(rank.max()).bit_length()):
        side = (rank >> k) & 1
        L = left & (side == 0)
        R = right & (side == 1)
        keep = L | R
        if not (L.any() and R.any()):
            continue
        bucket = (rank[keep] >> (k + 1))
        q = qcode[keep]
        # bucket ids unique across queries
        key = q * (int(bucket.max()) + 1) + bucket
        cells = np.where(L[keep], 0, 1)
        _, key = np.unique(key, return_inverse=True)
        Ck, Tk = _cross_counts(key, s[keep], cells, 2,
                               better=[1] if right_scores_higher else [0],
                               worse=[0] if right_scores_higher else [1])
        kq = np.zeros(key.max() + 1, dtype=np.int64)
        kq[key] = q
        np.add.at(C, kq, Ck[:, 0, 0])
        np.add.at(T, kq, Tk[:, 0, 0])
    return C, T


def query_counts(qcode, s, codes, y, n_groups: int, weights=None) -> tuple:
    """Per query (codes 0..Q-1): C, T (Q, G, G) correct pairs and pairs by (better group, worse group), and the
    parity counts Cs, Ts (Q, G, G: pairs of items of groups i, j, and those where the item of i scores higher)."""
    G = n_groups
    C, T = _cross_counts(qcode, s, codes * 2 + y, 2 * G, weights=weights,
                         better=[2 * g + 1 for g in range(G)], worse=[2 * g for g in range(G)])
    Cs, Ts = _cross_counts(qcode, s, codes, G, better=list(range(G)), worse=list(range(G)), weights=weights)
    return C, T, Cs, Ts


class PairwiseAccumulator:
    """Group pairwise accuracies from chunks of whole queries (rows or aggregated rows).

    Keeps only sums over queries, so a database cursor ordered by query can feed it in chunks.
    """

    def __init__(self, levels):
        self.levels = np.asarray(levels, dtype=object)
        self.sums: dict = {}
        self.n_queries = 0

    def _add(self, name, C, T):
        new = _query_sums(C, T)
        old = self.sums.get(name)
        self.sums[name] = new if old is None else tuple(a + b for a, b in zip(old, new))

    def _add_cross(self, C, T):
        """Sums over queries of cell (a, b) times cell (b, a) (C C', C T', T T') and the queries holding either:
        what the clustered variance of the gap A_{a>b} - A_{b>a} needs (both ratios share the queries)."""
        Cs, Ts = C.transpose(0, 2, 1), T.transpose(0, 2, 1)
        new = ((C * Cs).sum(axis=0), (C * Ts).sum(axis=0), (T * Ts).sum(axis=0), ((T > 0) | (Ts > 0)).sum(axis=0))
        old = self.sums.get("cross")
        self.sums["cross"] = new if old is None else tuple(a + b for a, b in zip(old, new))

    def gaps(self, confidence: float = 0.95, margins=None) -> pd.DataFrame:
        """One row per unordered group pair: the cross-group gap A_{a>b} - A_{b>a} (Narasimhan et al.'s cross-group
        equal opportunity), its query-clustered SE (the linearization of `pairwise_gap.cross_group_gaps`, from the
        accumulated sums), CI, z, p, Holm p (> 2 groups), then effect, margin δ, TOST p and verdict."""
        G = self.levels.size
        Ct, Tt, CC, CT, TT, _ = self.sums["matrix"]
        X, Y, Z, U = self.sums["cross"]
        rows = []
        for a, b in combinations(range(G), 2):
            t1, t2, q = Tt[a, b], Tt[b, a], int(U[a, b])
            A1 = Ct[a, b] / t1 if t1 > 0 else np.nan
            A2 = Ct[b, a] / t2 if t2 > 0 else np.nan
            var = np.nan
            if t1 > 0 and t2 > 0 and q > 1:
                s11 = CC[a, b] - 2 * A1 * CT[a, b] + A1 * A1 * TT[a, b]
                s22 = CC[b, a] - 2 * A2 * CT[b, a] + A2 * A2 * TT[b, a]
                s12 = X[a, b] - A2 * Y[a, b] - A1 * Y[b, a] + A1 * A2 * Z[a, b]
                var = q / (q - 1) * max(s11 / t1**2 + s22 / t2**2 - 2 * s12 / (t1 * t2), 0.0)
            w = wald(A1 - A2, var, confidence)
            rows.append({"group_a": self.levels[a], "group_b": self.levels[b], "A_a>b": A1, "A_b>a": A2,
                         "gap": A1 - A2, **{k: float(v) for k, v in w.items()}, "n_pairs_ab": float(t1),
                         "n_pairs_ba": float(t2), "n_queries": q, "estimable": bool(np.isfinite(var))})
        gaps = pd.DataFrame(rows)
        if G > 2 and len(gaps):
            gaps["p_holm"] = holm(gaps["p_value"].to_numpy())
        return add_equivalence(gaps, "pairwise_accuracy", "gap", "se", margins=margins, confidence=confidence)

    def update(self, qcode, s, codes, y, weights=None) -> None:
        """Rows of complete queries: query codes, scores, group codes (0..G-1), bool labels."""
        G = self.levels.size
        qcode = np.unique(qcode, return_inverse=True)[1]
        self.add_counts(*query_counts(qcode, s, codes, y, G, weights))

    def add_counts(self, C, T, Cs, Ts) -> None:
        """Add queries given by their (queries, G, G) pairs T and correct pairs C (better item's group, worse
        item's group), and their parity counts Ts, Cs (labels ignored); `query_counts` makes them."""
        self.n_queries += len(C)
        self._add("matrix", C, T)
        self._add_cross(C, T)
        self._add("better", C.sum(2), T.sum(2))
        self._add("worse", C.sum(1), T.sum(1))
        self._add("overall", C.sum((1, 2)), T.sum((1, 2)))
        self._add("parity", Cs, Ts)

    def merge(self, other: PairwiseAccumulator) -> PairwiseAccumulator:
        """Add the sums of other queries (disjoint from these)."""
        for name, new in other.sums.items():
            old = self.sums.get(name)
            self.sums[name] = new if old is None else tuple(a + b for a, b in zip(old, new))
        self.n_queries += other.n_queries
        return self

    def tables(self, confidence: float = 0.95):
        if not self.sums or self.sums["overall"][1] == 0:
            raise AuditInputError(
                f"no query has both a label-1 and a label-0 item ({self.n_queries} queries): "
                f"pairwise accuracies need pairs inside queries")
        levels, G = self.levels, self.levels.size
        A, var, pairs, nq = _ratio_from_sums(*self.sums["matrix"])
        matrix = pd.DataFrame([{"group_better": levels[a], "group_worse": levels[b],
                                **_row(A[a, b], var[a, b], pairs[a, b], nq[a, b], confidence)}
                               for a in range(G) for b in range(G)])
        rows = []
        for role in ("better", "worse"):
            A, var, pairs, nq = _ratio_from_sums(*self.sums[role])
            for g in range(G):
                label = f"A_{{{levels[g]}>:}}" if role == "better" else f"A_{{:>{levels[g]}}}"
                rows.append({"group": levels[g], "role": role, "metric": label,
                             **_row(A[g], var[g], pairs[g], nq[g], confidence)})
        marginals = pd.DataFrame(rows)
        A, var, pairs, nq = _ratio_from_sums(*self.sums["overall"])
        overall = pd.DataFrame([{"metric": "pairwise accuracy (within-query AUC)",
                                 **_row(A, var, pairs, nq, confidence)}])
        A, var, pairs, nq = _ratio_from_sums(*self.sums["parity"])
        parity = pd.DataFrame([{"group_i": levels[i], "group_j": levels[j],
                                **{("p_i_above_j" if k == "accuracy" else k): v
                                   for k, v in _row(A[i, j], var[i, j], pairs[i, j], nq[i, j], confidence).items()}}
                               for i in range(G) for j in range(G) if i != j])
        return matrix, marginals, parity, overall


def add_query_counts(acc: PairwiseAccumulator, query_ids, groups, scores, n_pos, n_neg) -> None:
    """Feed aggregated rows of complete queries (query, group, score -> n_pos, n_neg) to ``acc``.

    Each row stands for ``n_pos`` label-1 and ``n_neg`` label-0 items with that score (what a SQL
    ``GROUP BY query, group, score`` returns); groups must be among ``acc.levels``.
    """
    code_of = {g: i for i, g in enumerate(acc.levels)}
    groups = np.asarray(groups, dtype=object)
    unknown = sorted({g for g in groups if g not in code_of}, key=str)
    if unknown:
        raise AuditInputError(f"groups {unknown} are not among the audited groups {list(acc.levels)}")
    codes = np.array([code_of[g] for g in groups], dtype=np.intp)
    qcode = pd.factorize(np.asarray(query_ids, dtype=object))[0]
    s = np.asarray(scores, dtype=np.float64)
    w = np.r_[np.asarray(n_pos, dtype=np.float64), np.asarray(n_neg, dtype=np.float64)]
    y = np.r_[np.ones(s.size, bool), np.zeros(s.size, bool)]
    keep = w > 0
    if keep.any():
        acc.update(np.r_[qcode, qcode][keep], np.r_[s, s][keep], np.r_[codes, codes][keep], y[keep], weights=w[keep])


def pairwise_from_counts(query_ids, groups, scores, n_pos, n_neg, levels, *, item_ids=None, confidence: float = 0.95,
                         margins=None) -> PairwiseResult:
    """`pairwise_accuracies` from rows of an aggregate (query, group[, item], score -> n_pos, n_neg), e.g. a SQL
    ``GROUP BY``. With ``item_ids`` the SEs are two-way clustered by item and query (new items and new queries),
    else query-clustered (these items in new queries)."""
    acc = PairwiseAccumulator(np.asarray(levels, dtype=object))
    add_query_counts(acc, query_ids, groups, scores, n_pos, n_neg)
    matrix, marginals, parity, overall = acc.tables(confidence)
    gaps = acc.gaps(confidence, margins)
    if item_ids is None:
        return query_clustered_result(matrix, marginals, parity, overall, None, gaps)
    code_of = {g: i for i, g in enumerate(acc.levels)}
    codes = np.array([code_of[g] for g in np.asarray(groups, dtype=object)], dtype=np.intp)
    items = pd.factorize(np.asarray(item_ids, dtype=object))[0]
    rows = labelled_rows(pd.factorize(np.asarray(query_ids, dtype=object))[0], items, scores, codes, n_pos, n_neg)
    Ct, Tt = acc.sums["matrix"][:2]
    two_way = TwoWayMoments(acc.levels.size, Tt, Ct, int(items.max()) + 1 if items.size else 0)
    two_way.update(*rows)  # the query and item x query cell sums of all queries at once (`pairwise_cells`)
    return clustered_result(two_way.result(), acc.levels, matrix, marginals, parity, overall, None, gaps, "two_way",
                            confidence, margins, dims=TWO_WAY_DIMS)


def labelled_rows(qcode, item, scores, codes, n_pos, n_neg) -> tuple:
    """Aggregate rows (n_pos label-1 and n_neg label-0 items each) as weighted rows of one label each:
    (query codes, item codes, scores, group codes, labels, weights), rows of weight 0 left out."""
    w = np.r_[np.asarray(n_pos, dtype=np.float64), np.asarray(n_neg, dtype=np.float64)]
    keep = w > 0
    twice = [np.r_[a, a][keep] for a in (np.asarray(qcode, dtype=np.int64), np.asarray(item, dtype=np.int64),
                                         np.asarray(scores, dtype=np.float64), np.asarray(codes, dtype=np.intp))]
    y = np.r_[np.ones(len(w) // 2, bool), np.zeros(len(w) // 2, bool)][keep]
    return (*twice, y, w[keep])


def query_clustered_result(matrix, marginals, parity, overall, continuous, gaps) -> PairwiseResult:
    """The tables as the accumulator made them: queries are the independent units (these items, new queries)."""
    for frame in (matrix, marginals, parity, overall):
        frame["variance_estimand"] = "query_clustered"
    gaps.insert(len(gaps.columns) - len(EQUIVALENCE_COLUMNS), "variance_estimand", "query_clustered")
    return PairwiseResult(matrix, marginals, parity, overall, continuous, gaps)


def clustered_result(moments, levels, matrix, marginals, parity, overall, continuous, gaps, estimand, confidence,
                     margins, dims=("n_clusters",)) -> PairwiseResult:
    """The `PairwiseResult` whose matrix, marginals, overall and gaps carry the clustered SEs of ``moments``
    (`pairwise_moments.PairwiseMoments` from any engine) instead of the query-clustered ones (parity stays
    query-clustered)."""
    parity["variance_estimand"] = "query_clustered"
    clustered_tables(moments, levels, matrix, marginals, overall, gaps, estimand, confidence, dims)
    if levels.size > 2 and len(gaps):
        gaps["p_holm"] = holm(gaps["p_value"].to_numpy())
    gaps = add_equivalence(gaps.drop(columns=EQUIVALENCE_COLUMNS), "pairwise_accuracy", "gap", "se",
                           margins=margins, confidence=confidence)
    return PairwiseResult(matrix, marginals, parity, overall, continuous, gaps)


def continuous_accuracies(qcode, s, y, z, confidence: float = 0.95) -> pd.DataFrame:
    """A_> and A_< for a continuous protected attribute z, and their difference (same queries)."""
    Cg, Tg = _dominance_counts(qcode, z, s, ~y, y, right_scores_higher=True)  # z_better > z_worse
    Cl, Tl = _dominance_counts(qcode, z, s, y, ~y, right_scores_higher=False)  # z_better < z_worse
    ag, vg, pg, qg, eg = _ratio(Cg, Tg)
    al, vl, pl, ql, el = _ratio(Cl, Tl)
    both = int(((Tg > 0) | (Tl > 0)).sum())
    vd = both / (both - 1) * float(((eg - el) ** 2).sum()) if both > 1 else np.nan
    rows = [{"metric": "A_>", **_row(ag, vg, pg, qg, confidence)},
            {"metric": "A_<", **_row(al, vl, pl, ql, confidence)}]
    w = wald(ag - al, vd, confidence)
    rows.append({"metric": "A_> - A_<", "accuracy": float(ag - al), "se": float(w["se"]),
                 "ci_low": float(w["ci_low"]), "ci_high": float(w["ci_high"]),
                 "z": float(w["z"]), "p_value": float(w["p_value"]),
                 "n_pairs": float(pg + pl), "n_queries": both,
                 "estimable": bool(pg > 0 and pl > 0 and both > 1)})
    return pd.DataFrame(rows)


def pairwise_accuracies(scores, labels, sensitive_features, query_ids, *, continuous_feature=None,
                        confidence: float = 0.95, margins=None, clusters=None) -> PairwiseResult:
    """Within-query pairwise accuracies by group (and for a continuous attribute), with SEs.

    ``labels``: 1 = better, 0 = worse (pairs are formed between the two, inside each query);
    ``sensitive_features``: group of each item; ``query_ids``: query of each item;
    ``continuous_feature``: optional numeric protected attribute z for A_> and A_<; ``margins``: practical
    margins δ (key ``pairwise_accuracy``) behind the verdicts of the cross-group gaps (``gaps``).

    ``clusters``: per-row ids whose rows are dependent, e.g. item ids, or a tuple of two arrays (items, queries)
    for two-way clustering (`pairwise_clustered`): the matrix, marginals, overall and gaps then carry CR2 SEs and
    t intervals for new items (and new queries), with ``df``, ``n_clusters`` and ``variance_estimand``. Without it
    queries are the independent units (estimand: these items in new queries; ``query_clustered``); the parity and
    continuous-attribute tables are always query-clustered.
    """
    s = as_scores(scores)
    y = as_labels(labels, s.size)
    codes, levels = as_groups(sensitive_features, s.size)
    qcode, _ = as_groups(query_ids, s.size, name="query_ids")
    acc = PairwiseAccumulator(levels)
    acc.update(qcode, s, codes, y)
    matrix, marginals, parity, overall = acc.tables(confidence)
    continuous = None
    if continuous_feature is not None:
        z = np.asarray(continuous_feature)
        if z.ndim != 1 or z.size != s.size:
            raise AuditInputError(f"continuous_feature must have length {s.size}, got shape {z.shape}")
        z = as_scores(z, name="continuous_feature")
        continuous = continuous_accuracies(qcode, s, y, z, confidence)
    gaps = acc.gaps(confidence, margins)
    parity["variance_estimand"] = "query_clustered"
    if clusters is None:
        return query_clustered_result(matrix, marginals, parity, overall, continuous, gaps)
    pc = PairwiseClusters(clusters, qcode, s, codes, y, levels.size)
    two_way = isinstance(clusters, tuple)
    return clustered_result(pc.moments(pairwise_contrasts(levels.size)), levels, matrix, marginals, parity, overall,
                            continuous, gaps, "two_way" if two_way else "clustered", confidence, margins,
                            dims=TWO_WAY_DIMS if two_way else ("n_clusters",))
