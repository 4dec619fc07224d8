"""One pass over the (distinct score x group) grid feeding every ROC-type audit statistic.

Each statistic is a two-sample U-statistic whose positives come from some groups and whose
negatives come from some (other) groups, so a "column" is a pair of 0/1 group-selection vectors:

* per-group truncated AUC:  positives of g vs negatives of g
* overall truncated AUC:    all positives vs all negatives
* xAUC(a, b) (Kallus & Zhou, Def. 2):  positives of a vs negatives of b
* balanced xAUC_0(g) = P(R_1 > R_0^g):  all positives vs negatives of g
* balanced xAUC_1(g) = P(R_1^g > R_0):  positives of g vs all negatives

Balanced xAUCs of two groups share a sample (all positives, or all negatives), so their
difference needs the covariance of the shared sample's structural components (DeLong et al.
1988); we accumulate the needed cross-moments in the same pass. Chunks of blocks arrive in
descending score order, from memory or from a SQL cursor.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.blocks import ScoreGrid
from fair_pipeline.audit.stats.cluster_pass import cluster_covariance, contrast_df
from fair_pipeline.audit.stats.clustered import BlockTable, BlockTotals, ClusterRows, two_way_keys
from fair_pipeline.audit.stats.sweep import DENSE_SHARE, RocSweep, paired_dots, products

CHUNK_BLOCKS = 1 << 15  # blocks per update: the (vectors x B) work arrays, reused, stay in cache (1 << 14: 10% more CPU)
# Rows per batch of the in-memory cluster-robust pass: its temporaries are ~15 float arrays per row, so one
# batch of a day's rows (one per impression when scores are continuous) cost GBs; batches keep it ~100 MB.
CLUSTER_BATCH_ROWS = 1 << 20


def build_columns(n_groups: int, xauc: bool, compared=None) -> list:
    """(kind, a, b) and (positive vector, negative vector) of every column.

    Vectors 0..G-1 are the groups, vector G is all groups pooled. xAUC(a, b) columns: both directions of every
    ``compared`` pair of groups (default all pairs), a-major.
    """
    G = n_groups
    cols = [(("group", g, g), (g, g)) for g in range(G)]
    cols.append((("overall", None, None), (G, G)))
    if xauc:
        if compared is None:
            ordered = [(a, b) for a in range(G) for b in range(G) if a != b]
        else:
            ordered = sorted({(a, b) for pair in compared for a, b in (pair, pair[::-1])})
        cols += [(("xauc", a, b), (a, b)) for a, b in ordered]
        cols += [(("xauc0", g, None), (G, g)) for g in range(G)]
        cols += [(("xauc1", g, None), (g, G)) for g in range(G)]
    return cols


class GridAudit:
    """Streaming accumulator: ``update(pos, neg)`` with (B, G) count chunks, then ``result()``."""

    def __init__(self, n_pos, n_neg, alphas, xauc: bool = True, compared=None, curve_only=None):
        self.n_pos = np.asarray(n_pos, dtype=np.float64)
        self.n_neg = np.asarray(n_neg, dtype=np.float64)
        G = self.n_pos.size
        # (a, b) group pairs compared (`comparisons`): all pairs unless given
        self.compared = [tuple(map(int, ab)) for ab in (zip(*np.triu_indices(G, 1)) if compared is None else compared)]
        cols = build_columns(G, xauc, self.compared)
        self.names = [c[0] for c in cols]
        self.pairs = pairs = [c[1] for c in cols]
        m = np.r_[self.n_pos, self.n_pos.sum()]
        n = np.r_[self.n_neg, self.n_neg.sum()]
        # vectors with an empty class still run (total 1 avoids 0/0); they are flagged later
        self.sweep = RocSweep(alphas, np.maximum(m, 1), np.maximum(n, 1), pairs, curve_only)
        self.m = np.array([m[i] for i, _ in pairs])
        self.n = np.array([n[j] for _, j in pairs])
        self.xauc = xauc
        pair_index = np.array(self.compared, dtype=np.intp).reshape(-1, 2)
        self.ia, self.ib = pair_index[:, 0], pair_index[:, 1]
        # nearly all pairs compared: one dense G x G product per chunk is cheaper than pair by pair
        self.dense_cross = self.ia.size >= DENSE_SHARE * G * G
        self.cross_pos = np.zeros(self.ia.size)  # per compared pair, sum over all positives of W_a W_b (xAUC_0)
        self.cross_neg = np.zeros(self.ia.size)  # per compared pair, sum over all negatives of V_a V_b (xAUC_1)
        self.work = None  # (7, G + 1, blocks): a chunk's positives, negatives, curves and a product (`update_columns`)

    def update(self, pos: np.ndarray, neg: np.ndarray) -> None:
        """Next blocks (descending scores), counts of shape (B, G)."""
        self.update_columns(np.asarray(pos, dtype=np.float64).T, np.asarray(neg, dtype=np.float64).T)

    def update_columns(self, pos: np.ndarray, neg: np.ndarray, keep_curves: bool = False):
        """Next blocks as per-group count vectors, (G, B) (e.g. one array per group from a SQL cursor). With
        ``keep_curves`` returns the sweep's block curves of every vector (groups, then pooled), (4, G + 1, B):
        positives and negatives through each block, ROC seen by its negatives, FPR seen by its positives
        (`sweep.block_curves`; the cluster sums fed alongside reuse them instead of cumulating again)."""
        G, B = pos.shape
        curves = np.empty((4, G + 1, B)) if keep_curves else None
        width = min(B, CHUNK_BLOCKS)
        # counts of at most 16 bits (e.g. a table of one-row blocks): whole, and a chunk's sums stay far below
        # 2**52, so the sweep cumulates them without checking (`sweep.cumulate`)
        small = pos.dtype.kind == "b" or pos.dtype.kind in "iu" and pos.dtype.itemsize <= 2
        if self.work is None or self.work.shape[2] < width:  # reused: fresh arrays per chunk cost page faults
            self.work = np.empty((7, G + 1, width))
        for lo in range(0, B, CHUNK_BLOCKS):
            hi = min(B, lo + CHUNK_BLOCKS)
            # vector-major (G + 1, blocks): the groups, then all groups pooled
            p, q, *work, product = self.work[:, :, :hi - lo]
            p[:G], q[:G] = pos[:, lo:hi], neg[:, lo:hi]
            np.sum(p[:G], axis=0, out=p[G])
            np.sum(q[:G], axis=0, out=q[G])
            V, W = self.sweep.update_columns(p, q, work if curves is None else tuple(c[:, lo:hi] for c in curves),
                                             small)
            if self.xauc:  # sums over all positives of W_a W_b and over all negatives of V_a V_b
                if self.dense_cross:
                    self.cross_pos += products(np.multiply(W[:G], p[G], out=product[:G]), W[:G])[self.ia, self.ib]
                    self.cross_neg += products(np.multiply(V[:G], q[G], out=product[:G]), V[:G])[self.ia, self.ib]
                else:
                    self.cross_pos += paired_dots(np.multiply(W[:G], p[G], out=product[:G]), self.ia, W, self.ib)
                    self.cross_neg += paired_dots(np.multiply(V[:G], q[G], out=product[:G]), self.ia, V, self.ib)
        return curves

    def result(self) -> dict:
        out = self.sweep.result()
        out["columns"] = self.names
        out["pairs"] = self.pairs
        out["m"], out["n"] = self.m, self.n
        out["compared"] = self.compared
        if self.xauc:
            out["balanced_cov"] = self._balanced_cov(out)
        return out

    def _balanced_cov(self, out: dict) -> dict:
        """Of (xAUC_0(g))_g and of (xAUC_1(g))_g at FPR cutoff 1: the variances ("var", per group) and the
        covariances of the compared pairs ("cov", aligned with ``compared``)."""
        k1 = int(np.flatnonzero(self.sweep.alphas == 1.0)[0])
        covs = {}
        for kind, cross in (("xauc0", self.cross_pos), ("xauc1", self.cross_neg)):
            idx = [i for i, c in enumerate(self.names) if c[0] == kind]
            var = out["variance"][idx, k1]
            if kind == "xauc0":  # shared positives; mean FPR seen by a positive = 1 - xAUC_0
                total, mean = self.m[idx[0]], 1.0 - out["auc"][idx, k1]
            else:  # shared negatives; mean ROC seen by a negative = xAUC_1
                total, mean = self.n[idx[0]], out["auc"][idx, k1]
            with np.errstate(divide="ignore", invalid="ignore"):
                cov = (cross / total - mean[self.ia] * mean[self.ib]) / (total - 1)
            covs[kind] = {"var": var, "cov": cov}
        return covs


CURVE_GRID = np.linspace(0.0, 1.0, 101)  # FPR points at which ROC / xROC curves are reported


def sweep_alphas(cutoffs: np.ndarray, curves: bool) -> np.ndarray:
    """Cutoffs requested + FPR 1 (xAUC needs it) + the curve grid, sorted and distinct."""
    extra = [np.array([1.0])] + ([CURVE_GRID] if curves else [])
    return np.unique(np.concatenate([np.asarray(cutoffs, dtype=np.float64)] + extra))


def cluster_batches(keys, rows: ClusterRows, batch_rows: int | None = None):
    """Batches (keys, scores, group codes, n_pos, n_neg) of about `batch_rows` rows, whole clusters each, in
    ascending key order; a cluster's rows keep their order, so its sums are the ones a single batch gives."""
    keys, batch_rows = np.asarray(keys), batch_rows or CLUSTER_BATCH_ROWS
    if keys.size <= batch_rows:
        yield keys, rows.scores, rows.group, rows.n_pos, rows.n_neg
        return
    if keys.dtype.kind not in "iu":  # ranks: the same cluster order as np.unique in ClusterAccumulator.add
        keys = np.unique(keys, return_inverse=True)[1].ravel()
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])  # first row of every cluster
    cuts = np.unique(starts[np.searchsorted(starts, np.arange(0, keys.size, batch_rows), side="right") - 1])
    for lo, hi in zip(cuts, np.r_[cuts[1:], keys.size]):
        take = order[lo:hi]
        yield keys[lo:hi], rows.scores[take], rows.group[take], rows.n_pos[take], rows.n_neg[take]


def add_cluster_covariance(res: dict, grid: ScoreGrid | BlockTotals | None, cutoffs, rows: ClusterRows | None = None,
                           streams=None, batch_rows: int | None = None, prefix=None) -> dict:
    """Replace the variances at ``cutoffs`` and FPR 1 by cluster-robust ones and add their covariances.

    ``grid``: the score grid, or only its `BlockTotals` when the streams' batches carry their rows' blocks
    (`CountRows`, e.g. joined in SQL: then no day-sized array is held).
    Either ``rows`` (in memory) or ``streams``: a list of (sign, batches) whose covariances are summed
    with those signs (one-way: [(1, by cluster)]; two-way: [(1, by item), (1, by query), (-1, by item x
    query)]); each batch is (keys, scores, group codes, n_pos, n_neg), a cluster's rows contiguous.
    Adds ``cov`` (K, S, S) over columns at ``cov_alphas`` and ``clusters`` (the number of clusters; the
    smaller one for two-way clustering). In-memory ``rows`` are fed in batches of
    ``batch_rows`` rows (default CLUSTER_BATCH_ROWS). Or ``prefix``: a list of (sign, `PrefixClusterSums`)
    already fed in score order during the sweep (no ``grid`` needed).
    """
    var_alphas = variance_alphas(cutoffs)
    sel = np.searchsorted(res["alphas"], var_alphas)
    auc, roc = res["auc"][:, sel], res["tpr_interp"][:, sel]
    if prefix is not None:
        # the xAUC columns' variances are read at FPR 1 only (`xauc`), so only those are formed there, in every stream
        every = [s for s, (kind, _, _) in enumerate(res["columns"]) if kind in ("group", "overall")]
        parts = [(sign, sums.covariance(auc, roc, keep_totals=sign > 0, every=every)) for sign, sums in prefix]
        return _store_covariance(res, var_alphas, sel, parts)
    table = grid if isinstance(grid, BlockTotals) else BlockTable(grid)
    if streams is None:
        def batch(keys):
            return cluster_batches(keys, rows, batch_rows)
        if rows.two_way:
            first, second = rows.keys
            streams = [(1, batch(first)), (1, batch(second)), (-1, batch(two_way_keys(first, second)))]
        else:
            streams = [(1, batch(rows.keys))]
    parts = [(sign, cluster_covariance(table, res["pairs"], var_alphas, auc, roc, batches, keep_totals=sign > 0))
             for sign, batches in streams]
    return _store_covariance(res, var_alphas, sel, parts)


def variance_alphas(cutoffs) -> np.ndarray:
    """The cutoffs given cluster-robust variances: the requested ones and FPR 1 (xAUC), ascending."""
    return np.unique(np.r_[np.asarray(cutoffs, dtype=np.float64), 1.0])


def _store_covariance(res: dict, var_alphas, sel, parts) -> dict:
    """Sum the signed (sign, finished cluster pass) parts into ``res``: variances and ``cov`` (CR2), ``cov_cr1``,
    ``clusters``, the one-way streams' adjusted ``cluster_totals`` (for df) and ``clusters_with``."""
    cov = sum(sign * acc.covariance() for sign, acc in parts)
    res["cov_cr1"] = sum(sign * acc.cr1_covariance() for sign, acc in parts)
    counts = [acc.clusters for sign, acc in parts if sign > 0]
    res["cluster_totals"] = [acc.totals() for sign, acc in parts if sign > 0]
    res["cluster_designs"] = [acc.design for sign, acc in parts if sign > 0]
    # per vector (groups, then pooled): clusters holding its positives / negatives, the smaller over two-way streams
    smallest = np.minimum.reduce([acc.clusters_with for sign, acc in parts if sign > 0])
    res["clusters_with"] = {"pos": smallest[0], "neg": smallest[1]}
    diag = np.einsum("kss->sk", cov).copy()
    res["variance"] = res["variance"].copy()
    res["variance"][:, sel] = np.maximum(diag, 0.0)
    res["cov"], res["cov_alphas"], res["clusters"] = cov, var_alphas, min(counts)
    if "balanced_cov" in res:
        k1 = int(np.flatnonzero(var_alphas == 1.0)[0])
        for kind in ("xauc0", "xauc1"):
            idx = np.array([i for i, c in enumerate(res["columns"]) if c[0] == kind])
            a, b = np.array(res["compared"], dtype=np.intp).reshape(-1, 2).T
            res["balanced_cov"][kind] = {"var": np.diagonal(cov[k1])[idx], "cov": cov[k1][idx[a], idx[b]]}
    return res


def column_df(res: dict, alpha_values, weights) -> np.ndarray:
    """Degrees of freedom of the contrast sum_s weights[s] * column s at each alpha: the smaller of the
    Satterthwaite effective number of clusters of its adjusted totals and its parts' design df (`contrast_df`);
    infinite (normal theory) without clustering."""
    alpha_values = np.asarray(alpha_values, dtype=np.float64)
    if "cluster_totals" not in res:
        return np.full(alpha_values.size, np.inf)
    k = np.searchsorted(res["cov_alphas"], alpha_values)
    w = np.zeros(len(res["pairs"]))
    for column, coefficient in weights.items():
        w[column] += coefficient
    return contrast_df(res["cluster_totals"], w, res.get("cluster_designs"), res["pairs"])[k]


def column_cov(res: dict, alpha_values, s: int, t: int) -> np.ndarray:
    """Covariance of columns s and t at each alpha (zeros without a cluster-robust pass: the iid
    columns this is used for use disjoint samples)."""
    alpha_values = np.asarray(alpha_values, dtype=np.float64)
    if "cov" not in res:
        return np.zeros(alpha_values.size)
    k = np.searchsorted(res["cov_alphas"], alpha_values)
    return res["cov"][k, s, t]


def run_grid_audit(grid, cutoffs, xauc: bool = True, curves: bool = False,
                   clusters: ClusterRows | None = None, compared=None) -> dict:
    """Feed an in-memory ScoreGrid through GridAudit (in chunks) and return its raw result; with
    ``clusters``, the variances at the cutoffs are cluster-robust (see `clustered`)."""
    alphas = sweep_alphas(cutoffs, curves)
    audit = GridAudit(grid.n_pos, grid.n_neg, alphas, xauc=xauc, compared=compared)
    audit.update(grid.pos, grid.neg)
    res = audit.result()
    res["alphas"] = alphas
    res["groups"] = grid.groups
    res["n_pos_group"], res["n_neg_group"] = grid.n_pos, grid.n_neg
    if clusters is not None:
        add_cluster_covariance(res, grid, cutoffs, clusters)
    return res
