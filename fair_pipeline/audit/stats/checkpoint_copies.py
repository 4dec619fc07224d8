"""The copies `prefix_clusters.PrefixClusterSums` keeps of clusters straddling a checkpoint, per checkpoint and
holding only what that checkpoint's cutoff reads.

The stream passes checkpoint e (a cutoff's threshold on vector u's negatives) once. A cluster whose rows lie on
both sides of it needs its sums as they stood then: they are taken when its first row after e arrives, from its
running sums (unchanged since its last row). The final step reads, at checkpoint e, only vector u's sums
(`prefix_clusters.vector_sums`): u's negatives' count and their sums of the ROC of each vector (G + 2 numbers),
each group's positives' count and their sums of FPR_u (2 G). So a copy is kept per checkpoint it covers, as
those numbers only: 8 with two groups instead of a cluster's 16 running sums. Below FPR 1 the one-way audit forms
only the columns of one vector (a group's or the pooled AUC, `cluster_parts.LastCutoffColumns`): with
``diagonal`` a copy keeps u's negatives' count and ROC_u sums and the positives' count and FPR_u sums of u's own
groups (4 numbers for a group, 2 + 2 G for the pooled vector), the only entries those columns read. The running sums
hold the groups' curves only: a copy's sums of the pooled curve are their weighted sum (`prefix_clusters`).
"""
from __future__ import annotations

import numpy as np

BUCKET_BITS = 13  # copies are ordered by code >> BUCKET_BITS only (a radix sort of small keys), then picked by code


class CheckpointCopies:
    """Per checkpoint passed (numbered 1, 2, ...), the codes of the clusters straddling it and their sums there."""

    def __init__(self, n_groups: int, pooled_weights: np.ndarray, diagonal: bool = False):
        """``pooled_weights``: (2, G) the weight of each group's curve in the pooled one, for negatives (ROC) and
        positives (FPR)."""
        self.G, self.diagonal = int(n_groups), bool(diagonal)
        self.pooled_weights = np.asarray(pooled_weights, dtype=np.float64)
        self.vector_of = [None]  # checkpoint number -> its vector
        self._parts: dict[int, list] = {}  # checkpoint -> [(codes, values (numbers kept, n))]
        self._sorted: dict[int, tuple] | None = None
        self._layouts: dict[int, tuple] = {}

    def passed(self, vector: int) -> None:
        """The stream passed the next checkpoint, a threshold of ``vector``."""
        self.vector_of.append(int(vector))

    def layout(self, u: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For checkpoint vector ``u``: the quantities kept of its negatives, their cells (summed), the groups
        whose positives are kept."""
        if u not in self._layouts:
            G = self.G
            quantities = np.array([0, 1 + u]) if self.diagonal else np.arange(G + 2)
            neg_cells = np.arange(0, 2 * G, 2) if u == G else np.array([2 * u])
            groups = np.array([u]) if self.diagonal and u < G else np.arange(G)
            self._layouts[u] = (quantities, neg_cells, groups)
        return self._layouts[u]

    def take(self, codes: np.ndarray, since: np.ndarray, now: int, run: np.ndarray, straddling: bool = True) -> None:
        """Clusters ``codes`` (distinct), last fed when ``since`` checkpoints were passed and fed again now that
        ``now`` are: their running sums ``run[codes]`` (``run``: (C, 2 G, G + 1)) stood so at every checkpoint in
        (since, now]. Each kept number is gathered from the flat sums (no copy of a cluster's whole sums).
        ``straddling``: the final step reads these clusters' sums at those checkpoints as zeros where no copy is
        kept (their rows continue past them), so copies holding only zeros are not kept."""
        if self._sorted is not None:
            raise RuntimeError("copies taken after they were read")
        flat, Q = run.reshape(-1), run.shape[2]  # quantity q of cell c: c * Q + q further
        base = codes.astype(np.intp) * (run.shape[1] * Q)
        for e in range(int(since.min()) + 1, now + 1):
            mine = np.flatnonzero(since < e)
            if not mine.size:
                continue
            u = self.vector_of[e]
            quantities, neg_cells, groups = self.layout(u)
            at = base if mine.size == codes.size else base[mine]
            if straddling and self.diagonal and u < self.G:
                # a cluster with no rows of group u yet keeps only zeros here: copies of the others only
                count = at + 2 * u * Q  # u's negatives' count, its positives' one Q further
                held = (np.take(flat, count) + np.take(flat, count + Q)) > 0
                if not held.all():
                    mine, at = mine[held], at[held]
                if not mine.size:
                    continue
            values = np.empty((quantities.size + 2 * groups.size, mine.size))  # (numbers kept, clusters)
            for n, q in enumerate(quantities):  # u's negatives, summed over their cells
                if q == self.G + 1 and n == q:  # every group's ROC sums are in the rows above
                    np.dot(self.pooled_weights[0], values[1:q], out=values[n])
                else:
                    self._gather(flat, at, neg_cells, q, Q, values[n])
            n = quantities.size
            for q in (0, 1 + u):  # each kept group's positives: count, then FPR_u sums
                for g in groups:
                    self._gather(flat, at, [2 * g + 1], q, Q, values[n])
                    n += 1
            self._parts.setdefault(e, []).append((codes[mine], values))

    def _gather(self, flat, at, cells, q, Q, out) -> None:
        """Quantity ``q`` of the clusters at flat offsets ``at``, summed over ``cells`` (of one class), into ``out``;
        q = G + 1, the pooled curve's sums, as the weighted sum of the groups' (quantities 1 .. G)."""
        terms = [(None, q)] if q <= self.G else [(w, 1 + g) for g, w in enumerate(self.pooled_weights[cells[0] % 2])]
        first = True
        for cell in cells:
            for weight, kept in terms:
                part = np.take(flat, at + (cell * Q + kept), out=out if first else None)
                if weight is not None:
                    part *= weight
                if not first:
                    out += part
                first = False

    def _finish(self) -> None:
        """Each checkpoint's copies in one array, by bucket of codes (a cluster is copied at most once per
        checkpoint)."""
        self._sorted = {}
        for e, parts in self._parts.items():
            codes = np.concatenate([p[0] for p in parts])
            bucket = codes >> BUCKET_BITS
            bucket = bucket.astype(np.int16) if bucket.max() < np.iinfo(np.int16).max else bucket
            order = np.argsort(bucket, kind="stable")
            values = np.empty((parts[0][1].shape[0], codes.size))
            for n, row in enumerate(values):  # number by number: one-dimensional gathers
                np.take(np.concatenate([p[1][n] for p in parts]), order, out=row)
            self._sorted[e] = (bucket[order], codes[order], values)
        self._parts = None

    def scatter(self, e: int, lo: int, hi: int, neg: np.ndarray, pos: np.ndarray) -> None:
        """Write the copies at checkpoint ``e`` of clusters lo..hi-1 over ``neg`` (G + 2, w) (vector u's negatives'
        sums) and ``pos`` (2, G, w) (each group's positives' count and FPR_u sums), u the checkpoint's vector."""
        if self._sorted is None:
            self._finish()
        held = self._sorted.get(int(e))
        if held is None:
            return
        bucket, codes, values = held
        # bounds of the buckets' own type (other keys would convert the whole array at every call)
        top = min(((hi - 1) >> BUCKET_BITS) + 1, int(np.iinfo(bucket.dtype).max))
        a, b = np.searchsorted(bucket, np.array([lo >> BUCKET_BITS, top], dtype=bucket.dtype))
        codes, values = codes[a:b], values[:, a:b]
        if codes.size and (codes.min() < lo or codes.max() >= hi):  # a bucket shared with other chunks
            mine = (codes >= lo) & (codes < hi)
            codes, values = codes[mine], values[:, mine]
        if not codes.size:
            return
        at = codes - lo
        u = self.vector_of[e]
        quantities, _, groups = self.layout(u)
        # entry by entry: one-dimensional scatters, several times cheaper than a two-dimensional fancy index; the
        # entries a diagonal copy does not keep are left as they are (the final step reads none of them at e)
        for n, q in enumerate(quantities):
            neg[q, at] = values[n]
        n = quantities.size
        for side in range(2):
            for g in groups:
                pos[side, g, at] = values[n]
                n += 1
