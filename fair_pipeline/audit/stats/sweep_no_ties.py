"""Algorithm 1 of Nandy et al. for one column whose positives tie no negative: closed forms over the positives'
positions in score order (`blocks.positive_positions`), the same numbers as `sweep.RocSweep` without its blocks."""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.sweep import lemma3

_RANGE_CHUNK = 1 << 20  # elements per step: temporaries stay in cache, no page faults


def _below_sums(pos_at: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Sums over positive ranks j in [lo, hi) of d_j, d_j^2 and j d_j, d_j = pos_at[j] - j.

    d_j is the number of negatives below the rank-j positive (ascending order). Chunked so that
    no array of the full size is allocated.
    """
    out = np.zeros(3)
    for a in range(lo, hi, _RANGE_CHUNK):
        b = min(hi, a + _RANGE_CHUNK)
        j = np.arange(a, b, dtype=np.float64)
        d = pos_at[a:b] - j
        out += (d.sum(), np.einsum("i,i->", d, d), np.einsum("i,i->", j, d))  # no BLAS threads
    return out


def _first_rank_with_below_at_least(pos_at: np.ndarray, k: int) -> int:
    """Smallest rank j with d_j = pos_at[j] - j >= k (d is non-decreasing): bisection."""
    lo, hi = 0, pos_at.size
    while lo < hi:
        mid = (lo + hi) // 2
        if int(pos_at[mid]) - mid >= k:
            hi = mid
        else:
            lo = mid + 1
    return lo


def sweep_no_cross_ties(pos_at: np.ndarray, n_total: int, alphas) -> dict:
    """Algorithm 1 for one column when no positive ties a negative (same numbers as RocSweep).

    ``pos_at``: positions of the positives in ascending score order among ``n_total`` rows.
    With d_j = pos_at[j] - j negatives below the rank-j positive (non-decreasing in j), and
    lo = n - k the ascending rank of the lowest of the k negatives above the cutoff:

    * a positive is above the cutoff iff d_j >= lo, i.e. j >= J (one bisection); it sees
      n - d_j negatives above it;
    * the negatives of rank r >= lo see m - u_r positives above, u_r = #{j: d_j <= r}, and
      sum_r u_r = sum_j (n - max(lo, d_j)), sum_r u_r^2 = sum_j (2j + 1)(n - max(lo, d_j)).

    So every accumulator of Algorithm 1 is a closed form in suffix sums over the positives of
    d_j, d_j^2 and j d_j: the negatives' positions are never materialized. Walking down the
    scores (Algorithm 1) is growing that suffix.
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    m = pos_at.size
    n = int(n_total) - m
    K = alphas.size
    a1, a2, s1, s2 = (np.zeros((1, K)) for _ in range(4))
    roc_at, tpr_lin, pos_through = (np.full((1, K), np.nan) for _ in range(3))
    done = np.zeros((1, K), dtype=bool)
    x = alphas * n
    suffix = np.zeros(3)  # sums of d, d^2, j d over ranks [J, m)
    hi = m
    for c in np.argsort(x, kind="stable"):  # grow the suffix cutoff by cutoff
        k = min(int(np.floor(x[c])), n)  # negatives fully above the cutoff
        lo = n - k
        J = _first_rank_with_below_at_least(pos_at, lo)
        suffix += _below_sums(pos_at, J, hi)
        hi = J
        sd, sd2, sjd = suffix
        tail = m - J
        u1 = J * (n - lo) + tail * n - sd
        u2 = (n - lo) * J * J + n * (m * m - J * J) - 2 * sjd - sd
        a1[0, c] = (k * m - u1) / m  # sum over the k negatives of their ROC
        a2[0, c] = (k * m * m - 2 * m * u1 + u2) / m**2
        s1[0, c] = (tail * n - sd) / n  # sum over positives above of their FPR
        s2[0, c] = (tail * n * n - 2 * n * sd + sd2) / n**2
        if lo > 0:  # the boundary negative (rank lo - 1) has J positives below it
            r = (m - J) / m
            frac = x[c] - k
            a1[0, c] += frac * r
            a2[0, c] += frac * r * r
            roc_at[0, c] = tpr_lin[0, c] = r
            pos_through[0, c] = tail
            done[0, c] = True
    return lemma3(a1, a2, s1, s2, roc_at, tpr_lin, pos_through, done, [m], [n], alphas)
