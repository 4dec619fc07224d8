"""Audit each scored output on the same held-out rows (glue between the warehouse aggregates and the math).

Every output is audited from aggregates only: the group x score counts (rescored per group for outputs that
map the logged score) or the per-item counts (for rankers on item features) feed `audit_aggregates`; a bounded
sample of queries feeds the within-query pairwise accuracies. ROC curves get a pointwise 95% band
(Hsieh & Turnbull variance, `audit.stats.roc_band`).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from fair_pipeline.audit import AuditInputError, AuditReport, PairwiseResult, audit_aggregates
from fair_pipeline.audit import sql as aw
from fair_pipeline.audit.outputs import ScoredOutput
from fair_pipeline.audit.streamed import SpilledRows, audit_spilled, spill_rows
from fair_pipeline.audit.stats.pairwise import pairwise_from_counts
from fair_pipeline.audit.stats.roc_band import roc_band


@dataclasses.dataclass
class EvaluationData:
    """The held-out aggregates every output is audited on (from `audit.sql`)."""

    score_counts: pd.DataFrame | None  # group, score, n_pos, n_neg (None when clustered: cluster_counts replace it)
    item_counts: pd.DataFrame | None  # group, item_id, n_pos, n_neg, features (None when no output needs it)
    query_rows: pd.DataFrame | None  # query_id, group, item_id, score, n_pos, n_neg (sampled queries)
    queries_in_window: int = 0
    cluster_counts: pd.DataFrame | None = None  # group, item_id[, query_id], score, n_pos, n_neg
    variance: str = "conditional"  # audit.sql.VARIANCES: which variance (estimand) every table reports
    cluster_cols: tuple = ()
    # cluster_counts (clustered) or score_counts in a file, audited through DuckDB in batches (`audit.streamed`)
    # instead of the frames above: one row per impression when logged scores are continuous
    spilled: SpilledRows | None = None
    # on Spark: score_counts (or cluster_counts) as a lazy Spark DataFrame, the day-sized outputs scored, swept
    # and their cluster sums shuffled on the executors (`audit.spark_audit`), nothing row-sized through the driver
    spark_rows: object | None = None
    spark_query_rows: object | None = None  # on Spark: query_rows as a lazy Spark DataFrame (audit.spark_pairwise)


def evaluation_data(marts, source: aw.LabelSource, features: list[str], variance: str, max_queries: int, scratch,
                    name: str = "held_out_rows") -> EvaluationData:
    """The held-out rows of the window: the day-sized rows (one per impression when logged scores are continuous)
    go to a file `name` in DuckDB's spill directory `scratch` and every output is audited from it in batches
    (audit.streamed); on Spark they stay on the executors (audit.spark_audit), cluster-robust variances included."""
    cluster_cols = aw.check_variance(variance)
    base = aw.cluster_counts_query(source, cluster_cols) if cluster_cols else aw.score_counts_query(source)
    on_executors = marts.name == "spark"
    data = EvaluationData(score_counts=None, item_counts=aw.item_counts(marts, source, features) if features else None,
                          query_rows=None, variance=variance, cluster_cols=cluster_cols,
                          spilled=None if on_executors else spill_rows(marts, *base, cluster_cols, scratch, name),
                          spark_rows=marts.frame(*base) if on_executors else None)
    if on_executors:  # the sampled queries' rows stay on the executors too (audit.spark_pairwise)
        data.spark_query_rows = marts.frame(*aw.query_rows_query(source, max_queries))
        data.queries_in_window = aw.queries_in_window(marts, source)
    else:
        data.query_rows, data.queries_in_window = aw.query_rows(marts, source, max_queries)
    return data


@dataclasses.dataclass
class OutputAudit:
    output: ScoredOutput
    held_out: bool | None
    rows: int  # rows of the (group, score, n_pos, n_neg) table audited; the table is not kept (day-sized)
    report: AuditReport
    roc_curves: pd.DataFrame  # group, fpr, tpr, se, tpr_ci_low, tpr_ci_high, n_pos, n_neg
    pairwise: PairwiseResult | None
    pairwise_note: str
    pairwise_queries: int


def _base_rows(output: ScoredOutput, data: EvaluationData) -> pd.DataFrame:
    """The held-out rows the output scores: per (group, score), per item, or per cluster x score."""
    clustered = bool(data.cluster_cols)
    if output.basis not in ("logged_score", "item_features"):
        raise AuditInputError(f"{output.name}: unknown basis {output.basis!r}")
    if output.basis == "item_features":
        if data.item_counts is None:
            raise AuditInputError(f"{output.name}: scores item features, but no per-item counts were loaded")
        if data.cluster_cols in ((), ("item_id",)):  # item rows are already the clusters
            return data.item_counts
    if clustered and data.cluster_counts is None:
        raise AuditInputError(f"variance={data.variance!r} needs the per-cluster counts, which were not loaded")
    if output.basis == "logged_score":
        return data.cluster_counts if clustered else data.score_counts
    return data.cluster_counts.join(_item_features(data, output), on="item_id")


def rescored_aggregates(output: ScoredOutput, data: EvaluationData) -> pd.DataFrame:
    """The output's (group, score, n_pos, n_neg[, cluster columns]) table; rows may repeat a (group, score)."""
    base = _base_rows(output, data)
    scores = np.asarray(output.score(base), dtype=np.float64)
    if scores.shape != (len(base),):
        raise AuditInputError(f"{output.name}: scorer returned shape {scores.shape} for {len(base)} rows")
    frame = pd.DataFrame({"group": base["group"].to_numpy(), "score": scores,
                          "n_pos": base["n_pos"].to_numpy(), "n_neg": base["n_neg"].to_numpy()})
    for col in data.cluster_cols:
        frame[col] = base[col].to_numpy()
    return frame


def roc_curves_with_band(report: AuditReport, confidence: float) -> pd.DataFrame:
    """Per-group ROC on the FPR grid with its pointwise band; empty with a single group (no curves)."""
    columns = ["group", "fpr", "tpr", "se", "tpr_ci_low", "tpr_ci_high", "n_pos", "n_neg", "estimable"]
    if report.xauc is None or report.xauc.curves.empty:
        return pd.DataFrame(columns=columns)
    counts = report.groups.drop_duplicates("group").set_index("group")
    frames = []
    for group, curve in report.xauc.curves[report.xauc.curves["kind"] == "roc"].groupby("group_a", sort=False):
        m, n = float(counts.at[group, "n_pos"]), float(counts.at[group, "n_neg"])
        estimable = bool(counts.at[group, "estimable"]) if "estimable" in counts else True
        band = roc_band(curve["fpr"].to_numpy(), curve["tpr"].to_numpy(), m, n, confidence)
        frames.append(pd.DataFrame({"group": group, "fpr": curve["fpr"].to_numpy(), "tpr": curve["tpr"].to_numpy(),
                                    **band, "n_pos": int(m), "n_neg": int(n), "estimable": estimable}))
    return pd.concat(frames, ignore_index=True)[columns]


def pairwise_for(output: ScoredOutput, data: EvaluationData, groups, confidence: float, margins=None):
    """(PairwiseResult or None, note, queries used) on the sampled queries: two-way clustered by item and query."""
    if data.spark_query_rows is not None:
        return _pairwise_on_executors(output, data, groups, confidence, margins)
    rows = data.query_rows
    if rows is None or rows.empty:
        return None, "no sampled queries", 0
    if output.basis == "item_features":
        frame = rows.join(_item_features(data, output), on="item_id")
    else:
        frame = rows
    scores = np.asarray(output.score(frame), dtype=np.float64)
    n_queries = int(rows["query_id"].nunique())
    try:  # two-way clustered by item and query: the CI is for new items and new queries
        result = pairwise_from_counts(rows["query_id"], rows["group"], scores, rows["n_pos"], rows["n_neg"], groups,
                                      item_ids=rows["item_id"], confidence=confidence, margins=margins)
    except AuditInputError as error:
        return None, f"not estimable: {error}", n_queries
    note = f"{n_queries} of {data.queries_in_window} queries (deterministic sample by md5(query_id))"
    return result, note, n_queries


def _pairwise_on_executors(output: ScoredOutput, data: EvaluationData, groups, confidence: float, margins=None):
    from fair_pipeline.audit.spark_pairwise import pairwise_spark_rows  # pyspark is the optional `spark` extra

    try:
        result, n_queries = pairwise_spark_rows(data.spark_query_rows, output.score, output.name, groups,
                                                prepare=_prepare(output, data), confidence=confidence, margins=margins)
    except AuditInputError as error:
        return None, f"not estimable: {error}", 0
    note = f"{n_queries} of {data.queries_in_window} queries (deterministic sample by md5(query_id))"
    return result, note, n_queries


def _item_features(data: EvaluationData, output: ScoredOutput) -> pd.DataFrame:
    return data.item_counts.drop_duplicates("item_id").set_index("item_id")[list(output.features)]


def _streamed(output: ScoredOutput, data: EvaluationData) -> bool:
    """Audited from the spilled day-sized rows (not from in-memory frames)? As `_on_executors`."""
    return data.spilled is not None and _on_executors(output, data)


def _on_executors(output: ScoredOutput, data: EvaluationData) -> bool:
    """Audited on Spark's executors from the day-sized rows? Logged-score outputs, and item-feature outputs
    whose clustering is not by item alone (the others are audited on the catalogue-sized per-item counts)."""
    return output.basis == "logged_score" or data.cluster_cols not in ((), ("item_id",))


def _prepare(output: ScoredOutput, data: EvaluationData):
    """What joins an item-feature output's features to a batch of day-sized rows (None for logged scores)."""
    if output.basis == "item_features":
        if data.item_counts is None:
            raise AuditInputError(f"{output.name}: scores item features, but no per-item counts were loaded")
        features = _item_features(data, output)  # catalogue-sized: travels with the scorer to the executors

        def prepare(frame):
            return frame.join(features, on="item_id")
        return prepare
    if output.basis != "logged_score":
        raise AuditInputError(f"{output.name}: unknown basis {output.basis!r}")
    return None


def _audit_spilled(con, output: ScoredOutput, data: EvaluationData, cutoffs, **options) -> tuple:
    report = audit_spilled(con, data.spilled, output.score, output.name, cutoffs, prepare=_prepare(output, data),
                           estimand=data.variance, **options)
    return report, data.spilled.rows


def audit_output(output: ScoredOutput, data: EvaluationData, window_start, cutoffs, *, min_count: int,
                 confidence: float, margins: dict | None = None, con=None, **stream_options) -> OutputAudit:
    """The output's audit: on Spark's executors from ``data.spark_rows`` (see `_on_executors`), from
    ``data.spilled`` through DuckDB connection ``con`` when given (see `_streamed`), else from the in-memory tables.
    ``stream_options``: min_clusters, comparisons, reference of `StreamingAudit`."""
    options = dict(min_count=min_count, confidence=confidence, margins=margins, **stream_options)
    if data.spark_rows is not None and _on_executors(output, data):
        from fair_pipeline.audit.spark_audit import audit_spark_rows  # pyspark is the optional `spark` extra

        report, rows = audit_spark_rows(data.spark_rows, output.score, output.name, cutoffs, estimand=data.variance,
                                        prepare=_prepare(output, data), cluster_cols=data.cluster_cols, **options)
    elif _streamed(output, data):
        report, rows = _audit_spilled(con, output, data, cutoffs, **options)
    else:
        aggregates = rescored_aggregates(output, data)
        report = audit_aggregates(aggregates, cutoffs, group_col="group", estimand=data.variance,
                                  cluster_cols=list(data.cluster_cols) or None, **options)
        rows = len(aggregates)
        del aggregates  # free it before the pairwise pass
    groups = report.groups["group"].drop_duplicates().tolist()
    pairwise, note, used = pairwise_for(output, data, groups, confidence, margins)
    return OutputAudit(output, output.held_out(window_start), rows, report,
                       roc_curves_with_band(report, confidence), pairwise, note, used)
