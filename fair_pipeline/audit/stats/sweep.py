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

Ties: the empirical ROC is linear across a block of tied scores (the expected curve under random
tie-breaking; what scikit-learn's `roc_auc_score(max_fpr=...)` and pROC integrate). A block entirely
inside [0, alpha] therefore gets half credit (a negative tied with positives sees "ROC" = (positives
above + half the tied) / m, a positive tied with negatives sees FPR = (negatives above + half the
tied) / n), and a block straddling the cutoff is credited with the area under its segment up to alpha:
with f the share of its negatives inside, y0 the ROC where it starts and dy its rise, f q (y0 + dy f/2)
negatives' worth of ROC, and each of its positives sees the capped FPR t0 + (alpha - t0)(1 - f/2) =
int_0^alpha (1 - its own share of the ROC). ROC(alpha) is the segment's height at alpha.

Input is a stream of blocks (one per distinct score, descending) with positive and negative counts
for S independent "columns" (a column is one U-statistic: a group, a pair of groups for xAUC, ...),
so that the same code serves in-memory arrays and a SQL cursor read in chunks.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse


SPLIT_BLOCKS = 4096  # from this many blocks an odd row count's gemm is split (`products`)


def products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b.T for vector-major (rows, blocks) arrays (gemm: ~4x less CPU than einsum's loop for a few vectors
    over 16k blocks, measured with numpy 2.4's OpenBLAS on the shared 2-core machine). OpenBLAS's gemm is slow
    on an odd number of rows over many blocks (3 x 3 over 32k blocks: 2x the CPU of 4 x 4; 1 x 1: 15x), so an odd
    last row goes through a matrix-vector product and the rest through an even gemm."""
    ra, rb = a.shape[0], b.shape[0]
    if a.shape[1] < SPLIT_BLOCKS or (ra % 2 == 0 and rb % 2 == 0):
        return a @ b.T
    if ra == 1:
        return (b @ a[0])[None, :]
    ea, eb = ra - ra % 2, rb - rb % 2
    out = np.empty((ra, rb))
    out[:ea, :eb] = a[:ea] @ b[:eb].T
    if ra % 2:
        out[ea] = b @ a[ea]
    if rb % 2:
        out[:ea, eb] = a[:ea] @ b[eb]
    return out


DENSE_ROWS = 8  # up to this many count vectors the dense product is cheaper than building a sparse matrix


def count_products(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """counts @ values.T where ``counts`` are per-group counts of blocks (rows, blocks): with many groups a
    block holds few of them, so the product over the nonzero counts (sparse) costs rows x blocks, not
    rows^2 x blocks."""
    if counts.shape[0] <= DENSE_ROWS:
        return products(counts, values)
    return np.asarray(sparse.csr_matrix(counts) @ np.ascontiguousarray(values.T))


RESULT_COLUMNS = 2048  # columns finished per step in RocSweep.result
# Below this share of all (negative vector, positive vector) pairs, the sums are kept per column (memory and time
# linear in columns: thousands of groups each compared with one reference) instead of as dense vector x vector
# matrices (cheaper when nearly every pair is a column, e.g. xAUC of all ordered pairs of a few groups).
DENSE_SHARE = 0.25
COLUMN_STEP = 1 << 20  # columns x blocks per step of the per-column sums (temporaries stay small)


def paired_dots(a: np.ndarray, rows_a: np.ndarray, b: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    """sum over blocks of a[rows_a[c]] * b[rows_b[c]] for every c, a few columns at a time."""
    out = np.empty(rows_a.size)
    step = max(1, COLUMN_STEP // max(1, a.shape[1]))
    for lo in range(0, rows_a.size, step):
        hi = lo + step
        out[lo:hi] = np.einsum("cb,cb->c", a[rows_a[lo:hi]], b[rows_b[lo:hi]])
    return out


EXACT_INTEGERS = 2.0**53  # doubles hold every integer below this


def cumulate(counts: np.ndarray, start: np.ndarray, out: np.ndarray, small: bool = False, work=None) -> np.ndarray:
    """``start[:, None] + np.cumsum(counts, axis=1)`` into ``out``, as an int64 running sum when every count and
    start is a whole number: exact, and several times cheaper than the float one (whose adds wait on each other's
    latency). ``small``: the caller knows the counts are whole numbers whose sums stay far below 2**52 (e.g. 8-bit
    counts of one-row blocks), which skips checking them. ``work``: an int64 array of ``counts``' shape to use."""
    whole = counts.astype(np.int64) if work is None else work
    if work is not None:
        np.copyto(whole, counts, casting="unsafe")
    first = start.astype(np.int64)
    half = EXACT_INTEGERS / 2  # start and counts each below it: every running sum is an exact integer
    exact = whole.size > 0 and np.array_equal(first, start) and int(np.abs(first).max()) < half
    if exact and not small:
        np.copyto(out, whole, casting="unsafe")
        exact = np.array_equal(out, counts) and max(int(whole.max()), -int(whole.min())) * whole.shape[1] < half
    if not exact:  # a fraction (or a count beyond int64) was cut, or the sums could leave the exact integers
        np.cumsum(counts, axis=1, out=out)
        out += start[:, None]
        return out
    whole[:, 0] += first
    np.cumsum(whole, axis=1, out=whole)
    np.copyto(out, whole, casting="unsafe")
    return out


def block_curves(pos, neg, p_above, n_above, m, n, out=None, small: bool = False, work=None):
    """Per vector and block (descending scores): positives and negatives through the block (``p_above`` /
    ``n_above`` lie above the first), the half-credit ROC seen by a negative of the block (V) and FPR seen by
    a positive of it (W); written into ``out`` (p_incl, n_incl, V, W) when given. ``small``, ``work`` (int64, both
    shapes): as `cumulate`."""
    p_incl, n_incl, V, W = out if out is not None else (np.empty(pos.shape), np.empty(neg.shape),
                                                        np.empty(pos.shape), np.empty(neg.shape))
    # counts are whole numbers, so p_incl - pos/2 is exactly (p_incl - pos) + pos/2: no temporary
    cumulate(pos, p_above, p_incl, small, None if work is None else work[:pos.shape[0]])
    np.multiply(pos, 0.5, out=V)
    np.subtract(p_incl, V, out=V)
    V /= m[:, None]
    cumulate(neg, n_above, n_incl, small, None if work is None else work[:neg.shape[0]])
    np.multiply(neg, 0.5, out=W)
    np.subtract(n_incl, W, out=W)
    W /= n[:, None]
    return p_incl, n_incl, V, W


class RocSweep:
    """Streaming accumulator of truncated AUCs and their Lemma 3 variances for many columns.

    A column pairs a vector of positive counts with a vector of negative counts (per block).
    Columns often share vectors (xAUC(a, b) and xAUC(a, c) share group a's positives), so the
    cumulative counts and the placements are computed once per vector, not once per column.

    Vectorized across columns: the sums Algorithm 1 needs for column (i, j) up to a cutoff are
    entries of four small matrices over all (negative vector, positive vector) pairs, e.g.
    sum over blocks of neg_j V_i = (neg @ V.T)[j, i], accumulated with one product per vector pair
    and block range. Every pending cutoff of a vector sees the same running sums until it is
    crossed, so the sums are snapshotted at the crossing block (where the straddle terms are added)
    and read off the running totals at the end for cutoffs never crossed (alpha = 1).

    ``alphas``: FPR cutoffs in [0, 1] (0 is allowed for curve points); ``m``: total of each
    positive vector, ``n``: of each negative vector, known before the pass (a cheap COUNT in
    SQL); ``pairs``: (positive vector, negative vector) of each column, default (s, s).
    With few columns per vector pair (``DENSE_SHARE``) the running sums are kept per column.
    ``curve_only``: (K,) marks cutoffs whose curve height alone is wanted (the ROC / xROC curve grid): they need
    no sums before their block, so they cost no products, and their AUC and variance come out NaN.
    """

    def __init__(self, alphas, m, n, pairs=None, curve_only=None):
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.m = np.atleast_1d(np.asarray(m, dtype=np.float64))
        self.n = np.atleast_1d(np.asarray(n, dtype=np.float64))
        if pairs is None:
            pairs = [(s, s) for s in range(self.m.size)]
        self.pairs = [(int(i), int(j)) for i, j in pairs]
        S, K = len(self.pairs), self.alphas.size
        cols = np.array(self.pairs, dtype=np.intp).reshape(-1, 2)
        self.col_pos, self.col_neg = cols[:, 0], cols[:, 1]
        self.by_neg = {int(j): np.flatnonzero(self.col_neg == j) for j in np.unique(self.col_neg)}
        self.has_columns = np.zeros(self.n.size, dtype=bool)
        self.has_columns[self.col_neg] = True
        self.dense = S >= DENSE_SHARE * self.n.size * self.m.size
        self.x = self.n[:, None] * self.alphas[None, :]  # cutoffs in units of negatives, (Nv, K)
        self.summed = ~np.zeros(K, dtype=bool) if curve_only is None else ~np.asarray(curve_only, dtype=bool)
        self.p_above = np.zeros(self.m.size)
        self.n_above = np.zeros(self.n.size)
        self.neg_done = np.zeros((self.n.size, K), dtype=bool)
        # running sums over the blocks seen so far, per (negative vector j, positive vector i):
        # neg_j V_i, neg_j V_i^2 (the ROC seen by negatives) and, transposed, pos_i W_j, pos_i W_j^2
        # (dense) or per column (S,) when few vector pairs are columns
        if self.dense:
            self.run = [np.zeros((self.n.size, self.m.size)), np.zeros((self.n.size, self.m.size)),
                        np.zeros((self.m.size, self.n.size)), np.zeros((self.m.size, self.n.size))]
        else:
            self.run = [np.zeros(S) for _ in range(4)]
        self.a1 = np.zeros((S, K))  # sum over the negative mass in [0, alpha) of ROC
        self.a2 = np.zeros((S, K))  # same for ROC^2
        self.s1 = np.zeros((S, K))  # sum over positives above the cutoff of their (capped) FPR
        self.s2 = np.zeros((S, K))
        self.roc_at = np.full((S, K), np.nan)  # ROC(alpha): placement of the boundary negative
        self.tpr_lin = np.full((S, K), np.nan)  # linearly interpolated ROC curve at alpha
        self.pos_through = np.full((S, K), np.nan)  # positives at or above the boundary block
        self.done = np.zeros((S, K), dtype=bool)
        self.scratch = {}  # work arrays reused from chunk to chunk (fresh ones cost page faults)

    def _scratch(self, name: str, shape: tuple, dtype=np.float64) -> np.ndarray:
        have = self.scratch.get(name)
        if have is None or have.shape[0] != shape[0] or have.shape[1] < shape[1]:
            have = self.scratch[name] = np.empty(shape, dtype)
        return have[:, :shape[1]]

    def update(self, pos: np.ndarray, neg: np.ndarray):
        """Consume the next blocks (descending scores): ``pos`` (B, P), ``neg`` (B, Nv) counts.

        Returns (V, W): per block, the half-credit ROC seen by a negative of the block for each
        positive vector, (B, P), and the half-credit FPR seen by a positive for each negative
        vector, (B, Nv), for callers that need covariances between columns sharing a sample.
        """
        pos = np.asarray(pos, dtype=np.float64)
        neg = np.asarray(neg, dtype=np.float64)
        if pos.ndim == 1:
            pos, neg = pos[:, None], neg[:, None]
        V, W = self.update_columns(np.ascontiguousarray(pos.T), np.ascontiguousarray(neg.T))
        return V.T, W.T

    def update_columns(self, pos: np.ndarray, neg: np.ndarray, out=None, small: bool = False):
        """:meth:`update` with vector-major counts, ``pos`` (P, B) and ``neg`` (Nv, B) float64 (no
        transposing copy); returns (V, W) vector-major too. ``out``: optional (p_incl, n_incl, V, W)
        arrays of those shapes that receive the block curves (`block_curves`), for callers that reuse them;
        ``small``: as `cumulate`."""
        B = pos.shape[1]
        if B == 0:
            return np.empty((self.m.size, 0)), np.empty((self.n.size, 0))
        work = self._scratch("whole", (max(pos.shape[0], neg.shape[0]), B), np.int64)
        p_cum, n_incl, V, W = block_curves(pos, neg, self.p_above, self.n_above, self.m, self.n, out, small, work)
        crossings = {}  # negative vector -> (cutoffs crossed in this chunk, their straddling block)
        # a cutoff is crossed only where the vector has negatives: vectors without any in this chunk are skipped
        for j in np.flatnonzero(self.has_columns & (n_incl[:, -1] > self.n_above)).tolist():
            pend = np.flatnonzero(~self.neg_done[j])
            if pend.size:
                J = np.searchsorted(n_incl[j], self.x[j, pend], side="right")
                inside = J < B
                if inside.any():
                    crossings[j] = (pend[inside], J[inside])
        stops = {}  # block index -> negative vectors with a cutoff inside that block
        for j, (k_in, J) in crossings.items():
            for b in np.unique(J[self.summed[k_in]]).tolist():
                stops.setdefault(b, []).append(j)
        snapshots = self._accumulate(pos, neg, V, W, stops)
        if crossings:
            self._cross(crossings, snapshots, pos, neg, p_cum, n_incl)
        self.p_above = p_cum[:, -1].copy()
        self.n_above = n_incl[:, -1].copy()
        return V, W

    def _accumulate(self, pos, neg, V, W, stops: dict) -> dict:
        """Add the chunk to the running sums; return, for each block index b of ``stops`` and each negative
        vector j listed there, the sums over the blocks before b that columns with negatives j need (row j of
        the first two matrices, column j of the last two). Those are matrix-vector products over the block
        ranges between j's stops, so the cost is one pass per vector, not a full product per stop."""
        VV = np.multiply(V, V, out=self._scratch("VV", V.shape))
        WW = np.multiply(W, W, out=self._scratch("WW", W.shape))
        base = [r.copy() for r in self.run]
        by_vector = {}
        for b in sorted(stops):
            for j in stops[b]:
                by_vector.setdefault(j, []).append(b)
        snapshots = {}  # j -> (its stops, (4, columns with negatives j, stops) sums before each stop)
        for j, js_stops in by_vector.items():
            cols = self.by_neg[j]
            snaps = snapshots[j] = (np.array(js_stops), np.empty((4, cols.size, len(js_stops))))
            i = self.col_pos[cols]  # the positive vector of each column with negatives j
            # dense: sums for every positive vector (slices, no gathered copies of the chunk), then the columns'
            i_sums = slice(None) if self.dense else i
            if self.dense:  # rows / columns of the copied matrices, summed in place
                acc = [base[0][j], base[1][j], base[2][:, j], base[3][:, j]]
            else:
                acc = [base[t][cols] for t in range(4)]
            a = 0
            for stop, b in enumerate(js_stops):
                q, w, ww = neg[j, a:b], W[j, a:b], WW[j, a:b]
                acc[0] += V[i_sums, a:b] @ q
                acc[1] += VV[i_sums, a:b] @ q
                acc[2] += pos[i_sums, a:b] @ w
                acc[3] += pos[i_sums, a:b] @ ww
                for t in range(4):
                    snaps[1][t, :, stop] = acc[t][i] if self.dense else acc[t]
                a = b
        if self.dense:
            self.run[0] += count_products(neg, V)
            self.run[1] += count_products(neg, VV)
            self.run[2] += count_products(pos, W)
            self.run[3] += count_products(pos, WW)
        else:
            self.run[0] += paired_dots(neg, self.col_neg, V, self.col_pos)
            self.run[1] += paired_dots(neg, self.col_neg, VV, self.col_pos)
            self.run[2] += paired_dots(pos, self.col_pos, W, self.col_neg)
            self.run[3] += paired_dots(pos, self.col_pos, WW, self.col_neg)
        return snapshots

    def _cross(self, crossings: dict, snapshots: dict, pos, neg, p_incl, n_incl) -> None:
        """Cutoffs fall inside blocks (``crossings``: negative vector j -> (cutoffs, their blocks)): every column
        with negatives j takes the sums before the block (``snapshots``) plus the block's share (the ROC is linear
        across a block). One vectorized step over every (column, crossed cutoff) of the chunk; counts above a
        block are taken only at those blocks."""
        cols, ks, blocks, before = [], [], [], []
        for j, (k_in, j_in) in crossings.items():
            c = self.by_neg[j]
            cols.append(np.repeat(c, k_in.size))
            ks.append(np.broadcast_to(k_in, (c.size, k_in.size)).ravel())
            blocks.append(np.broadcast_to(j_in, (c.size, j_in.size)).ravel())
            sums_before = np.full((4, c.size, k_in.size), np.nan)  # curve-only cutoffs: no sums (NaN)
            summed = self.summed[k_in]
            if summed.any():
                stops, sums = snapshots[j]
                sums_before[:, :, summed] = sums[:, :, np.searchsorted(stops, j_in[summed])]
            before.append(sums_before.reshape(4, -1))  # (4, S_j x K_in)
            self.neg_done[j, k_in] = True
        col, k, b = np.concatenate(cols), np.concatenate(ks), np.concatenate(blocks)
        before = np.concatenate(before, axis=1)  # sums over the blocks above the straddling block
        i, j = self.col_pos[col], self.col_neg[col]
        m = self.m[i]
        q_b = neg[j, b]
        n_above_b = n_incl[j, b] - q_b
        f = (self.x[j, k] - n_above_b) / q_b  # share of the block's negatives inside
        p_b = pos[i, b]
        p_above_b = p_incl[i, b] - p_b
        y0 = p_above_b / m  # ROC where the block starts
        dy = p_b / m  # ROC rise across the block
        inside_value = y0 + 0.5 * dy * f  # mean height of the segment over [t0, alpha]
        r = y0 + dy * f  # ROC(alpha)
        # Every negative of the block has the same influence value f * inside_value + (1 - f) r
        # (the block's negatives are exchangeable); lemma3 adds the outside share's r^2 itself.
        phi = f * inside_value + (1 - f) * r
        t0 = n_above_b / self.n[j]
        w_j = t0 + (self.alphas[k] - t0) * (1 - 0.5 * f)  # int_0^alpha (1 - own share of ROC)
        self.a1[col, k] = before[0] + q_b * f * inside_value  # area under the segment, in negatives
        self.a2[col, k] = before[1] + q_b * (phi * phi - (1 - f) * r * r)
        self.s1[col, k] = before[2] + p_b * w_j
        self.s2[col, k] = before[3] + p_b * w_j * w_j
        self.roc_at[col, k] = self.tpr_lin[col, k] = r
        self.pos_through[col, k] = p_above_b + p_b
        self.done[col, k] = True

    def result(self) -> dict:
        """Per column and cutoff: I(alpha), the two Lemma 3 variance terms and the total variance.

        Finished RESULT_COLUMNS columns at a time: with many groups (groups^2 columns) the temporaries of
        lemma3 would otherwise be several times the size of the result."""
        out = {}
        for lo in range(0, len(self.pairs), RESULT_COLUMNS):
            cols = slice(lo, lo + RESULT_COLUMNS)
            i, j = self.col_pos[cols, None], self.col_neg[cols, None]
            open_ = ~self.done[cols]  # never crossed (alpha = 1): the sums over every block
            if self.dense:
                totals = (self.run[0][j, i], self.run[1][j, i], self.run[2][i, j], self.run[3][i, j])
            else:
                totals = tuple(run[cols, None] for run in self.run)
            a1, a2, s1, s2 = (np.where(open_, total, acc[cols]) for total, acc in zip(
                totals, (self.a1, self.a2, self.s1, self.s2)))
            part = lemma3(a1, a2, s1, s2, self.roc_at[cols], self.tpr_lin[cols], self.pos_through[cols],
                          self.done[cols], self.m[self.col_pos[cols]], self.n[self.col_neg[cols]], self.alphas)
            for name, values in part.items():
                out.setdefault(name, np.empty((len(self.pairs), self.alphas.size)))[cols] = values
        return out


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
