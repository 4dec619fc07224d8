"""Rows in descending score order (a sorted SQL stream) into the sweep, without building a table per batch.

When nearly every score is distinct, DuckDB streams the rows themselves: (score, cell = group code * 2 + label).
A run of distinct scores is a run of one-row blocks, so a row's block counts are a single 1 in its cell: they are
written into one (cells x blocks) buffer reused by every chunk, instead of the fresh arrays per batch of
`blocks.SortedCellBlocks` (at 1e7 rows those cost a page fault per 4 KB, a fifth of the audit's CPU). A batch
holding tied scores goes through `SortedCellBlocks`, which sums them. The last row of every batch is held back
(in that `SortedCellBlocks`), since the next batch may continue its score.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.aggregate import StreamingAudit
from fair_pipeline.audit.stats.blocks import SortedCellBlocks
from fair_pipeline.audit.stats.grid_audit import CHUNK_BLOCKS


class SortedRowFeed:
    """Feeds ``stream`` with batches of (scores, cells) in descending score order; `finish` after the last."""

    def __init__(self, stream: StreamingAudit, chunk_rows: int = CHUNK_BLOCKS):
        self.stream = stream
        self.n_cells = 2 * len(stream.groups)
        self.chunk_rows = int(chunk_rows)
        self.blocks = SortedCellBlocks(self.n_cells)  # tied batches, and the held-back last row
        self.table = np.zeros((self.n_cells, self.chunk_rows), dtype=np.int8)  # the sweep cumulates it as integers
        self.flat = self.table.reshape(-1)
        self.spots = np.arange(self.chunk_rows)  # a row's slot in its chunk
        self.at = np.empty(self.chunk_rows, dtype=np.intp)
        self.tied = np.empty(0, dtype=bool)

    def push(self, scores: np.ndarray, cells: np.ndarray) -> None:
        """Next rows: ``scores`` (float64, non-increasing, below every earlier one or equal to the last) and their
        ``cells`` (integers)."""
        n = scores.size
        if n == 0:
            return
        held = self.blocks.carry
        if n > self.tied.size:
            self.tied = np.empty(n, dtype=bool)
        tied = np.equal(scores[1:], scores[:-1], out=self.tied[:n - 1])
        if (held is not None and held[0][-1] == scores[0]) or tied.any():
            self._feed_blocks(self.blocks.push(scores, cells))
            return
        self._feed_blocks(self.blocks.finish())  # the held-back score: complete, this batch starts below it
        self._feed_distinct(scores[:-1], cells[:-1])
        self.blocks.push(scores[-1:], cells[-1:])  # held back (a batch of one row returns no block)

    def finish(self) -> None:
        self._feed_blocks(self.blocks.finish())

    def _feed_blocks(self, done) -> None:
        if done is not None:
            scores, counts = done
            self.stream.update_columns(scores, counts[1::2], counts[0::2])

    def _feed_distinct(self, scores: np.ndarray, cells: np.ndarray) -> None:
        """Rows of distinct scores, each its own block, chunk by chunk through the reused count table."""
        step = self.chunk_rows
        for lo in range(0, scores.size, step):
            hi = min(scores.size, lo + step)
            width = hi - lo
            self.table.fill(0)
            # the row in slot k with cell c counts 1 at table[c, k]: flat index c * chunk_rows + k
            at = np.multiply(cells[lo:hi], step, out=self.at[:width], casting="unsafe")
            at += self.spots[:width]
            self.flat[at] = 1
            table = self.table[:, :width]
            self.stream.update_columns(scores[lo:hi], table[1::2], table[0::2])
