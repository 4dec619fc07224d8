"""Two-way (item x query) clustered pairwise accuracies from chunks of whole queries, in bounded memory.

A query holds all of its pairs, so everything the two-way variance needs from a query is computed from that
query's rows alone (`query_cell_sums`): its pairs and correct pairs per (better group, worse group) cell (the query
cluster's totals), and per item shown in it the pairs touching the item there, each once (an item x query cell's
totals; summed over queries they are the item cluster's totals). The engines run it per chunk of whole queries:
DuckDB's stream here (`TwoWayMoments`), Spark's executors per query group (`audit.spark_pairwise`). With the
totals over all queries known (the first pass), query and cell clusters turn into moments at once; only the item
totals (items x G x G) are kept until the end. Equal to `pairwise_clustered.PairwiseClusters` with (item, query)
clusters, which computes the same totals over all rows at once.
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.pairwise_clustered import (
    inside_sides,
    less_half_inside,
    pair_codes,
    row_sides,
    sum_by,
    sum_sides,
)
from fair_pipeline.audit.stats.pairwise_moments import PairwiseMoments, pairwise_contrasts

ITEM, QUERY, CELL = 0, 1, 2  # the streams of a two-way `PairwiseMoments`: V_item + V_query - V_item x query
TWO_WAY_SIGNS = (1.0, 1.0, -1.0)


def query_cell_sums(qcode, item, s, codes, y, n_groups: int, weights=None):
    """From rows of whole queries (a row: one item of one group with one score and label; ``weights`` the rows it
    stands for): (query codes (Q,), query T, C (Q, G, G)), and per item x query cell (cell query codes, cell item
    codes, T, C (cells, G, G)) the pairs with one end in the cell and the other outside it, and the correct ones."""
    qcode, item = np.asarray(qcode, dtype=np.int64), np.asarray(item, dtype=np.int64)
    codes, y = np.asarray(codes, dtype=np.intp), np.asarray(y, dtype=bool)
    w = np.ones(qcode.size) if weights is None else np.asarray(weights, dtype=np.float64)
    t, c = row_sides(qcode, s, codes, y, n_groups, w)  # each row's line of its (G, G) pairs table
    t *= w[:, None]
    c *= w[:, None]
    cell_query, cell_item, cell = pair_codes(qcode, item)
    cell_T, cell_C = sum_sides(cell, cell_query.size, codes, y, t, c)
    less_half_inside(cell_T, cell_C, cell, codes, y, inside_sides(cell, s, codes, y, n_groups, w))
    queries, q = np.unique(qcode, return_inverse=True)
    query_T, query_C = sum_sides(q.ravel(), queries.size, codes, y, t, c)
    return (queries, query_T / 2, query_C / 2), (cell_query, cell_item, cell_T, cell_C)


class TwoWayMoments:
    """Item x query clustered moments of every pairwise figure, fed chunks of whole queries after the totals
    (G, G) over all queries are known; items are dense codes 0..n_items-1."""

    def __init__(self, n_groups: int, tot_T, tot_C, n_items: int):
        self.G = n_groups
        self.moments = PairwiseMoments.empty(pairwise_contrasts(n_groups), tot_T, tot_C, TWO_WAY_SIGNS)
        self.item_T = np.zeros((n_items, n_groups, n_groups))
        self.item_C = np.zeros((n_items, n_groups, n_groups))

    def update(self, qcode, item, s, codes, y, weights=None) -> None:
        (_, qT, qC), (_, items, cT, cC) = query_cell_sums(qcode, item, s, codes, y, self.G, weights)
        self.moments.add(QUERY, qT, qC)
        self.moments.add(CELL, cT, cC)
        shown, code = np.unique(items, return_inverse=True)
        self.item_T[shown] += sum_by(code, cT, shown.size)
        self.item_C[shown] += sum_by(code, cC, shown.size)

    def result(self) -> PairwiseMoments:
        seen = (self.item_T != 0).any(axis=(1, 2))
        return self.moments.add(ITEM, self.item_T[seen], self.item_C[seen])
