"""Dense cluster codes for integer cluster ids, numbered in the stream itself.

The one pass in score order (`prefix_clusters`) keys its per-cluster sums by dense codes 0..C-1. Numbering the
distinct keys in SQL costs a GROUP BY over the rows and a join of every row to the numbered keys (about half the
sort's CPU); integer ids whose range is a small multiple of the rows can instead index a lookup table, and a key
takes the next code when the stream first meets it. In descending score order that numbers the clusters by their
highest score, as the SQL numbering does, so the rows of a batch carry nearby codes.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.validation import AuditInputError

ID_RANGE_PER_ROW = 4  # integer ids spread wider than this many values per row are numbered in SQL (table memory)


def fits_lookup_table(lo: int, hi: int, rows: int) -> bool:
    """Can ids in [lo, hi] of a stream of ``rows`` rows be numbered through a lookup table of hi - lo + 1 entries?"""
    return rows > 0 and 0 <= hi - lo < max(ID_RANGE_PER_ROW * rows, 1) and hi - lo < np.iinfo(np.int32).max


class FirstSeenCodes:
    """Codes 0, 1, ... of the integer ids in [``lo``, ``hi``], given in the order the stream first meets them."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = int(lo), int(hi)
        self.table = np.full(self.hi - self.lo + 1, -1, dtype=np.int32)
        self.count = 0

    def __call__(self, ids) -> np.ndarray:
        """The codes of a batch of ids (new ids numbered in their order of appearance in the batch)."""
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise AuditInputError(f"integer cluster ids expected, got {ids.dtype}")
        if not ids.size:
            return np.zeros(0, dtype=np.intp)
        at = np.subtract(ids, self.lo, dtype=np.intp)
        if at.view(np.uintp).max() > self.hi - self.lo:  # (one pass: an id below the range wraps to a huge offset)
            lo, hi = int(ids.min()), int(ids.max())
            raise AuditInputError(f"cluster id {lo if lo < self.lo else hi} outside the range [{self.lo}, {self.hi}] "
                                  "read before the stream (did the file change?)")
        codes = self.table[at]
        fresh = np.flatnonzero(codes < 0)
        if fresh.size:
            keys = at[fresh]
            # each new id's first row, without a sort: the smallest row number scattered onto its table entry
            # (the entries of new ids are free until numbered)
            row = np.arange(keys.size, dtype=np.int32)
            self.table[keys] = np.iinfo(np.int32).max
            np.minimum.at(self.table, keys, row)
            first = keys[self.table[keys] == row]  # the new ids in order of first appearance
            self.table[first] = np.arange(self.count, self.count + first.size, dtype=np.int32)
            self.count += first.size
            codes[fresh] = self.table[keys]
        return codes.astype(np.intp)
