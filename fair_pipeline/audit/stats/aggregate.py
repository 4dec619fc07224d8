"""Full audit from SQL-style aggregates (score x group -> n_pos, n_neg), in memory or streamed.

The aggregate table is the sufficient statistic: ``SELECT grp, score, SUM(label) AS n_pos,
SUM(1 - label) AS n_neg ... GROUP BY grp, score``. :func:`audit_aggregates` takes it whole;
:class:`StreamingAudit` takes it in chunks of rows sorted by descending score (what a database
cursor returns), so memory stays bounded however many distinct scores there are.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.blocks import ScoreGrid
from fair_pipeline.audit.stats.clustered import ClusterRows, estimand_name
from fair_pipeline.audit.stats.comparisons import compared_pairs
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_CLUSTERS, DEFAULT_MIN_COUNT, group_tables
from fair_pipeline.audit.stats.equivalence import resolve_margins
from fair_pipeline.audit.stats.grid_audit import GridAudit, add_cluster_covariance, sweep_alphas, variance_alphas
from fair_pipeline.audit.stats.records import records
from fair_pipeline.audit.stats.truncated_auc import DEFAULT_CUTOFFS, aggregates_to_grid
from fair_pipeline.audit.stats.validation import AuditInputError, as_cutoffs
from fair_pipeline.audit.stats.xauc import XAUCResult, xauc_tables


@dataclass
class AuditReport:
    """Everything the audit reports; every estimate carries its SE / CI and its counts."""

    groups: pd.DataFrame  # truncated AUC per group x cutoff
    pairs: pd.DataFrame  # group differences per cutoff
    overall: pd.DataFrame  # all groups pooled
    xauc: XAUCResult | None  # None with a single group

    def to_dict(self, curves: bool = False) -> dict:
        out = {name: records(getattr(self, name)) for name in ("groups", "pairs", "overall")}
        out["xauc"] = None if self.xauc is None else self.xauc.to_dict(curves=curves)
        return out


class StreamingAudit:
    """Audit fed by chunks of the (descending score) x group count grid.

    ``groups``: group values (columns of the chunks); ``n_pos`` / ``n_neg``: their totals, which
    a cheap ``GROUP BY grp`` gives before the pass. ``comparisons``: "all" pairs of groups, or "reference":
    each group with ``reference`` (default the largest group); memory and output grow with the comparisons.
    """

    def __init__(self, groups, n_pos, n_neg, cutoffs=DEFAULT_CUTOFFS, *,
                 min_count: int = DEFAULT_MIN_COUNT, confidence: float = 0.95, margins=None,
                 min_clusters: int = DEFAULT_MIN_CLUSTERS, comparisons: str = "all", reference=None):
        self.cutoffs = as_cutoffs(cutoffs)
        self.groups = np.asarray(groups, dtype=object)
        self.n_pos = np.asarray(n_pos, dtype=np.float64)
        self.n_neg = np.asarray(n_neg, dtype=np.float64)
        if self.n_pos.sum() + self.n_neg.sum() == 0:
            raise AuditInputError("no rows to audit (the input holds a header at most)")
        if self.n_pos.sum() == 0 or self.n_neg.sum() == 0:
            raise AuditInputError(
                f"labels contain a single class: {int(self.n_pos.sum())} positives and "
                f"{int(self.n_neg.sum())} negatives")
        self.min_count, self.confidence = min_count, confidence
        if isinstance(min_clusters, bool) or not isinstance(min_clusters, (int, np.integer)) or min_clusters < 2:
            raise AuditInputError(f"min_clusters (--min-clusters) must be an integer >= 2 (a clustered variance needs "
                                  f"two clusters of each class), got {min_clusters!r}")
        self.min_clusters = int(min_clusters)  # below it a group's clustered CI is "not estimable" (`estimability`)
        self.margins = resolve_margins(margins)  # practical margins δ behind each comparison's verdict
        self.alphas = sweep_alphas(self.cutoffs, curves=True)
        self.with_xauc = self.groups.size > 1
        self.compared, self.reference = compared_pairs(self.groups, self.n_pos + self.n_neg, comparisons, reference)
        self.comparisons = comparisons
        # the curve grid's points (not cutoffs) are wanted for the curves' heights only (`RocSweep`)
        curve_only = ~np.isin(self.alphas, variance_alphas(self.cutoffs))
        self.audit = GridAudit(self.n_pos, self.n_neg, self.alphas, xauc=self.with_xauc, compared=self.compared,
                               curve_only=curve_only)
        self.last_score = np.inf

    def update(self, scores: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        """Next rows: distinct scores strictly below those already seen, counts of shape (B, G)."""
        self.update_columns(scores, np.asarray(pos, dtype=np.float64).T, np.asarray(neg, dtype=np.float64).T)

    def update_columns(self, scores: np.ndarray, pos: np.ndarray, neg: np.ndarray, keep_curves: bool = False):
        """:meth:`update` with counts of shape (G, B): one vector per group, as a SQL cursor gives them; with
        ``keep_curves`` returns the sweep's block curves (`GridAudit.update_columns`)."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.size == 0:
            return None
        if not (scores[0] < self.last_score and np.all(scores[1:] < scores[:-1])):
            raise AuditInputError("aggregate chunks must arrive in strictly descending score order")
        self.last_score = scores[-1]
        return self.audit.update_columns(pos, neg, keep_curves)

    def report(self, clusters: ClusterRows | None = None, grid: ScoreGrid | None = None,
               estimand: str | None = None, streams=None, prefix=None) -> AuditReport:
        """The audit. Cluster-robust variances need the ``grid`` that was streamed and either ``clusters``
        (rows of a ``GROUP BY cluster, group, score`` over the same rows, group codes aligned with
        ``groups``) or ``streams`` of such rows, or the ``prefix`` sums fed alongside the sweep (see
        `grid_audit.add_cluster_covariance`)."""
        res = self.audit.result()
        res.update(alphas=self.alphas, groups=self.groups,
                   n_pos_group=self.n_pos, n_neg_group=self.n_neg)
        res["estimand"] = estimand or estimand_name(None if clusters is None else clusters.keys)
        if prefix is not None:
            add_cluster_covariance(res, None, self.cutoffs, prefix=prefix)
        elif clusters is not None or streams is not None:
            if grid is None:
                raise AuditInputError("a cluster-robust report needs the score grid that was streamed")
            add_cluster_covariance(res, grid, self.cutoffs, clusters, streams)
        groups, pairs, overall = group_tables(res, self.cutoffs, self.min_count, self.confidence, self.margins,
                                              self.min_clusters)
        x = xauc_tables(res, self.min_count, self.confidence, self.margins, self.min_clusters) \
            if self.with_xauc else None
        return AuditReport(groups, pairs, overall, x)


def audit_grid(grid: ScoreGrid, cutoffs=DEFAULT_CUTOFFS, *, clusters: ClusterRows | None = None,
               min_count: int = DEFAULT_MIN_COUNT, confidence: float = 0.95,
               estimand: str | None = None, margins=None, min_clusters: int = DEFAULT_MIN_CLUSTERS,
               comparisons: str = "all", reference=None) -> AuditReport:
    stream = StreamingAudit(grid.groups, grid.n_pos, grid.n_neg, cutoffs, min_count=min_count, confidence=confidence,
                            margins=margins, min_clusters=min_clusters, comparisons=comparisons, reference=reference)
    stream.update(grid.scores, grid.pos, grid.neg)
    return stream.report(clusters, grid, estimand)


def aggregate_clusters(df: pd.DataFrame, cluster_cols, group_col: str | None, groups) -> ClusterRows:
    """ClusterRows from an aggregate table with cluster column(s) (one: one-way, two: two-way)."""
    cols = [cluster_cols] if isinstance(cluster_cols, str) else list(cluster_cols)
    if len(cols) not in (1, 2):
        raise AuditInputError(f"cluster_cols takes one or two columns, got {cols}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise AuditInputError(f"aggregates lack the cluster column(s) {missing}; have {list(df.columns)}")
    keys = []
    for c in cols:
        if df[c].isna().any():
            raise AuditInputError(f"aggregates.{c} (cluster) has {int(df[c].isna().sum())} missing values")
        keys.append(pd.factorize(df[c])[0])
    if group_col is None:
        codes = np.zeros(len(df), dtype=np.intp)
    else:
        codes = np.searchsorted(np.asarray(groups), df[group_col].to_numpy())
    return ClusterRows(tuple(keys) if len(keys) == 2 else keys[0], codes.astype(np.intp),
                       df["score"].to_numpy(dtype=np.float64), df["n_pos"].to_numpy(dtype=np.float64),
                       df["n_neg"].to_numpy(dtype=np.float64))


def audit_aggregates(aggregates, cutoffs=DEFAULT_CUTOFFS, *, group_col: str | None = "group",
                     cluster_cols=None, min_count: int = DEFAULT_MIN_COUNT, confidence: float = 0.95,
                     estimand: str | None = None, margins=None, min_clusters: int = DEFAULT_MIN_CLUSTERS,
                     comparisons: str = "all", reference=None) -> AuditReport:
    """Per-group truncated AUCs, group comparisons and xAUC from an aggregate table.

    ``aggregates``: DataFrame with ``score``, ``n_pos``, ``n_neg`` and (unless ``group_col`` is
    None) a group column; rows may repeat a (group, score) pair and need not be sorted.
    ``cluster_cols``: a column (e.g. ``item_id``) or two (``item_id``, ``query_id``) whose values are
    clusters of dependent rows, i.e. the table is a ``GROUP BY cluster, group, score``: the variances
    are then cluster-robust. ``estimand`` names the variance in every table (default: conditional /
    clustered / two_way). ``margins``: practical margins δ per metric ({metric: δ}, defaults
    `audit.stats.equivalence.DEFAULT_MARGINS`). ``min_clusters``, ``comparisons``, ``reference``: as
    `StreamingAudit`.
    """
    df = pd.DataFrame(aggregates)
    if group_col is not None and group_col not in df.columns:
        raise AuditInputError(f"aggregates lack the group column {group_col!r}; have {list(df.columns)}")
    grid = aggregates_to_grid(df, group_col)
    clusters = None if cluster_cols is None else aggregate_clusters(df, cluster_cols, group_col, grid.groups)
    return audit_grid(grid, cutoffs, clusters=clusters, min_count=min_count, confidence=confidence,
                      estimand=estimand, margins=margins, min_clusters=min_clusters, comparisons=comparisons,
                      reference=reference)
