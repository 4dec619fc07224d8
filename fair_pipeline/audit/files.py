"""Audit any Parquet or CSV file through DuckDB aggregations, with bounded memory.

DuckDB does the row-level work (validation counts, ``GROUP BY score`` with per-group counts of
positives and negatives, spilling to disk past ``memory_limit``); the result streams to the numpy
sweep of ``fair_pipeline.audit.stats`` in batches ordered by descending score, so memory does not
grow with the number of rows or of distinct scores. Column names are validated against the file
and double-quoted; the path and group values are bound parameters.

The text tables of a result are ``fair_pipeline.audit.formatting``; the command line (``fair-pipeline audit``)
is ``fair_pipeline.commands.audit``.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from fair_pipeline.audit.prefix_stream import (
    cluster_codes,
    code_columns,
    integer_cells,
    integer_id_ranges,
    sweep_with_cluster_sums,
)
from fair_pipeline.audit.stats import DEFAULT_CUTOFFS, AuditInputError, AuditReport, StreamingAudit
from fair_pipeline.audit.stats.blocks import SortedCellBlocks
from fair_pipeline.audit.stats.snapshot_clusters import fits_snapshots
from fair_pipeline.audit.stats.first_seen_codes import FirstSeenCodes, fits_lookup_table
from fair_pipeline.audit.stats.grid_audit import variance_alphas
from fair_pipeline.audit.stats.sweep_rows import SortedRowFeed
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_CLUSTERS, DEFAULT_MIN_COUNT
from fair_pipeline.audit.pairwise_file import stream_pairwise
from fair_pipeline.audit.stats.comparisons import ALL_PAIRS_UP_TO
from fair_pipeline.audit.stats.pairwise import PairwiseResult
from fair_pipeline.audit.stats.validation import as_cutoffs

READERS = {".parquet": "read_parquet", ".pq": "read_parquet", ".csv": "read_csv",
           ".tsv": "read_csv", ".txt": "read_csv", ".gz": "read_csv"}
ALL_GROUPS = "(all)"
BATCH_ROWS = 1 << 18
DEFAULT_MAX_GROUPS = 50  # a guard against auditing an id column as groups; raise it for thousands of real groups
MEMORY_LIMIT = re.compile(r"\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)
REMOTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # s3://, http://, gs://, ...: DuckDB extensions would fetch them
SORT_ROWS_SHARE = 0.5  # stream sorted rows, not GROUP BY score, when distinct scores are at least this share of rows


@dataclass
class FileAudit:
    """The report of :func:`audit_file` plus where it came from."""

    path: str
    rows: int
    columns: dict
    cutoffs: list
    report: AuditReport
    pairwise: PairwiseResult | None = None
    info: dict = field(default_factory=dict)
    comparisons: dict = field(default_factory=dict)  # mode ("all" / "reference"), reference group, pairs compared

    def to_dict(self, curves: bool = False) -> dict:
        out = {"file": self.path, "rows": self.rows, "columns": self.columns, "cutoffs": self.cutoffs,
               "comparisons": self.comparisons}
        out.update(self.report.to_dict(curves=curves))
        out["pairwise"] = None if self.pairwise is None else self.pairwise.to_dict()
        return out


def quote_ident(name: str) -> str:
    """Double-quote an identifier, doubling embedded quotes (after validation against the file)."""
    return '"' + name.replace('"', '""') + '"'


def _reader(path: str) -> str:
    suffixes = [s.lower() for s in Path(path).suffixes]
    for suffix in reversed(suffixes):
        if suffix in READERS and not (suffix == ".gz" and ".csv" not in suffixes and ".tsv" not in suffixes):
            return READERS[suffix]
    raise AuditInputError(f"{path}: cannot tell the format; expected a .parquet or .csv file")


def _connect(memory_limit: str, threads: int | None, temp_dir: str,
             allow_remote: bool = False) -> duckdb.DuckDBPyConnection:
    # never download extensions; load installed ones (httpfs for remote files) only when remote reads are allowed
    config = {"memory_limit": memory_limit, "temp_directory": temp_dir,
              "preserve_insertion_order": False, "autoinstall_known_extensions": False,
              "autoload_known_extensions": bool(allow_remote)}
    if threads:
        config["threads"] = int(threads)
    con = duckdb.connect(config=config)
    con.execute("SET enable_progress_bar = false")  # it would write to stdout (breaks --json)
    return con


def _source(con, path: str, cols: dict) -> tuple[str, list]:
    """Typed sub-query over the file: s (score), l (label), g (group), q (query)."""
    if REMOTE.match(path):
        return _typed_select(con, path, cols)
    if not any(ch in path for ch in "*?["):
        if not Path(path).exists():
            raise AuditInputError(f"{path}: no such file")
        _reader(path)  # an unsupported extension is the first thing to say
        if Path(path).is_file() and Path(path).stat().st_size == 0:  # DuckDB would invent a column 'column0'
            raise AuditInputError(f"{path}: the file is empty (0 bytes)")
    return _typed_select(con, path, cols)


def _typed_select(con, path: str, cols: dict) -> tuple[str, list]:
    reader = _reader(path)
    try:
        described = con.sql(f"DESCRIBE SELECT * FROM {reader}($1)", params=[path]).fetchall()
    except duckdb.Error as exc:
        raise AuditInputError(f"{path}: cannot read as {reader}: {exc}") from exc
    available = [row[0] for row in described]
    for role, name in cols.items():
        if name is not None and role != "cluster" and name not in available:
            raise AuditInputError(f"{path}: --{role} column {name!r} not found; columns are {available}")
    for name in cols.get("cluster") or []:
        if name not in available:
            raise AuditInputError(f"{path}: --cluster column {name!r} not found; columns are {available}")
    g = f"CAST({quote_ident(cols['group'])} AS VARCHAR)" if cols.get("group") else "$2"
    q = f"CAST({quote_ident(cols['query'])} AS VARCHAR)" if cols.get("query") else "NULL"
    clusters = "".join(f", {quote_ident(name)} AS c{i}" for i, name in enumerate(cols.get("cluster") or []))
    sql = (f"SELECT TRY_CAST({quote_ident(cols['score'])} AS DOUBLE) + 0.0 AS s, "
           f"{quote_ident(cols['score'])} IS NULL AS s_missing, "
           f"TRY_CAST({quote_ident(cols['label'])} AS DOUBLE) AS l, "
           f"{quote_ident(cols['label'])} IS NULL AS l_missing, {g} AS g, {q} AS q{clusters} "
           f"FROM {reader}($1)")
    params = [path] + ([] if cols.get("group") else [ALL_GROUPS])
    return sql, params


def _group_totals(con, src: str, params: list, path: str, cols: dict) -> pd.DataFrame:
    """One scan that leaves the score column unread: per group, positives, negatives and the rows with a bad
    label, query or cluster value. Scores are checked where they are read anyway, in the sorted stream
    (`_finite_scores`), so the happy path reads them once. The scan groups by group alone and counts each label
    class with ``count_if`` (the rest is "other") and NULL keys as count(*) - count(key): at 1e7 rows ~30% less
    CPU than grouping by (group, label class), and half that of one FILTER per count."""
    q_null = "count(*) - count(q)" if cols.get("query") else "0"
    c_null = " + ".join(f"count(*) - count(c{i})" for i in range(len(cols.get("cluster") or []))) or "0"
    classes = ", ".join(f"CAST(coalesce(count_if({test}), 0) AS BIGINT)" for test in ("l = 1", "l = 0", "l_missing"))
    df = con.sql(f"SELECT g, n, n_pos, n_neg, label_null, n - n_pos - n_neg - label_null AS label_not_01, query_null, "
                 f"cluster_null FROM (SELECT g, count(*) AS n, {classes}, CAST({q_null} AS BIGINT), "
                 f"CAST({c_null} AS BIGINT) FROM ({src}) GROUP BY g) "
                 "AS t(g, n, n_pos, n_neg, label_null, query_null, cluster_null) ORDER BY g NULLS FIRST",
                 params=params).df()
    problems = []
    if df["g"].isna().any():
        problems.append(f"--group column {cols['group']!r}: {int(df.loc[df['g'].isna(), 'n'].sum())} rows with NULL group")
    checks = [("label_null", "label", "NULL"), ("label_not_01", "label", "not 0/1"), ("query_null", "query", "NULL"),
              ("cluster_null", "cluster", "NULL")]
    _raise_problems(path, cols, df, checks, problems)
    return df


def _raise_problems(path: str, cols: dict, df: pd.DataFrame, checks: list, problems: list) -> None:
    for col, role, what in checks:
        for _, row in df[df[col] > 0].iterrows():
            problems.append(f"--{role} column {cols[role]!r}: {int(row[col])} {what} values in group {row['g']!r}")
    if problems:
        raise AuditInputError(f"{path}: " + "; ".join(problems))


def _score_problems(con, src: str, params: list, path: str, cols: dict) -> None:
    """Raise the error naming, per group, the NULL, non-numeric and non-finite scores (run once the stream has met
    one). DuckDB folds isfinite() from a Parquet column's min/max, which writers compute without NaN: statistics
    propagation is off on this (the audit's own) connection; a new cursor, as the stream may still hold ``con``."""
    with con.cursor() as cur:
        cur.execute("SET disabled_optimizers = 'statistics_propagation'")
        df = cur.sql(
            "SELECT g, COUNT(*) FILTER (WHERE s_missing) AS score_null, "
            "COUNT(*) FILTER (WHERE s IS NULL AND NOT s_missing) AS score_not_numeric, "
            "COUNT(*) FILTER (WHERE s IS NOT NULL AND NOT isfinite(s)) AS score_not_finite "
            f"FROM ({src}) GROUP BY g ORDER BY g NULLS FIRST", params=params).df()
    checks = [("score_null", "score", "NULL"), ("score_not_numeric", "score", "non-numeric"),
              ("score_not_finite", "score", "NaN or infinite")]
    _raise_problems(path, cols, df, checks, [])
    raise AuditInputError(f"{path}: --score column {cols['score']!r} has NULL, non-numeric or non-finite values")


class _BadScore(Exception):
    """The sorted stream met a NULL, non-numeric or non-finite score (`audit_file` then names them)."""


def _check_finite(scores: np.ndarray) -> np.ndarray:
    if not np.isfinite(scores).all():  # NULL and non-numeric scores arrive as NaN
        raise _BadScore
    return scores


def _finite_scores(batches):
    """Arrow batches whose first column (the score) is checked finite on the way through."""
    for batch in batches:
        _check_finite(batch.column(0).to_numpy(zero_copy_only=False))
        yield batch


def _mostly_distinct(con, src: str, params: list, rows: int) -> bool:
    """Are distinct scores at least SORT_ROWS_SHARE of the file's ``rows``? Then the rows are streamed sorted,
    else grouped by score. Counted over the whole file by DuckDB's HyperLogLog ``approx_count_distinct`` (a
    few % off, and a scan of the score column costing ~3% of the sort), so the order of the rows does not
    matter: a prefix would see only repeats in a file written with its repeated scores first (e.g. unscored
    items' zeros, or rows sorted by score) and choose the grouping, which hashes as many groups as rows."""
    distinct = con.execute(f"SELECT approx_count_distinct(s) FROM ({src})", params).fetchall()[0][0]
    return rows > 0 and distinct >= SORT_ROWS_SHARE * rows


def _stream_grid(con, src: str, params: list, groups: list, stream: StreamingAudit, batch_rows: int,
                 sort_rows: bool) -> None:
    """Distinct-score blocks in descending order into the sweep. DuckDB returns rows (score, cell = group code * 2 + label): sorted as they are when
    nearly every score is distinct (``sort_rows``: a sort is ~3x cheaper than hashing as many groups as
    rows), else ``GROUP BY score, cell`` with a count; numpy cuts each batch into blocks. The result has one
    row per score x cell, not per score x every group, so it grows with the data, not with groups x scores."""
    k = len(params)
    cell = f"CAST((list_position(${k + 1}, g) - 1) * 2 + CAST(l AS INTEGER) AS INTEGER)"
    if sort_rows:
        sql = f"SELECT s, {cell} AS cell FROM ({src}) ORDER BY s DESC"
    else:
        sql = f"SELECT s, {cell} AS cell, COUNT(*) AS n FROM ({src}) GROUP BY 1, 2 ORDER BY s DESC"
    rel = con.sql(sql, params=params + [list(groups)])
    if sort_rows:
        rows = SortedRowFeed(stream)
        for batch in rel.to_arrow_reader(batch_rows):
            rows.push(_check_finite(batch.column(0).to_numpy(zero_copy_only=False)),
                      batch.column(1).to_numpy(zero_copy_only=False))
        rows.finish()
        return
    blocks = SortedCellBlocks(2 * len(groups))

    def feed(done) -> None:
        if done is not None:
            scores, counts = done
            pos, neg = counts[1::2], counts[0::2]
            stream.update_columns(scores, pos, neg)

    # a batch becomes a (2 groups x blocks) table: fewer rows per batch with many groups bounds its size
    for batch in rel.to_arrow_reader(max(1, batch_rows // len(groups))):
        cols = [batch.column(j).to_numpy(zero_copy_only=False) for j in range(batch.num_columns)]
        feed(blocks.push(_check_finite(cols[0]), *cols[1:]))
    feed(blocks.finish())


def _stream_clustered(con, src: str, params: list, groups: list, stream: StreamingAudit, n_cluster_cols: int,
                      batch_rows: int, sort_rows: bool) -> list:
    """The sweep and the cluster-robust sums in one pass in descending score order (`audit.prefix_stream`);
    returns the signed sums for `StreamingAudit.report`. Integer cluster columns of compact ranges are numbered
    as the stream meets their ids (`stats.first_seen_codes`; two-way's repeated cells by `integer_cells`), any
    other by `cluster_codes`."""
    numbering, sizes = _integer_ids(con, src, params, n_cluster_cols, stream)
    if numbering is None:
        joins, sizes, cells = cluster_codes(con, src, params, n_cluster_cols)
        codes = keys = code_columns(sizes)
    else:
        joins, keys = "", ", ".join(f"c{n}" for n in range(n_cluster_cols))
        codes = ", ".join(_narrow_ids(f"c{n}", ids) for n, ids in enumerate(numbering))
        cells = integer_cells(con, src, params, numbering) if n_cluster_cols == 2 else None
        sizes += [cells.size] if cells is not None else []
    k = len(params)
    cell = f"CAST((list_position(${k + 1}, g) - 1) * 2 + CAST(l AS INTEGER) AS INTEGER)"
    if sort_rows:
        sql = f"SELECT s, {cell} AS cell, {codes} FROM ({src}) r {joins} ORDER BY s DESC"  # each row counts 1
    else:
        sql = (f"SELECT s, {cell} AS cell, COUNT(*) AS n, {codes} FROM ({src}) r {joins} "
               f"GROUP BY s, cell, {keys} ORDER BY s DESC")
    rel = con.sql(sql, params=params + [list(groups)])
    return sweep_with_cluster_sums(_finite_scores(rel.to_arrow_reader(batch_rows)), stream, sizes, numbering,
                                   cells, counted=not sort_rows)


def _narrow_ids(column: str, ids: FirstSeenCodes) -> str:
    """The SQL of an integer id column as the sorted stream carries it: INTEGER when its range fits (DuckDB's sort
    then moves 4 bytes per row and id less), else as it is."""
    int32 = np.iinfo(np.int32)
    return f"CAST({column} AS INTEGER) AS {column}" if int32.min <= ids.lo and ids.hi <= int32.max else column


def _integer_ids(con, src: str, params: list, n_cluster_cols: int,
                 stream: StreamingAudit) -> tuple[list[FirstSeenCodes] | None, list[int]]:
    """The numberings of the cluster columns c0[, c1] as the stream meets their ids and bounds on their numbers,
    when each is an integer column whose range fits a lookup table (`first_seen_codes.fits_lookup_table`) and,
    two-way, the queries' bound fits their copies at every checkpoint (`snapshot_clusters.fits_snapshots`); else (None, [])."""
    found = integer_id_ranges(con, src, params, [f"c{n}" for n in range(n_cluster_cols)])
    if found is None:
        return None, []
    rows, bounds = found
    ranges = [(lo, hi) for _, lo, hi in bounds]
    if any(lo is None or not fits_lookup_table(int(lo), int(hi), int(rows)) for lo, hi in ranges):
        return None, []
    sizes = [min(int(hi) - int(lo) + 1, int(rows)) for lo, hi in ranges]
    if n_cluster_cols == 2 and not fits_snapshots(sizes[1], rows, len(stream.groups),
                                                  variance_alphas(stream.cutoffs).size):
        return None, []
    return [FirstSeenCodes(lo, hi) for lo, hi in ranges], sizes


def audit_file(path, score: str, label: str, group: str | None = None, query: str | None = None,
               cutoffs=DEFAULT_CUTOFFS, *, clusters=None, min_count: int = DEFAULT_MIN_COUNT,
               confidence: float = 0.95, margins: dict | None = None, memory_limit: str = "2GB",
               threads: int | None = None, batch_rows: int = BATCH_ROWS, max_groups: int = DEFAULT_MAX_GROUPS,
               allow_remote: bool = False, min_clusters: int = DEFAULT_MIN_CLUSTERS, comparisons: str = "auto",
               reference=None) -> FileAudit:
    """Per-group truncated AUCs, group comparisons, xAUC and (with ``query``) pairwise accuracies.

    ``label`` must be 0/1 (1 = positive); scores must be finite; group, query and cluster columns must not
    be NULL. Every violation is reported with its column, group and count before anything is estimated.
    ``clusters``: one column (e.g. the item id) or two (item and query ids) whose values are clusters of
    dependent rows: the variances are then cluster-robust, summed per cluster in the same pass in score order
    (each row carries a dense cluster code; `stats.prefix_clusters`). Without, rows are independent.
    ``min_clusters``: with clusters, a group whose positives or negatives come from fewer clusters is "not
    estimable" (`stats.compare.estimability`; docs/audit_inference.md has the Monte Carlo behind the default).
    ``margins``: practical margins δ per metric behind each comparison's verdict
    (`audit.stats.equivalence.DEFAULT_MARGINS`).
    ``max_groups``: more groups than this is an error, raised after one cheap ``GROUP BY group``;
    ``allow_remote``: read s3://, http://... paths (with DuckDB's installed httpfs).
    ``comparisons``: "all" pairs of groups, "reference" (each group with ``reference``, default the largest
    group) or "auto" (all pairs of up to ALL_PAIRS_UP_TO groups, else reference). Memory, time and output grow
    with the rows plus the groups times the comparisons (groups^2 for all pairs, groups for a reference), never
    with groups x distinct scores. Within-query pairwise accuracies (``query``) keep a groups x groups table.
    """
    path = str(path)
    _check_options(path, min_count, confidence, memory_limit, max_groups, allow_remote, comparisons)
    alphas = as_cutoffs(cutoffs)
    clusters = [clusters] if isinstance(clusters, str) else list(clusters or [])
    if len(clusters) > 2:
        raise AuditInputError(f"at most two --cluster columns (one-way or two-way clustering), got {clusters}")
    cols = {"score": score, "label": label, "group": group, "query": query, "cluster": clusters or None}
    with tempfile.TemporaryDirectory(prefix="fair_audit_") as tmp:
        con = _connect(memory_limit, threads, tmp, allow_remote)
        try:
            src, params = _source(con, path, cols)
            totals = _group_totals(con, src, params, path, cols)
            groups = totals["g"].tolist()
            if len(groups) > max_groups:
                raise AuditInputError(
                    f"{path}: --group column {group!r} has {len(groups)} groups, more than max_groups={max_groups} "
                    "(is it an id?); raise --max-groups or audit coarser groups")
            mode = comparisons if comparisons != "auto" else "all" if len(groups) <= ALL_PAIRS_UP_TO else "reference"
            stream = StreamingAudit(groups, totals["n_pos"], totals["n_neg"], alphas, min_count=min_count,
                                    confidence=confidence, margins=margins, min_clusters=min_clusters,
                                    comparisons=mode, reference=reference)
            sort_rows = _mostly_distinct(con, src, params, int(totals["n"].sum()))
            try:
                if clusters:
                    prefix = _stream_clustered(con, src, params, groups, stream, len(clusters), batch_rows, sort_rows)
                    report = stream.report(prefix=prefix, estimand="clustered" if len(clusters) == 1 else "two_way")
                else:
                    _stream_grid(con, src, params, groups, stream, batch_rows, sort_rows)
                    report = stream.report()
            except _BadScore:
                _score_problems(con, src, params, path, cols)
            pairwise = stream_pairwise(con, src, params, groups, batch_rows, confidence, margins,
                                       item=_item_cluster(cols)) if query else None
        finally:
            con.close()
    return FileAudit(path, int(totals["n"].sum()), {k: v for k, v in cols.items() if v}, alphas.tolist(),
                     report, pairwise, comparisons={"mode": mode, "reference": stream.reference,
                                                    "pairs": len(stream.compared)})


def _item_cluster(cols: dict) -> str | None:
    """The column of `_source` holding item ids for the pairwise accuracies' two-way clustering: the first --cluster
    column that is not the query column (None: no item ids, the pairwise CIs are query-clustered)."""
    names = cols.get("cluster") or []
    return next((f"c{i}" for i, name in enumerate(names) if name != cols.get("query")), None)


def _check_options(path: str, min_count, confidence, memory_limit, max_groups, allow_remote: bool,
                   comparisons: str = "auto") -> None:
    """One-line errors for option values DuckDB or the statistics would otherwise reject late (or not at all)."""
    if REMOTE.match(path) and not allow_remote:
        raise AuditInputError(f"{path}: remote paths are refused; pass allow_remote=True (--allow-remote) to read it")
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 2:
        raise AuditInputError(f"min_count (--min-count) must be an integer >= 2 (a variance needs two positives "
                              f"and two negatives), got {min_count!r}")
    if comparisons not in ("auto", "all", "reference"):
        raise AuditInputError(f"comparisons (--compare) must be auto, all or reference, got {comparisons!r}")
    if isinstance(max_groups, bool) or not isinstance(max_groups, (int, np.integer)) or max_groups < 1:
        raise AuditInputError(f"max_groups (--max-groups) must be an integer >= 1, got {max_groups!r}")
    if not isinstance(confidence, (float, int)) or not 0.5 < confidence < 1:
        raise AuditInputError(f"confidence (--confidence) must be in (0.5, 1), got {confidence!r}")
    if not isinstance(memory_limit, str) or not MEMORY_LIMIT.fullmatch(memory_limit.strip()):
        raise AuditInputError(f"memory_limit (--memory-limit) must be a size such as 2GB or 512MiB, got {memory_limit!r}")
