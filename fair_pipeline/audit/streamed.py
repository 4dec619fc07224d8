"""One scored output audited through DuckDB in batches: Python holds a batch, never a day's rows or score grid.

The held-out rows (`cluster_counts` / `score_counts` / `item_counts` of `audit.sql`; one row per impression
when logged scores are continuous) are written once to a Parquet file in DuckDB's spill directory
(`spill_rows`). Per output (`audit_spilled`):

1. its scores are computed batch by batch and written with the rows' group, cluster keys and counts;
2. DuckDB groups them into distinct-score blocks (``GROUP BY score ORDER BY score DESC``, one count column per
   group and class), which stream into the sweep (`StreamingAudit`); the same pass adds the blocks' running
   index and cumulative counts, written to a second file, and tracks the cutoffs' boundary blocks;
3. for a cluster-robust variance, DuckDB joins every row to its block and streams the rows in cluster order
   into the cluster pass (`CountRows`: the block values the in-memory `BlockTable` would look up).

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

from fair_pipeline.audit.stats import AuditInputError, AuditReport, StreamingAudit
from fair_pipeline.audit.stats.clustered import BoundaryTracker, CountRows
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


def _scored_batches(rows: SpilledRows, score: Callable[[pd.DataFrame], np.ndarray], name: str,
                    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None, batch_rows: int) -> Iterator[pa.Table]:
    """(group, c0[, c1], s, n_pos, n_neg) per batch: the output's scores of the rows, checked."""
    keys = {f"c{k}": col for k, col in enumerate(rows.cluster_cols)}
    for batch in pq.ParquetFile(str(rows.path)).iter_batches(batch_size=batch_rows):
        frame = batch.to_pandas()
        if prepare is not None:
            frame = prepare(frame)
        scores = np.asarray(score(frame), dtype=np.float64)
        if scores.shape != (len(frame),):
            raise AuditInputError(f"{name}: scorer returned shape {scores.shape} for {len(frame)} rows")
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


def _sweep(con, scored: Path, blocks_path: Path, groups, stream: StreamingAudit, tracker: BoundaryTracker | None,
           batch_rows: int) -> None:
    """Distinct-score blocks in descending order into the sweep; with a tracker (cluster pass to come) also
    into the blocks file: score, block index, per group its positives / negatives and their running sums."""
    G = len(groups)
    # column names are generated from the group's index; the group values themselves are bound parameters
    counts = [f"sum({c}) FILTER (WHERE grp = $g{k})" for c in ("n_pos", "n_neg") for k in range(G)]
    rel = con.sql(f"SELECT s, {', '.join(counts)} FROM read_parquet($rows) GROUP BY s ORDER BY s DESC",
                  params={"rows": str(scored), **_group_params(groups)})
    writer, offset = None, 0
    running = np.zeros((2, G))
    try:
        for batch in rel.to_arrow_reader(batch_rows):
            scores = batch.column(0).to_numpy(zero_copy_only=False).astype(np.float64)
            table = np.vstack([np.nan_to_num(batch.column(c).to_numpy(zero_copy_only=False).astype(np.float64))
                               for c in range(1, 2 * G + 1)])
            pos, neg = table[:G], table[G:]
            stream.update_columns(scores, pos, neg)
            if tracker is None:
                continue
            tracker.update(neg)
            incl = np.cumsum(table.reshape(2, G, -1), axis=2) + running[:, :, None]
            running = incl[:, :, -1]
            out = pa.table({"s": scores, "b": np.arange(offset, offset + scores.size, dtype=np.int64),
                            **{f"p{k}": pos[k] for k in range(G)}, **{f"q{k}": neg[k] for k in range(G)},
                            **{f"pc{k}": incl[0, k] for k in range(G)}, **{f"qc{k}": incl[1, k] for k in range(G)}})
            offset += scores.size
            if writer is None:
                writer = pq.ParquetWriter(str(blocks_path), out.schema)
            writer.write(out)
    finally:
        if writer is not None:
            writer.close()


def _cluster_stream(con, scored: Path, blocks_path: Path, groups, keys: list[str], totals, batch_rows: int):
    """Rows joined to their block, in cluster-key order, as (running cluster codes, CountRows, group codes,
    n_pos, n_neg) batches; a cluster may continue into the next batch (the accumulator carries it)."""
    G = len(groups)
    block_cols = ", ".join(f"b.{c}{k}" for c in ("p", "q", "pc", "qc") for k in range(G))
    order = ", ".join(f"r.{k}" for k in keys)
    rel = con.sql(
        f"SELECT {order}, list_position($groups, r.grp) - 1 AS gi, r.n_pos, r.n_neg, b.b, {block_cols} "
        f"FROM read_parquet($rows) r JOIN read_parquet($blocks) b ON b.s = r.s ORDER BY {order}",
        params={"rows": str(scored), "blocks": str(blocks_path), "groups": list(groups)})
    previous, offset = None, 0
    for batch in rel.to_arrow_reader(batch_rows):
        cols = [batch.column(c).to_numpy(zero_copy_only=False) for c in range(batch.num_columns)]
        key_arrays, (gi, n_pos, n_neg, b), counts = cols[:len(keys)], cols[len(keys):len(keys) + 4], cols[len(keys) + 4:]
        change = np.zeros(len(gi), dtype=bool)  # a new cluster wherever any key changes, across batches too
        change[0] = previous is None or any(key[0] != last for key, last in zip(key_arrays, previous))
        for key in key_arrays:
            change[1:] |= key[1:] != key[:-1]
        per_group = [np.vstack(counts[q * G:(q + 1) * G]) for q in range(4)]
        rows = CountRows(b, *per_group, totals.m, totals.n)
        yield (offset + np.cumsum(change), rows, gi.astype(np.intp), n_pos.astype(np.float64),
               n_neg.astype(np.float64))
        offset += int(change.sum())
        previous = [key[-1] for key in key_arrays]


def audit_spilled(con, rows: SpilledRows, score: Callable[[pd.DataFrame], np.ndarray], name: str, cutoffs, *,
                  prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None, min_count: int,
                  confidence: float, estimand: str | None = None, margins=None,
                  batch_rows: int | None = None) -> AuditReport:
    """`audit_aggregates` of the output's rescored rows (group, score, n_pos, n_neg, clustered by
    ``rows.cluster_cols``), streamed: ``score(frame)`` scores a batch of ``rows`` (after ``prepare``)."""
    batch_rows = batch_rows or BATCH_ROWS
    cutoffs = as_cutoffs(cutoffs)
    clustered = bool(rows.cluster_cols)
    with tempfile.TemporaryDirectory(prefix=f"{rows.path.stem}_", dir=rows.path.parent) as tmp, \
            con.cursor() as con:  # its own connection: a result left open on `con` does not block the streams
        scored, blocks_path = Path(tmp) / "scored.parquet", Path(tmp) / "blocks.parquet"
        if not _write_batches(scored, _scored_batches(rows, score, name, prepare, batch_rows)):
            raise AuditInputError("no rows to audit (the input holds a header at most)")
        groups, n_pos, n_neg = _group_totals(con, scored)
        stream = StreamingAudit(groups, n_pos, n_neg, cutoffs, min_count=min_count, confidence=confidence,
                                margins=margins)
        var_alphas = np.unique(np.r_[cutoffs, 1.0])  # the cutoffs the cluster pass gives variances at
        tracker = BoundaryTracker(n_pos, n_neg, var_alphas) if clustered else None
        _sweep(con, scored, blocks_path, groups, stream, tracker, batch_rows)
        if not clustered:
            return stream.report(estimand=estimand)
        totals = tracker.totals()
        keys = [f"c{k}" for k in range(len(rows.cluster_cols))]

        def by(cols):
            return _cluster_stream(con, scored, blocks_path, groups, cols, totals, batch_rows)
        streams = [(1, by(keys))] if len(keys) == 1 else [(1, by(keys[:1])), (1, by(keys[1:])), (-1, by(keys))]
        return stream.report(grid=totals, estimand=estimand, streams=streams)
