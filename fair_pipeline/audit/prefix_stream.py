"""The sweep and the cluster-robust sums of an audit in one DuckDB pass in descending score order.

Every row carries dense codes of its cluster key(s), so its place on every ROC curve is a running prefix sum
(`stats.prefix_clusters.PrefixClusterSums`) and nothing is sorted a second time by cluster or joined back to
its block. Used by `audit_file` (rows of any file) and by the fairness_audit asset's streamed path
(`audit.streamed`: the rescored held-out rows).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats import StreamingAudit
from fair_pipeline.audit.stats.snapshot_clusters import SnapshotClusterSums, fits_snapshots
from fair_pipeline.audit.stats.first_seen_codes import FirstSeenCodes
from fair_pipeline.audit.stats.grid_audit import build_columns, variance_alphas
from fair_pipeline.audit.stats.prefix_clusters import PrefixClusterSums, SortedRowBlocks
from fair_pipeline.audit.stats.repeated_cells import StreamCellCodes
from fair_pipeline.audit.stats.singleton_cells import CellCodes, IntersectionSums

# rows per update of the cluster sums: an update's per-row temporaries (curves, bands, weights) stay cache-sized; its
# per-cluster work spans only the codes its rows carry (codes follow the score order, `cluster_codes`)
CLUSTER_FEED_ROWS = 1 << 16
INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}  # fit int64
KEY_BATCH_ROWS = 1 << 20  # rows per batch of two-way's cell keys (`integer_cells`)


def integer_id_ranges(con, src: str, params: list, columns: list[str]) -> tuple[int, list[tuple]] | None:
    """(rows of ``src``, per column (non-NULL ids, lowest, highest)) when every column is of an integer type that
    fits int64 (ids usable as array offsets), else None."""
    types = con.sql(f"SELECT {', '.join(columns)} FROM ({src}) LIMIT 0", params=params).types
    if any(str(t) not in INTEGER_TYPES for t in types):
        return None
    bounds = ", ".join(f"count({c}), min({c}), max({c})" for c in columns)
    rows, *ends = con.execute(f"SELECT count(*), {bounds} FROM ({src})", params).fetchall()[0]
    return int(rows), [tuple(ends[3 * n:3 * n + 3]) for n in range(len(columns))]


def cluster_key_sets(n_cluster_cols: int) -> list[list[str]]:
    """The keys of each clustering stream: one-way [c0]; two-way [c0], [c1] and the pairs (c0, c1)."""
    return [["c0"]] if n_cluster_cols == 1 else [["c0"], ["c1"], ["c0", "c1"]]


def cluster_codes(con, src: str, params: list, n_cluster_cols: int,
                  impressions: str = "count(*)") -> tuple[str, list[int], CellCodes | None]:
    """Temp tables numbering the distinct cluster keys of ``src`` (columns c0[, c1], score s) densely (0..C-1) in
    descending order of each cluster's highest score; returns the joins that add the codes to rows aliased ``r``
    (`code_expressions`), each stream's C and, two-way, the intersection's `CellCodes`. A cluster's rows tend to
    lie near its highest score, so in the score-ordered stream nearby rows carry nearby codes: the per-cluster sums
    touch a narrow range of codes. Two-way's intersection numbers only the cells holding more than one impression
    (``impressions``: the SQL aggregate counting a cell's impressions), fetched as their item and query codes: in
    a click log nearly every cell is shown once, so numpy looks a row's cell up among a few sorted keys instead of
    DuckDB joining every row to a cell table; the other rows take code `SINGLE` (`stats.singleton_cells`)."""
    joins, sizes = [], []
    for n, keys in enumerate(cluster_key_sets(n_cluster_cols)[:2]):
        name = f"__cluster_codes_{n}"
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {keys[0]}, "
                    f"CAST(row_number() OVER (ORDER BY max(s) DESC) - 1 AS BIGINT) AS code "
                    f"FROM ({src}) GROUP BY {keys[0]}", params)
        sizes.append(int(con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]))
        joins.append(f"JOIN {name} k{n} USING ({keys[0]})")
    if n_cluster_cols == 1:
        return " ".join(joins), sizes, None
    cells = con.execute(f"SELECT k0.code AS first, k1.code AS second, {CELL_CODE} "
                        f"FROM ({repeated_cells(src, impressions)}) d "
                        f"JOIN __cluster_codes_0 k0 USING (c0) JOIN __cluster_codes_1 k1 USING (c1)",
                        params).fetchnumpy()
    cells = CellCodes(cells["first"], cells["second"], cells["code"], sizes[1])
    sizes.append(cells.size)
    return " ".join(joins), sizes, cells


CELL_CODE = "CAST(row_number() OVER (ORDER BY top DESC) - 1 AS BIGINT) AS code"


def repeated_cells(src: str, impressions: str = "count(*)") -> str:
    """The SQL of two-way's (c0, c1) cells holding more than one impression, with their highest score ``top``."""
    return f"SELECT c0, c1, max(s) AS top FROM ({src}) GROUP BY c0, c1 HAVING {impressions} > 1"


def integer_cells(con, src: str, params: list, numbering: list[FirstSeenCodes]) -> CellCodes:
    """Two-way's repeated cells keyed by their integer item and query ids (numbered in the stream,
    `stats.first_seen_codes`): every row's cell key read in one scan and sorted (`stats.repeated_cells`), no
    GROUP BY over the cells and no cluster table joined to the rows."""
    n_second, lo = numbering[1].hi - numbering[1].lo + 1, (numbering[0].lo, numbering[1].lo)
    n = len(params)  # ``src`` numbers its parameters ($1, ...): the bounds come after them
    key = (f"(CAST(c0 AS BIGINT) - CAST(${n + 1} AS BIGINT)) * CAST(${n + 2} AS BIGINT) "
           f"+ (CAST(c1 AS BIGINT) - CAST(${n + 3} AS BIGINT))")
    keys = [batch.column(0).to_numpy() for batch in
            con.sql(f"SELECT {key} AS k FROM ({src})", params=[*params, int(lo[0]), int(n_second), int(lo[1])])
            .to_arrow_reader(KEY_BATCH_ROWS)]
    return StreamCellCodes(np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64), n_second, lo=lo)


def code_expressions(n_streams: int) -> list[str]:
    """The SQL of the codes rows joined by `cluster_codes` carry: the items' [and the queries'] (two-way's
    intersection codes come from `CellCodes`)."""
    return [f"k{n}.code" for n in range(min(n_streams, 2))]


def code_columns(sizes: list[int]) -> str:
    return ", ".join(code_expressions(len(sizes)))


def _columns(batches: list) -> list:
    """The columns of Arrow record batches as numpy arrays, concatenated (one batch's as they are: no copy)."""
    if len(batches) == 1:
        return [batches[0].column(j).to_numpy(zero_copy_only=False) for j in range(batches[0].num_columns)]
    return [np.concatenate([b.column(j).to_numpy(zero_copy_only=False) for b in batches])
            for j in range(batches[0].num_columns)]


def column_pairs(n_groups: int, compared=None) -> list[tuple[int, int]]:
    """(positive vector, negative vector) of every column of an audit of ``n_groups`` groups (``compared``: the
    pairs of groups compared, default all; `stats.comparisons`)."""
    return [pair for _, pair in build_columns(n_groups, n_groups > 1, compared)]


def cluster_sums(stream: StreamingAudit, sizes: list[int], split_singletons: bool = True,
                 diagonal: bool = False) -> list:
    """One empty `PrefixClusterSums` per clustering stream (``sizes``: its number of cluster codes; two-way's
    second, the queries, `SnapshotClusterSums`); two-way's intersection stream also sums its one-impression cells
    apart (`IntersectionSums`) unless ``split_singletons`` is false (a score range swept on its own cannot tell a
    cell's one impression from a cell whose other impressions lie in other ranges). ``diagonal``: the sums are
    read below FPR 1 for the groups' and the pooled AUC only (`StreamingAudit.report`), so copies keep less."""
    alphas, pairs = variance_alphas(stream.cutoffs), column_pairs(len(stream.groups), stream.compared)
    intersection = IntersectionSums if split_singletons else PrefixClusterSums
    # a query's rows span the score range: its sums are copied at every checkpoint (`stats.snapshot_clusters`)
    # unless the queries are so many that the copies would outweigh one copy of the running sums per row
    rows = float(np.sum(stream.n_pos) + np.sum(stream.n_neg))
    queries = SnapshotClusterSums if len(sizes) > 1 and fits_snapshots(sizes[1], rows, len(stream.groups), alphas.size) \
        else PrefixClusterSums
    if len(sizes) == 1:
        return [PrefixClusterSums(stream.n_pos, stream.n_neg, alphas, pairs, sizes[0], diagonal=diagonal)]
    kinds = [PrefixClusterSums, queries, intersection]
    return [kind(stream.n_pos, stream.n_neg, alphas, pairs, size, diagonal=diagonal) for kind, size in zip(kinds, sizes)]


def signed_streams(sums: list) -> list:
    """(sign, sums) per clustering stream for ``report(prefix=...)``: two-way adds the one-way covariances
    and subtracts the intersection's."""
    return [(1, sums[0])] if len(sums) == 1 else [(1, sums[0]), (1, sums[1]), (-1, sums[2])]


def sweep_with_cluster_sums(batches, stream: StreamingAudit, sizes: list[int], numbering=None,
                            cells: CellCodes | None = None, counted: bool = True) -> list:
    """Feed Arrow batches of rows (score, cell = group code * 2 + label, count, cluster codes per stream) in
    descending score order into the sweep ``stream`` and into one `PrefixClusterSums` per clustering stream;
    returns the signed sums for ``stream.report(prefix=...)``. ``numbering``: the rows carry integer ids instead
    of codes, numbered as they arrive (a `stats.first_seen_codes.FirstSeenCodes`, or one per id column; ``sizes``
    then bounds the ids' number). ``cells``: two-way's rows carry the item and query codes (or ids) only, and
    their intersection code is looked up (`cluster_codes`, `integer_cells`). Without ``counted`` the rows carry
    no count column: each is one impression (a sorted stream of the rows themselves)."""
    sums = cluster_sums(stream, sizes, diagonal=True)
    feed_rows(batches, stream, sums, numbering, cells, counted)
    for acc, ids in zip(sums, _numberings(numbering)):
        acc.shrink(ids.count)
    return signed_streams(sums)


def _numberings(numbering) -> list:
    return [] if numbering is None else list(numbering) if isinstance(numbering, (list, tuple)) else [numbering]


def feed_rows(batches, stream: StreamingAudit, sums: list[PrefixClusterSums], numbering=None,
              cells: CellCodes | None = None, counted: bool = True) -> None:
    """`sweep_with_cluster_sums` into given sums (e.g. started at a score range's offsets)."""
    G = len(stream.groups)
    blocks = SortedRowBlocks(2 * G)

    def columns(pending):
        cols = _columns(pending)
        if not counted:
            cols.insert(2, np.ones(cols[0].size))
        if cells is not None:  # looked up by the codes or ids the rows carry, before those are numbered
            cols.append(cells.lookup(cols[3], cols[4]))
        for n, ids in enumerate(_numberings(numbering)):
            cols[3 + n] = ids(cols[3 + n])
        return cols

    def feed(done) -> None:
        if done is None:
            return
        scores, table, row_block, cell, counts, *codes = done
        pos, neg = table[1::2], table[0::2]
        curves = stream.update_columns(scores, pos, neg, keep_curves=True)  # reused by every clustering stream
        label = cell & 1
        rows = (pos, neg, row_block, cell >> 1, counts * label, counts * (1 - label))
        # two-way's item and query streams take every row: their rows' shared work is done once
        sums[0].update(*rows, codes[0], curves, also=list(zip(sums[1:2], codes[1:2])))
        for acc, code in zip(sums[2:], codes[2:]):
            acc.update(*rows, code, curves)

    pending, rows = [], 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        if rows >= CLUSTER_FEED_ROWS:
            feed(blocks.push(*columns(pending)))
            pending, rows = [], 0
    if pending:
        feed(blocks.push(*columns(pending)))
    feed(blocks.finish())
