"""O(mn) reference implementations for the audit tests (deliberately naive, no shared code)."""
from __future__ import annotations

import numpy as np


def h(pos, neg):
    """Pair kernel: 1 if the positive scores higher, 1/2 on ties (matrix: positives x negatives)."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    return (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])


def auc(pos, neg):
    return h(pos, neg).mean()


def delong_var(pos, neg):
    """DeLong et al. (1988): S10/m + S01/n with structural components and n-1 denominators."""
    k = h(pos, neg)
    v10 = k.mean(axis=1)  # one per positive
    v01 = k.mean(axis=0)  # one per negative
    return v10.var(ddof=1) / k.shape[0] + v01.var(ddof=1) / k.shape[1]


def delong_cov_shared_pos(pos, neg_a, neg_b):
    """Covariance of AUC(pos, neg_a) and AUC(pos, neg_b) (same positives, disjoint negatives)."""
    va = h(pos, neg_a).mean(axis=1)
    vb = h(pos, neg_b).mean(axis=1)
    return np.cov(va, vb, ddof=1)[0, 1] / len(pos)


def roc_points(scores, labels):
    """Empirical ROC vertices (FPR, TPR), one per distinct score, descending; linear in between."""
    scores, labels = np.asarray(scores, float), np.asarray(labels).astype(bool)
    levels = np.unique(scores)[::-1]
    fpr = [0.0] + [float(np.mean(scores[~labels] >= v)) for v in levels]
    tpr = [0.0] + [float(np.mean(scores[labels] >= v)) for v in levels]
    return levels, np.array(fpr), np.array(tpr)


def influence_values(scores, labels, alpha):
    """I(alpha) of the linear (random tie-breaking) ROC and each row's influence value.

    A negative's value is the ROC averaged over its block's FPR slot, frozen at ROC(alpha) beyond the
    cutoff; a positive's is W = int_0^alpha (1 - its own share of the ROC), its own share rising
    linearly across its block's slot. Influence on I: (phi - mean phi) / n for negatives,
    -(W - mean W) / m for positives.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels).astype(bool)
    levels, fpr, tpr = roc_points(scores, labels)
    I, r = 0.0, 1.0
    for k in range(1, fpr.size):
        x0, x1, y0, y1 = fpr[k - 1], fpr[k], tpr[k - 1], tpr[k]
        if x1 <= alpha:
            I += (x1 - x0) * (y0 + y1) / 2
        elif x0 < alpha:
            r = y0 + (y1 - y0) * (alpha - x0) / (x1 - x0)
            I += (alpha - x0) * (y0 + r) / 2
    if alpha < 1 and fpr[np.searchsorted(fpr, alpha, side="right") - 1] == alpha:
        r = tpr[np.flatnonzero(fpr == alpha)[-1]]  # the cutoff is a vertex: ROC just after it
    value = np.empty(scores.size)
    for idx in range(scores.size):
        k = int(np.flatnonzero(levels == scores[idx])[0]) + 1
        x0, x1, y0, y1 = fpr[k - 1], fpr[k], tpr[k - 1], tpr[k]
        if not labels[idx]:
            a = min(x1, alpha)
            inside = 0.0 if a <= x0 else (a - x0) * (y0 + (y0 + (y1 - y0) * (a - x0) / (x1 - x0))) / 2
            value[idx] = (inside + (x1 - max(a, x0)) * r) / (x1 - x0)
        else:
            a = min(x1, alpha)
            W = min(alpha, x0)
            if a > x0:
                W += (a - x0) - (a - x0) ** 2 / (2 * (x1 - x0))
            value[idx] = W
    infl = np.empty(scores.size)
    neg, pos = ~labels, labels
    infl[neg] = (value[neg] - value[neg].mean()) / neg.sum()
    infl[pos] = -(value[pos] - value[pos].mean()) / pos.sum()
    return I, value, infl


def truncated(scores, labels, alpha):
    """I(alpha) and its Lemma 3 variance (Bessel-corrected per class) from explicit per-row terms."""
    labels = np.asarray(labels).astype(bool)
    I, value, _ = influence_values(scores, labels, alpha)
    n, m = int((~labels).sum()), int(labels.sum())
    return I, value[~labels].var() / (n - 1) + value[labels].var() / (m - 1)


def clustered_variance(infl, clusters):
    """C/(C-1) sum over clusters of the squared per-cluster sums of the influence values."""
    codes = np.unique(clusters, return_inverse=True)[1].ravel()
    sums = np.bincount(codes, weights=infl)
    C = sums.size
    return C / (C - 1) * np.sum(sums**2)


def cr2_variance(parts, clusters):
    """CR2 by its definition, cluster by cluster: ``parts`` is a list of (influence values, members), each part's
    values nonzero only on its members (e.g. a column's positives); a cluster's part is scaled by
    1 / sqrt(1 - its share of the part's members), then the parts are added and the sums squared."""
    ids = np.unique(clusters)
    total = 0.0
    for k in ids:
        here = clusters == k
        u = 0.0
        for infl, members in parts:
            h = np.count_nonzero(members & here) / np.count_nonzero(members)
            u += np.sum(infl[here]) / np.sqrt(1.0 - h)
        total += u * u
    return total


def split_by_class(infl, labels, members):
    """A column's (positives' part, negatives' part) for `cr2_variance`."""
    pos, neg = members & (labels == 1), members & (labels == 0)
    return [(np.where(pos, infl, 0.0), pos), (np.where(neg, infl, 0.0), neg)]
