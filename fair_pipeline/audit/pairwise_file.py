"""Within-query pairwise accuracies of a file audited through DuckDB (`audit.files.audit_file`'s ``query``), streamed
in chunks of whole queries, two-way clustered by item and query when an item column is given.

DuckDB aggregates the rows per (query, group[, item], score) into a temporary table ordered by query (spilled to
disk under the connection's memory limit), read twice: the first pass gives every figure and the totals over all
queries, the second the item x query clustered moments (`stats.pairwise_cells`). Memory holds one chunk of rows,
groups x groups tables and, with items, the per-item totals (items x groups x groups).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.prefix_stream import integer_id_ranges
from fair_pipeline.audit.stats.pairwise import (
    TWO_WAY_DIMS,
    PairwiseAccumulator,
    PairwiseResult,
    add_query_counts,
    clustered_result,
    labelled_rows,
    query_clustered_result,
)
from fair_pipeline.audit.stats.pairwise_cells import TwoWayMoments

TABLE = "_pairwise_rows"


def _whole_queries(con, batch_rows: int):
    """Chunks (DataFrames) of the aggregated rows, each holding whole queries."""
    carry = None
    for batch in con.sql(f"SELECT * FROM {TABLE} ORDER BY q").to_arrow_reader(batch_rows):
        df = batch.to_pandas()
        if carry is not None:
            df = pd.concat([carry, df], ignore_index=True)
        last = df["q"].iloc[-1]
        carry = df[df["q"] == last]  # the last query may continue in the next batch
        done = df[df["q"] != last]
        if len(done):
            yield done
    if carry is not None and len(carry):
        yield carry


def _aggregate(con, src: str, params: list, item: str | None) -> int:
    """The (query, group[, item code], score) -> n_pos, n_neg table; returns the number of item codes (0 without)."""
    if item is None:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {TABLE} AS SELECT q, g, s, "
                    "COUNT(*) FILTER (WHERE l = 1) AS n_pos, COUNT(*) FILTER (WHERE l = 0) AS n_neg "
                    f"FROM ({src}) GROUP BY q, g, s", params)
        return 0
    lo, n_codes = _integer_item_range(con, src, params, item)
    if lo is not None:  # integer ids of a range no wider than the rows: the id less the lowest is the code
        con.execute(f"CREATE OR REPLACE TEMP TABLE {TABLE} AS SELECT q, g, i, s, COUNT(*) FILTER (WHERE l = 1) AS n_pos, "
                    "COUNT(*) FILTER (WHERE l = 0) AS n_neg FROM (SELECT q, g, s, l, "
                    f"CAST({item} AS BIGINT) - CAST(${len(params) + 1} AS BIGINT) AS i FROM ({src})) GROUP BY q, g, i, s",
                    [*params, lo])  # ``src`` numbers its parameters ($1, ...): the lowest id comes after them
        return n_codes
    con.execute(f"CREATE OR REPLACE TEMP TABLE {TABLE} AS WITH r AS (SELECT q, g, s, l, {item} AS i FROM ({src})), "
                "items AS (SELECT i, CAST(row_number() OVER () - 1 AS BIGINT) AS code FROM (SELECT DISTINCT i FROM r)) "
                "SELECT r.q, r.g, items.code AS i, r.s, COUNT(*) FILTER (WHERE r.l = 1) AS n_pos, "
                "COUNT(*) FILTER (WHERE r.l = 0) AS n_neg FROM r JOIN items ON items.i IS NOT DISTINCT FROM r.i "
                "GROUP BY r.q, r.g, items.code, r.s", params)
    [(n_items,)] = con.execute(f"SELECT COALESCE(max(i) + 1, 0) FROM {TABLE}").fetchall()
    return int(n_items)


def _integer_item_range(con, src: str, params: list, item: str) -> tuple[int | None, int]:
    """(lowest id, ids' range) when ``item`` is an integer column without NULLs whose range is no wider than the
    rows (so the per-item totals take no more memory than numbering the distinct ids would), else (None, 0): the
    ids then need no table of distinct ids joined to every row."""
    found = integer_id_ranges(con, src, params, [item])
    if found is None:
        return None, 0
    rows, [(ids, lo, hi)] = found
    if lo is None or ids < rows or int(hi) - int(lo) + 1 > rows:
        return None, 0
    return int(lo), int(hi) - int(lo) + 1


def stream_pairwise(con, src: str, params: list, groups: list, batch_rows: int, confidence: float, margins=None,
                    item: str | None = None) -> PairwiseResult:
    """Pairwise accuracies of ``src`` (columns q, g, s, l and ``item``, a column of ``src`` holding item ids):
    two-way clustered (new items and new queries) with ``item``, else query-clustered (these items, new queries)."""
    levels = np.array(groups, dtype=object)
    acc = PairwiseAccumulator(levels)
    try:
        n_items = _aggregate(con, src, params, item)
        for df in _whole_queries(con, batch_rows):
            add_query_counts(acc, df["q"], df["g"], df["s"], df["n_pos"], df["n_neg"])
        matrix, marginals, parity, overall = acc.tables(confidence)
        gaps = acc.gaps(confidence, margins)
        if item is None:
            return query_clustered_result(matrix, marginals, parity, overall, None, gaps)
        Ct, Tt = acc.sums["matrix"][:2]
        two_way = TwoWayMoments(levels.size, Tt, Ct, n_items)
        index = pd.Index(levels)  # a hash lookup of the group column (a per-row map of its strings costs ~10x)
        for df in _whole_queries(con, batch_rows):
            rows = labelled_rows(pd.factorize(df["q"])[0], df["i"], df["s"], index.get_indexer(df["g"]), df["n_pos"],
                                 df["n_neg"])
            two_way.update(*rows)
        return clustered_result(two_way.result(), levels, matrix, marginals, parity, overall, None, gaps, "two_way",
                                confidence, margins, dims=TWO_WAY_DIMS)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {TABLE}")
