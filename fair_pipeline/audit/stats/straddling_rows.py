"""Rows of blocks straddling a cutoff in the one pass in score order (`prefix_clusters`): few rows, each taking the
exact influence value (`clustered.row_influence`) split into its parts free of and proportional to ROC(alpha), summed
per cluster apart from the running sums."""
from __future__ import annotations

import numpy as np
from scipy import sparse

from fair_pipeline.audit.stats.clustered import ClassTotals, PrefixRows, row_influence


def straddling_values(pairs, alphas, m, n, rows: PrefixRows, group, n_pos, n_neg) -> tuple:
    """`row_influence` per column ``pairs`` and cutoff ``alphas`` of rows in straddling blocks (``rows``: their blocks'
    counts; ``m`` / ``n``: class totals per vector, groups then pooled): its ROC-free parts (2, S, K, rows) and its
    ROC coefficient as a correction of NC at that cutoff (G + 1, K, rows), with the rows' groups and counts."""
    G, K = len(m) - 1, len(alphas)
    table = ClassTotals(G, m, n)
    a_vals = np.empty((2, len(pairs), K, group.size))  # negatives' and positives' parts
    nc_vals = np.empty((G + 1, K, group.size))
    no_pos = np.zeros(n_pos.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k, alpha in enumerate(alphas):
            for j in range(G + 1):
                in_j = np.ones(group.size, dtype=bool) if j == G else group == j
                roc0 = row_influence(table, j, j, alpha, 0.0, 0.0, rows, group, no_pos, n_neg)
                roc1 = row_influence(table, j, j, alpha, 0.0, 1.0, rows, group, no_pos, n_neg)
                nc_vals[j, k] = alpha * n_neg * in_j - n[j] * (roc1 - roc0)
            for s, (i, j) in enumerate(pairs):
                a_vals[:, s, k] = row_influence(table, i, j, alpha, 0.0, 0.0, rows, group, n_pos, n_neg, parts=True)
    return a_vals, nc_vals, group, n_pos, n_neg


def summed_per_cluster(codes, a_vals, nc_vals, group, n_pos, n_neg) -> tuple:
    """The `straddling_values` of rows of cluster codes ``codes`` summed per cluster: (distinct codes, negatives' and
    positives' parts, ROC coefficients, negatives and positives per group), each with a last axis of clusters."""
    G = nc_vals.shape[0] - 1
    uniq, inv = np.unique(codes, return_inverse=True)
    members = sparse.csr_matrix((np.ones(inv.size), (np.arange(inv.size), inv.ravel())),
                                shape=(inv.size, uniq.size))  # row -> its cluster

    def per_cluster(vals):
        flat = vals.reshape(-1, inv.size)
        return np.asarray(members.T @ flat.T).T.reshape(vals.shape[:-1] + (uniq.size,))

    return (uniq, per_cluster(a_vals[0]), per_cluster(a_vals[1]), per_cluster(nc_vals),
            per_cluster(np.stack([n_neg * (group == g) for g in range(G)])),
            per_cluster(np.stack([n_pos * (group == g) for g in range(G)])))
