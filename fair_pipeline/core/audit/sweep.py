"""Algorithm 1 of Nandy et al. (truncated AUCs with variances at many cutoffs), one sorted pass.

Notation (paper, section 3): m positives, n negatives, ROC(t) the TPR at FPR t, and the mirror ROC
~ROC(u) the FPR at TPR u. For the cutoff alpha, I(alpha) = int_0^alpha ROC(t) dt and (Lemma 3)

    var I(alpha) ~ var[P2(U)] / n + var[W(gamma(1 - U))] / m, with
    var[P2(U)]          = int_0^a ROC^2 - (int_0^a ROC)^2 + a(1-a) ROC(a)^2 - 2(1-a) ROC(a) int_0^a ROC
    var[W(gamma(1-U))]  = int_0^r ~ROC^2 - (int_0^r ~ROC)^2 + a^2 r(1-r) - 2a(1-r) int_0^r ~ROC,
                          r = ROC(a).

The printed Algorithm 1 reuses the ROC accumulators (auc, sqauc) in the 1/m term; Lemma 3 needs the
mirror-ROC ones (the integrals of ~ROC up to r = ROC(alpha)), i.e. the FPR seen by each positive
above the cutoff. Both terms are influence-function variances (appendix B): the 1/n term is the
variance over negatives of phi_i = ROC at the negative's FPR position, frozen at ROC(alpha) below
the cutoff; the 1/m term is the variance over positives of W_j = min(alpha, FPR above positive j).
We compute them as those empirical variances with Bessel's correction (divide by n-1 and m-1), so
that alpha = 1 reproduces DeLong's variance of the Mann-Whitney AUC exactly.

Ties get half credit: a negative tied with positives sees "ROC" = (positives above + half the tied
positives) / m; a positive tied with negatives sees FPR = (negatives above + half the tied) / n.
Equivalently I(alpha) = (1/mn) sum_{i,j} w_i [1(Y_j > X_i) + 1/2 1(Y_j = X_i)], where w_i is the
share of negative i's 1/n slot of the FPR axis lying in [0, alpha] (appendix B.1.3).

Input is a stream of blocks (one per distinct score, descending) with positive and negative counts
for S independent "columns" (a column is one U-statistic: a group, a pair of groups for xAUC, ...),
so that the same code serves in-memory arrays and a SQL cursor read in chunks.
"""
from __future__ import annotations

import numpy as np


class RocSweep:
    """Streaming accumulator of truncated AUCs and their Lemma 3 variances for S columns.

    ``alphas``: FPR cutoffs in [0, 1] (0 is allowed for curve points); ``m``, ``n``: totals of
    positives and negatives per column, known before the pass (a cheap COUNT in SQL).
    """

    def __init__(self, alphas, m, n):
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.m = np.asarray(m, dtype=np.float64)
        self.n = np.asarray(n, dtype=np.float64)
        S, K = self.m.size, self.alphas.size
        self.x = self.n[:, None] * self.alphas[None, :]  # cutoff in units of negatives, (S, K)
        self.p_above = np.zeros(S)
        self.n_above = np.zeros(S)
        self.a1 = np.zeros((S, K))  # sum over negatives in [0, alpha) of ROC (x n)
        self.a2 = np.zeros((S, K))  # same for ROC^2
        self.s1 = np.zeros((S, K))  # sum over positives above the cutoff of FPR-above (x m)
        self.s2 = np.zeros((S, K))
        self.roc_at = np.full((S, K), np.nan)  # ROC(alpha), placement of the boundary negative
        self.tpr_lin = np.full((S, K), np.nan)  # linearly interpolated ROC curve at alpha
        self.pos_through = np.full((S, K), np.nan)  # positives at or above the boundary block
        self.done = np.zeros((S, K), dtype=bool)

    def update(self, pos: np.ndarray, neg: np.ndarray):
        """Consume the next blocks (descending scores): ``pos``, ``neg`` of shape (B, S).

        Returns (V, W): per block and column, the half-credit placement of a negative
        (positives above / m) and the half-credit FPR seen by a positive (negatives above / n),
        for callers that need covariances between columns sharing a sample.
        """
        pos = np.asarray(pos, dtype=np.float64)
        neg = np.asarray(neg, dtype=np.float64)
        if pos.ndim == 1:
            pos, neg = pos[:, None], neg[:, None]
        B, S = pos.shape
        V = np.empty((B, S))
        W = np.empty((B, S))
        if B == 0:
            return V, W
        for s in range(S):
            V[:, s], W[:, s] = self._update_column(s, pos[:, s], neg[:, s])
        return V, W

    def _update_column(self, s: int, p: np.ndarray, q: np.ndarray):
        m, n = self.m[s], self.n[s]
        cp = np.cumsum(p)
        p_excl = cp - p
        p_excl += self.p_above[s]
        cq = np.cumsum(q)
        n_incl = cq + self.n_above[s]
        n_excl = n_incl - q
        v = (p_excl + 0.5 * p) / m  # ROC seen by a negative of the block
        w = (n_excl + 0.5 * q) / n  # FPR seen by a positive of the block
        pending = np.flatnonzero(~self.done[s])
        if pending.size:
            qv = q * v
            pw = p * w
            c_qv, c_qv2 = np.cumsum(qv), np.cumsum(qv * v)
            c_pw, c_pw2 = np.cumsum(pw), np.cumsum(pw * w)
            x = self.x[s, pending]
            J = np.searchsorted(n_incl, x, side="right")  # first block whose negatives pass x
            inside = J < p.size
            # blocks fully above the cutoff
            last = np.where(inside, J - 1, p.size - 1)
            has = last >= 0
            idx = np.maximum(last, 0)
            self.a1[s, pending] += np.where(has, c_qv[idx], 0.0)
            self.a2[s, pending] += np.where(has, c_qv2[idx], 0.0)
            self.s1[s, pending] += np.where(has, c_pw[idx], 0.0)
            self.s2[s, pending] += np.where(has, c_pw2[idx], 0.0)
            # the block straddling the cutoff: a fraction of its negative mass is inside
            k_in, j_in = pending[inside], J[inside]
            if k_in.size:
                frac = self.x[s, k_in] - n_excl[j_in]
                vj = v[j_in]
                self.a1[s, k_in] += frac * vj
                self.a2[s, k_in] += frac * vj * vj
                w_j = 0.5 * (n_excl[j_in] / n + self.alphas[k_in])  # half credit, capped at alpha
                self.s1[s, k_in] += p[j_in] * w_j
                self.s2[s, k_in] += p[j_in] * w_j * w_j
                self.roc_at[s, k_in] = vj
                self.tpr_lin[s, k_in] = (p_excl[j_in] + p[j_in] * frac / q[j_in]) / m
                self.pos_through[s, k_in] = p_excl[j_in] + p[j_in]
                self.done[s, k_in] = True
        self.p_above[s] += cp[-1]
        self.n_above[s] += cq[-1]
        return v, w

    def result(self) -> dict:
        """Per column and cutoff: I(alpha), the two Lemma 3 variance terms and the total variance."""
        return lemma3(self.a1, self.a2, self.s1, self.s2, self.roc_at, self.tpr_lin,
                      self.pos_through, self.done, self.m, self.n, self.alphas)


def lemma3(a1, a2, s1, s2, roc_at, tpr_lin, pos_through, done, m, n, alphas) -> dict:
    """Finish Algorithm 1 from its accumulators (arrays of shape (S, K)).

    a1, a2: sums over the negative mass in [0, alpha) of ROC and ROC^2 (so I = a1 / n);
    s1, s2: sums over positives at or above the boundary block of their capped FPR and its square;
    roc_at: ROC(alpha); pos_through: positives at or above the boundary block; done: False where
    the cutoff was never crossed (alpha = 1).
    """
    m = np.asarray(m, dtype=np.float64)[:, None]
    n = np.asarray(n, dtype=np.float64)[:, None]
    a = np.asarray(alphas, dtype=np.float64)[None, :]
    open_ = ~done
    roc_at = np.where(open_, 1.0, roc_at)
    tpr_lin = np.where(open_, 1.0, tpr_lin)
    pos_through = np.where(open_, m, pos_through)
    auc = a1 / n
    sq = a2 / n
    var_neg = sq - auc**2 + a * (1 - a) * roc_at**2 - 2 * (1 - a) * roc_at * auc
    rest = m - pos_through  # positives below the cutoff: W = alpha
    mean_pos = (s1 + rest * a) / m
    var_pos = (s2 + rest * a**2) / m - mean_pos**2
    var_neg = np.maximum(var_neg, 0.0)  # clip rounding noise of a zero variance
    var_pos = np.maximum(var_pos, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = var_neg / (n - 1) + var_pos / (m - 1)
    return {
        "auc": auc,
        "var_neg_term": var_neg,
        "var_pos_term": var_pos,
        "variance": variance,
        "roc_at_cutoff": roc_at,
        "tpr_interp": tpr_lin,
    }


def sweep_no_cross_ties(pos_at: np.ndarray, neg_at: np.ndarray, alphas) -> dict:
    """Algorithm 1 for one column when no positive ties a negative (same numbers as RocSweep).

    ``pos_at`` / ``neg_at``: positions of the positives / negatives in ascending score order.
    Without cross-class ties a negative of ascending rank r at position t has m - (t - r)
    positives above it, and a positive n - (t - r) negatives above it: "position minus rank",
    so the pass needs no cumulative sums, only a few vectorized sums and dot products. Walking
    down the scores (Algorithm 1) is walking these arrays from their ends.
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    m, n = pos_at.size, neg_at.size
    # minus the counts above, in float64 (ascending rank order; nondecreasing)
    v = neg_at - np.arange(m, m + n, dtype=np.float64)  # -(positives above each negative)
    w = pos_at - np.arange(n, n + m, dtype=np.float64)  # -(negatives above each positive)
    K = alphas.size
    a1, a2, s1, s2 = (np.zeros((1, K)) for _ in range(4))
    roc_at, tpr_lin, pos_through = (np.full((1, K), np.nan) for _ in range(3))
    done = np.zeros((1, K), dtype=bool)
    x = alphas * n
    k_neg = np.minimum(np.floor(x).astype(np.int64), n)  # negatives fully above the cutoff
    # positives whose negatives-above count is <= k_neg: a suffix of w
    first_pos = np.searchsorted(w, -k_neg.astype(np.float64), side="left")
    sv = sv2 = sw = sw2 = 0.0
    hi_v, hi_w = n, m
    for j in np.argsort(x, kind="stable"):  # grow the suffix sums cutoff by cutoff
        lo_v, lo_w = n - int(k_neg[j]), int(first_pos[j])
        seg = v[lo_v:hi_v]
        sv -= seg.sum()
        sv2 += seg @ seg
        seg = w[lo_w:hi_w]
        sw -= seg.sum()
        sw2 += seg @ seg
        hi_v, hi_w = lo_v, lo_w
        a1[0, j], a2[0, j] = sv / m, sv2 / m**2
        s1[0, j], s2[0, j] = sw / n, sw2 / n**2
        if lo_v > 0:  # the boundary negative is the next one down
            r = -v[lo_v - 1] / m
            frac = x[j] - k_neg[j]
            a1[0, j] += frac * r
            a2[0, j] += frac * r * r
            roc_at[0, j] = tpr_lin[0, j] = r
            pos_through[0, j] = m - lo_w
            done[0, j] = True
    return lemma3(a1, a2, s1, s2, roc_at, tpr_lin, pos_through, done, [m], [n], alphas)
