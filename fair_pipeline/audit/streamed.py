"""One scored output audited through DuckDB in batches: Python holds a batch, never a day's rows or score grid.

The held-out rows (`cluster_counts` / `score_counts` / `item_counts` of `audit.sql`; one row per impression
when logged scores are continuous) are written once to a Parquet file in DuckDB's spill directory
(`spill_rows`). Per output (`audit_spilled`):

1. its scores are computed batch by batch and written with the rows' group, cluster keys and counts;
2. without clustering, DuckDB groups them into distinct-score blocks (``GROUP BY score ORDER BY score DESC``,
   one count column per group and class), which stream into the sweep (`StreamingAudit`);
3. for a cluster-robust variance, the same pass instead streams the rows themselves in descending score order,
   each with dense codes of its cluster key(s) (`audit.prefix_stream`): the sweep and the per-cluster
   influence sums are fed together, so nothing is sorted a second time by cluster or joined back to its block.

DuckDB runs under the warehouse's `memory_limit` and spills its hash tables and sorts. The results equal the
in-memory `audit_aggregates` of the same table (tests/audit/test_streamed.py): counts exactly, estimates to
rounding (the influence sums of a cluster are added in another order).
"""
from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.audit.prefix_stream import cluster_codes, code_expressions, sweep_with_cluster_sums
from fair_pipeline.audit.stats import AuditInputError, AuditReport, StreamingAudit
from fair_pipeline.audit.stats.grid_audit import CLUSTER_BATCH_ROWS
from fair_pipeline.audit.stats.validation import as_cutoffs, as_scores

BATCH_ROWS = CLUSTER_BATCH_ROWS // 4  # rows per batch of every pass (a batch's temporaries: tens of MB)


@dataclasses.dataclass(frozen=True)
class SpilledRows:
    """The held-out rows in a Parquet file: ``group``, the cluster columns, ``score`` (logged) or item features,
    ``n_pos``, ``n_neg``; ``rows``: their number."""

    path: Path
    cluster_cols: tuple[str, ...]
    rows: int


def scratch_dir(con) -> contextlib.AbstractContextManager[str]:
    """A directory removed on exit, inside the connection's DuckDB spill directory (the disk sized for a day)."""
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0] or None
    if spill:
        Path(spill).mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix="fair_audit_", dir=spill)


def _write_batches(path: Path, batches) -> int:
    """Arrow record batches (or tables) into one Parquet file; returns the rows written."""
    writer, rows = None, 0
    try:
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(str(path), batch.schema)
            writer.write(batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch]))
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def spill_rows(engine, sql: str, params: dict, cluster_cols: tuple[str, ...], directory: str, name: str,
               batch_rows: int | None = None) -> SpilledRows:
    """Run ``sql`` on the warehouse engine (`Warehouse.stream_batches`: DuckDB, or Spark, whose aggregates reach the
    driver a batch at a time) and stream its result into ``directory/name.parquet``, a local file."""
    path = Path(directory) / f"{name}.parquet"
    rows = _write_batches(path, engine.stream_batches(sql, params, batch_rows or BATCH_ROWS))
    if not rows:  # an empty result has no batch to take the schema from: write an empty file
        pq.write_table(engine.query_arrow(f"SELECT * FROM ({sql}) LIMIT 0", params).schema.empty_table(), str(path))
    return SpilledRows(path, tuple(cluster_cols), rows)


def frame_rows(frame: pd.DataFrame, cluster_cols: tuple[str, ...], directory: str, name: str) -> SpilledRows:
    """An in-memory aggregate table (e.g. the per-item counts) as `SpilledRows`."""
    path = Path(directory) / f"{name}.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), str(path))
    return SpilledRows(path, tuple(cluster_cols), len(frame))


def output_scores(batch, score: Callable[[pd.DataFrame], np.ndarray], name: str,
                  prepare: Callable[[pd.DataFrame], pd.DataFrame] | None) -> tuple[pd.DataFrame, np.ndarray]:
    """A batch of rows (Arrow) as a frame (after ``prepare``) and the output's float scores of it, one per row."""
    frame = batch.to_pandas()
    if prepare is not None:
        frame = prepare(frame)
    scores = np.asarray(score(frame), dtype=np.float64)
    if scores.shape != (len(frame),):
        raise AuditInputError(f"{name}: scorer returned shape {scores.shape} for {len(frame)} rows")
    return frame, scores


def _scored_batches(rows: SpilledRows, score: Callable[[pd.DataFrame], np.ndarray], name: str,
                    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None, batch_rows: int) -> Iterator[pa.Table]:
    """(group, c0[, c1], s, n_pos, n_neg) per batch: the output's scores of the rows, checked."""
    keys = {f"c{k}": col for k, col in enumerate(rows.cluster_cols)}
    for batch in pq.ParquetFile(str(rows.path)).iter_batches(batch_size=batch_rows):
        frame, scores = output_scores(batch, score, name, prepare)
        as_scores(scores, name="aggregates.score")
        for col in ("group", *keys.values()):
            missing = int(frame[col].isna().sum())
            if missing:
                raise AuditInputError(f"aggregates.{col} has {missing} missing values")
        yield pa.table({"grp": frame["group"].to_numpy(), **{k: frame[c].to_numpy() for k, c in keys.items()},
                        "s": scores + 0.0,  # -0.0 and +0.0 are one block, as in the in-memory grid
                        "n_pos": frame["n_pos"].to_numpy(dtype=np.float64),
                        "n_neg": frame["n_neg"].to_numpy(dtype=np.float64)})


def _group_params(groups) -> dict:
    return {f"g{k}": g for k, g in enumerate(groups)}


def _group_totals(con, scored: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    totals = con.execute("SELECT grp, sum(n_pos), sum(n_neg) FROM read_parquet($rows) GROUP BY grp",
                         {"rows": str(scored)}).df()
    groups = np.unique(totals["grp"].to_numpy(dtype=object))  # the in-memory grid's group order
    totals = totals.set_index("grp").loc[groups]
    return groups, totals.iloc[:, 0].to_numpy(np.float64), totals.iloc[:, 1].to_numpy(np.float64)


def _sweep(con, scored: Path, groups, stream: StreamingAudit, batch_rows: int) -> None:
    """Distinct-score blocks in descending order into the sweep."""
    G = len(groups)
    # column names are generated from the group's index; the group values themselves are bound parameters
    counts = [f"sum({c}) FILTER (WHERE grp = $g{k})" for c in ("n_pos", "n_neg") for k in range(G)]
    rel = con.sql(f"SELECT s, {', '.join(counts)} FROM read_parquet($rows) GROUP BY s ORDER BY s DESC",
                  params={"rows": str(scored), **_group_params(groups)})
    for batch in rel.to_arrow_reader(batch_rows):
        scores = batch.column(0).to_numpy(zero_copy_only=False).astype(np.float64)
        table = np.vstack([np.nan_to_num(batch.column(c).to_numpy(zero_copy_only=False).astype(np.float64))
                           for c in range(1, 2 * G + 1)])
        stream.update_columns(scores, table[:G], table[G:])


def _clustered_sweep(con, scored: Path, groups, stream: StreamingAudit, n_cluster_cols: int, batch_rows: int) -> list:
    """The sweep and the cluster-robust sums in one pass over the rows in descending score order, a row per
    (row, class) with its count and cluster codes (`audit.prefix_stream`); returns the signed sums."""
    keys = ", ".join(f"c{k}" for k in range(n_cluster_cols))
    src = f"SELECT grp, {keys}, s, n_pos, n_neg FROM read_parquet($1)"
    joins, sizes, cells = cluster_codes(con, src, [str(scored)], n_cluster_cols, impressions="sum(n_pos + n_neg)")
    codes = ", ".join(f"{code} AS k{n}" for n, code in enumerate(code_expressions(len(sizes))))
    coded = ", ".join(f"k{n}" for n in range(min(len(sizes), 2)))
    sql = (f"WITH coded AS (SELECT r.s, CAST(list_position($2, r.grp) - 1 AS INTEGER) AS gi, r.n_pos, r.n_neg, {codes} "
           f"FROM ({src}) r {joins}) "
           f"SELECT s, gi * 2 + 1 AS cell, n_pos AS n, {coded} FROM coded WHERE n_pos > 0 UNION ALL "
           f"SELECT s, gi * 2 AS cell, n_neg AS n, {coded} FROM coded WHERE n_neg > 0 ORDER BY s DESC")
    rel = con.sql(sql, params=[str(scored), list(groups)])
    return sweep_with_cluster_sums(rel.to_arrow_reader(batch_rows), stream, sizes, cells=cells)


def audit_spilled(con, rows: SpilledRows, score: Callable[[pd.DataFrame], np.ndarray], name: str, cutoffs, *,
                  prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None, min_count: int,
                  confidence: float, estimand: str | None = None, margins=None,
                  batch_rows: int | None = None, **stream_options) -> AuditReport:
    """`audit_aggregates` of the output's rescored rows (group, score, n_pos, n_neg, clustered by
    ``rows.cluster_cols``), streamed: ``score(frame)`` scores a batch of ``rows`` (after ``prepare``);
    ``stream_options``: min_clusters, comparisons, reference of `StreamingAudit`."""
    batch_rows = batch_rows or BATCH_ROWS
    cutoffs = as_cutoffs(cutoffs)
    clustered = bool(rows.cluster_cols)
    with tempfile.TemporaryDirectory(prefix=f"{rows.path.stem}_", dir=rows.path.parent) as tmp, \
            con.cursor() as con:  # its own connection: a result left open on `con` does not block the streams
        scored = Path(tmp) / "scored.parquet"
        if not _write_batches(scored, _scored_batches(rows, score, name, prepare, batch_rows)):
            raise AuditInputError("no rows to audit (the input holds a header at most)")
        groups, n_pos, n_neg = _group_totals(con, scored)
        stream = StreamingAudit(groups, n_pos, n_neg, cutoffs, min_count=min_count, confidence=confidence,
                                margins=margins, **stream_options)
        if not clustered:
            _sweep(con, scored, groups, stream, batch_rows)
            return stream.report(estimand=estimand)
        prefix = _clustered_sweep(con, scored, groups, stream, len(rows.cluster_cols), batch_rows)
        return stream.report(prefix=prefix, estimand=estimand)
