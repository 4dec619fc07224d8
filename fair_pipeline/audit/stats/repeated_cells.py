"""Two-way clustering's repeated (item, query) cells found among every row's integer key and numbered in the stream.

The intersection stream keeps per-cluster sums only for cells of more than one impression (`singleton_cells`). With
integer item and query ids each row's cell is one int64 key, (item id - lo) x queries + (query id - lo): a sort of
the keys (numpy sorts integers in a few ns each, where a GROUP BY over ~rows cells hashes every one) finds the
repeated cells, and the stream in descending score order numbers them as it first meets them, as it numbers items
and queries (`first_seen_codes`): codes follow each cell's highest score, so a batch's rows carry nearby codes.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.first_seen_codes import FirstSeenCodes
from fair_pipeline.audit.stats.singleton_cells import SINGLE, CellCodes


def repeated_keys(keys) -> np.ndarray:
    """The distinct values occurring more than once in ``keys`` (int64), ascending; sorts ``keys`` in place."""
    keys = np.asarray(keys, dtype=np.int64)
    keys.sort()
    again = keys[1:][keys[1:] == keys[:-1]]
    return again[np.r_[True, again[1:] != again[:-1]]] if again.size else again


class StreamCellCodes(CellCodes):
    """`CellCodes` of the cells whose key occurs more than once in ``keys`` (every row's key, as above; sorted in
    place), coded 0, 1, ... in the order ``lookup`` first meets them."""

    def __init__(self, keys, n_second: int, lo=(0, 0)):
        n_second = max(int(n_second), 1)
        repeated = repeated_keys(keys)
        first, second = np.divmod(repeated, n_second)
        super().__init__(first + int(lo[0]), second + int(lo[1]), np.arange(repeated.size), n_second, lo=lo)
        self.numbering = FirstSeenCodes(0, max(repeated.size - 1, 0))

    def lookup(self, first, second) -> np.ndarray:
        out = super().lookup(first, second)
        hit = np.flatnonzero(out != SINGLE)
        if hit.size:
            out[hit] = self.numbering(out[hit])
        return out
