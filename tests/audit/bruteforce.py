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


def truncated(scores, labels, alpha):
    """I(alpha) and its Lemma 3 variance (Bessel-corrected) from explicit per-observation terms.

    Negatives sorted by descending score occupy FPR slots [i/n, (i+1)/n); w_i is the share of
    slot i inside [0, alpha). I = (1/mn) sum_i w_i sum_j h(Y_j, X_i).
    1/n term: variance over t ~ U[0,1] of P2(t) = ROC(min(t, alpha)) with ROC(t) on slot i equal
    to negative i's placement; 1/m term: variance over positives of psi_j = (1/n) sum_i w_i h_ji.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels).astype(bool)
    X = np.sort(scores[~labels])[::-1]
    Y = scores[labels]
    n, m = X.size, Y.size
    k = h(Y, X)  # (m, n)
    place = k.mean(axis=0)  # ROC seen by each negative
    w = np.clip(alpha * n - np.arange(n), 0.0, 1.0)
    I = (w * place).sum() / n
    j = int(np.floor(alpha * n))
    r_alpha = place[j] if j < n else 1.0
    inside = w / n
    outside = 1.0 / n - inside
    e1 = (inside * place).sum() + outside.sum() * r_alpha
    e2 = (inside * place**2).sum() + outside.sum() * r_alpha**2
    var_neg = e2 - e1**2
    psi = (k * w[None, :]).sum(axis=1) / n
    var_pos = psi.var()
    return I, var_neg / (n - 1) + var_pos / (m - 1)
