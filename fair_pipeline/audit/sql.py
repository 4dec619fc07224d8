"""Held-out labelled rows for the fairness audit, aggregated by the warehouse engine (glue; no Dagster, no math).

Every function takes a `Warehouse` (DuckDB or Spark; a DuckDB connection is wrapped).

Label sources (`LABEL_SOURCES`):
  relevance          SIMULATION ONLY: the simulator's true Y(1) of each item (`landing/_truth/date=D/items.parquet`,
                     joined on item_id) on the production (observational) impressions. Real logs have no truth.
  randomized_relevance  SIMULATION ONLY: the same true Y(1), on the randomized requests of the policies given
                     (default `shuffle`). No ranker or transform is fitted on randomized traffic, so these rows are
                     held out from every fit by construction (model selection's default on simulated logs).
  randomized_clicks  clicks on randomized traffic (default: `shuffle` requests, where the displayed position is
                     independent of the score, so a click is an unbiased if noisy label: P(click) = w_position Y).

The row-level work is SQL with bound parameters (dates, policies, the truth file, sample size); only
aggregates leave the engine:
  score_counts   per group x distinct logged score: n_pos, n_neg (the audit's sufficient statistic; a
                 within-group monotone transform of the score, such as the EO transform, keeps it sufficient)
  item_counts    per group x item: n_pos, n_neg and the item's features (for rankers scoring item features)
  cluster_counts per group x item [x query] x distinct logged score: n_pos, n_neg (the second pass of the
                 cluster-robust variances: items, and queries for two-way clustering, are the sampling units)
  query_rows     per (query, group, item, score): n_pos, n_neg of a bounded, deterministic sample of queries
                 (ordered by md5(query_id)) for the within-query pairwise accuracies.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pandas as pd

from fair_pipeline.audit.stats import AuditInputError
from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.catalogue_dates import items_as_of
from fair_pipeline.ingestion.landing import truth_dir
from fair_pipeline.platform.engines import Warehouse, as_warehouse, fetch_rows
from fair_pipeline.platform.warehouse import quote_identifier
from fair_pipeline.platform.windows import (
    DEFAULT_HOLDOUT_DAYS,
    PartitionWindow,
    newest_partitions,
    partition_dates,
    window_through,
)

LABEL_SOURCES = ("relevance", "randomized_relevance", "randomized_clicks")
UNKNOWN_GROUP = "<unknown>"  # rows whose protected characteristic is missing form their own group
OBSERVATIONAL_VIEW = ("staging", "stg_observational_impressions")
RANDOMIZED_VIEW = ("staging", "stg_randomized_impressions")
ITEMS_VIEW = ("staging", "stg_items")


class AuditDataError(AuditInputError):
    """No held-out rows, no truth file, unknown label source, ...: the message says what and where."""


EvaluationWindow = PartitionWindow


@dataclasses.dataclass(frozen=True)
class LabelSource:
    """Which rows and which label; `rows_sql` selects query_id, item_id, grp, score, label with bound parameters."""

    name: str
    view: tuple[str, str]
    rows_sql: str
    params: dict
    simulation: bool
    # row columns every aggregate keeps beside grp (e.g. the logged group_id that an output scores by, when grp
    # is a cell of the items' attributes: `audit.cell_audit`)
    carried: tuple[str, ...] = ()

    @property
    def table(self) -> str:
        return ".".join(quote_identifier(part) for part in self.view)

    def carried_sql(self, prefix: str = "") -> str:
        """", c1, c2" (quoted, each with `prefix`) to add to a SELECT and a GROUP BY after grp."""
        return "".join(f", {prefix}{quote_identifier(c)}" for c in self.carried)


def truth_path(landing: Path, day: dt.date | str | None = None) -> Path:
    """The simulator's item truth of partition `day` (`ingestion.landing.truth_dir`)."""
    return truth_dir(landing, day) / "items.parquet"


def label_source(name: str, landing: Path, window: EvaluationWindow, policies: list[str]) -> LabelSource:
    """The evaluation rows of `window` for a label source (see the module docstring)."""
    dates = {"start": window.first, "end": window.last, "unknown_group": UNKNOWN_GROUP}
    if name in ("relevance", "randomized_relevance"):
        truth = truth_path(landing, window.last)
        if not truth.exists():
            raise AuditDataError(
                f"label_source={name!r} needs the simulator's truth file {truth} (SIMULATION only); "
                "for real logs use label_source='randomized_clicks'"
            )
        view, policy_filter, params = OBSERVATIONAL_VIEW, "", {**dates, "truth": str(truth)}
        if name == "randomized_relevance":
            view, policy_filter = RANDOMIZED_VIEW, " AND list_contains($policies, o.policy)"
            params["policies"] = _checked_policies(name, policies)
        sql = (
            f"SELECT o.query_id, o.item_id, coalesce(o.group_id, $unknown_group) AS grp, o.score, CAST(t.relevance AS INTEGER) AS label "
            f"FROM {'.'.join(map(quote_identifier, view))} o "
            "LEFT JOIN read_parquet($truth) t ON t.item_id = o.item_id "
            "WHERE o.partition_date BETWEEN $start AND $end" + policy_filter
        )
        return LabelSource(name, view, sql, params, simulation=True)
    if name == "randomized_clicks":
        policies = _checked_policies(name, policies)
        sql = (
            "SELECT query_id, item_id, coalesce(group_id, $unknown_group) AS grp, score, click AS label "
            f"FROM {'.'.join(map(quote_identifier, RANDOMIZED_VIEW))} "
            "WHERE partition_date BETWEEN $start AND $end AND list_contains($policies, policy)"
        )
        return LabelSource(name, RANDOMIZED_VIEW, sql, {**dates, "policies": list(policies)}, simulation=False)
    raise AuditDataError(f"label_source={name!r} is not one of {list(LABEL_SOURCES)}")


def _checked_policies(name: str, policies: list[str]) -> list[str]:
    if not policies:
        raise AuditDataError(f"label_source={name!r} needs at least one randomized policy")
    unknown = sorted(set(policies) - set(contract.RANDOMIZED_POLICIES))
    if unknown:
        raise AuditDataError(f"randomized policies {unknown} are not among {list(contract.RANDOMIZED_POLICIES)}")
    return list(policies)


def evaluation_window(con: Warehouse, source_name: str, days: int = DEFAULT_HOLDOUT_DAYS,
                      end: dt.date | str | None = None) -> EvaluationWindow:
    """The newest `days` partitions holding rows of the label source's traffic, on or before `end`: the
    partitions the trained stages hold out (`holdout_days`, same default)."""
    view = OBSERVATIONAL_VIEW if source_name == "relevance" else RANDOMIZED_VIEW
    return newest_partitions(con, ".".join(view), days, end, error=AuditDataError,
                             hint="materialize the staging models for some days first (nothing to audit)")


def partition_evaluation_window(con: Warehouse, source_name: str, days: int,
                                day: dt.date) -> EvaluationWindow:
    """The calendar days `day`-`days`+1..`day` of the label source's traffic; `day` itself must hold some (the
    audit and the selection of partition D evaluate day D). Days without data are named, never replaced by
    older ones."""
    table = ".".join(OBSERVATIONAL_VIEW if source_name == "relevance" else RANDOMIZED_VIEW)
    hint = "materialize the staging models for some days first (nothing to audit)"
    earlier = partition_dates(con, [table], day)
    if not earlier or earlier[-1] != day:
        if not as_warehouse(con).table_exists(tuple(table.split("."))):
            raise AuditDataError(f"{table} does not exist; {hint}")
        raise AuditDataError(f"partition {day} has no {source_name} traffic to evaluate (newest before it: "
                             f"{earlier[-1] if earlier else None}); ingest day {day} first")
    return window_through(con, table, days, day, error=AuditDataError, hint=hint)


def row_summary(con, source: LabelSource) -> dict:
    """Rows in the window, rows without a label (e.g. items missing from the truth file), labels not 0/1."""
    [(total, unlabelled, bad, pos)] = fetch_rows(
        as_warehouse(con),
        "SELECT count(*), count(*) FILTER (WHERE label IS NULL), "
        "count(*) FILTER (WHERE label IS NOT NULL AND label NOT IN (0, 1)), "
        f"coalesce(sum(label) FILTER (WHERE label IN (0, 1)), 0) FROM ({source.rows_sql})",
        source.params,
    )
    if bad:
        raise AuditDataError(f"{source.name}: {bad} labels are not 0/1 in {'.'.join(source.view)}")
    return {"rows": int(total), "unlabelled_rows": int(unlabelled), "labelled_rows": int(total - unlabelled),
            "positives": int(pos)}


def score_counts_query(source: LabelSource) -> tuple[str, dict]:
    """group, score, n_pos, n_neg: one row per group x distinct logged score (labelled rows only)."""
    carried = source.carried_sql()
    return (f"SELECT grp AS \"group\"{carried}, score, CAST(sum(label) AS BIGINT) AS n_pos, "
            "CAST(count(*) - sum(label) AS BIGINT) AS n_neg "
            f"FROM ({source.rows_sql}) WHERE label IS NOT NULL GROUP BY grp{carried}, score ORDER BY grp, score",
            source.params)


def score_counts(con, source: LabelSource) -> pd.DataFrame:
    return as_warehouse(con).query_df(*score_counts_query(source))


VARIANCES = {
    "item_clustered": ("item_id",),
    "two_way": ("item_id", "query_id"),
    "conditional": (),
}
def check_variance(name: str) -> tuple[str, ...]:
    if name not in VARIANCES:
        raise AuditDataError(f"variance={name!r} is not one of {list(VARIANCES)}")
    return VARIANCES[name]


def cluster_counts_query(source: LabelSource, cluster_cols: tuple[str, ...]) -> tuple[str, dict]:
    """group, cluster columns (item_id[, query_id]), score, n_pos, n_neg (labelled rows only)."""
    unknown = [c for c in cluster_cols if c not in ("item_id", "query_id")]
    if unknown:
        raise AuditDataError(f"cluster columns {unknown} are not among ['item_id', 'query_id']")
    keys, carried = ", ".join(cluster_cols), source.carried_sql()
    return (f"SELECT grp AS \"group\"{carried}, {keys}, score, CAST(sum(label) AS BIGINT) AS n_pos, "
            "CAST(count(*) - sum(label) AS BIGINT) AS n_neg "
            f"FROM ({source.rows_sql}) WHERE label IS NOT NULL GROUP BY grp{carried}, {keys}, score", source.params)


def cluster_counts(con, source: LabelSource, cluster_cols: tuple[str, ...]) -> pd.DataFrame:
    return as_warehouse(con).query_df(*cluster_counts_query(source, cluster_cols))


def item_counts(con, source: LabelSource, features: list[str], catalogue_day=None) -> pd.DataFrame:
    """group, item_id, n_pos, n_neg and the item's feature columns (validated against staging.stg_items; the
    catalogue that holds on `catalogue_day`, default the window's last day)."""
    engine = as_warehouse(con)
    if not engine.table_exists(ITEMS_VIEW):
        raise AuditDataError(f"{'.'.join(ITEMS_VIEW)} does not exist; materialize raw.items and the staging models")
    available = engine.table_columns(ITEMS_VIEW)
    missing = [f for f in features if f not in available]
    if missing:
        raise AuditDataError(f"feature columns {missing} are not in {'.'.join(ITEMS_VIEW)} (columns: {available})")
    cols = ", ".join(f"i.{quote_identifier(f)}" for f in features)
    items, as_of = items_as_of(engine, catalogue_day or source.params.get("end"))  # the evaluated day's catalogue
    frame = engine.query_df(
        f"SELECT r.grp AS \"group\"{source.carried_sql('r.')}, r.item_id, r.n_pos, r.n_neg, {cols} FROM ("
        f"  SELECT grp{source.carried_sql()}, item_id, CAST(sum(label) AS BIGINT) AS n_pos, "
        "CAST(count(*) - sum(label) AS BIGINT) AS n_neg"
        f"  FROM ({source.rows_sql}) WHERE label IS NOT NULL GROUP BY grp{source.carried_sql()}, item_id"
        f") r LEFT JOIN {items} i ON i.item_id = r.item_id "
        "ORDER BY r.grp, r.item_id",
        source.params | as_of,
    )
    unmatched = frame[features].isna().any(axis=1)
    if unmatched.any():
        raise AuditDataError(
            f"{int(unmatched.sum())} audited items have no (complete) features in {'.'.join(ITEMS_VIEW)}, "
            f"e.g. {frame.loc[unmatched, 'item_id'].head(3).tolist()}"
        )
    return frame


def query_rows_query(source: LabelSource, max_queries: int) -> tuple[str, dict]:
    """(sql, params) of the rows of at most `max_queries` queries (deterministic sample by md5(query_id)), aggregated
    per (query, group, item, score)."""
    if max_queries < 1:
        raise AuditDataError(f"pairwise_max_queries={max_queries} must be >= 1")
    sql = (f"WITH r AS (SELECT * FROM ({source.rows_sql}) WHERE label IS NOT NULL), "
           "q AS (SELECT query_id FROM (SELECT DISTINCT query_id FROM r) ORDER BY md5(query_id), query_id "
           "LIMIT $max_queries) "
           f"SELECT r.query_id, r.grp AS \"group\"{source.carried_sql('r.')}, r.item_id, r.score, "
           "CAST(sum(r.label) AS BIGINT) AS n_pos, CAST(count(*) - sum(r.label) AS BIGINT) AS n_neg "
           "FROM r JOIN q ON q.query_id = r.query_id "
           f"GROUP BY r.query_id, r.grp{source.carried_sql('r.')}, r.item_id, r.score")
    return sql, {**source.params, "max_queries": int(max_queries)}


def queries_in_window(con, source: LabelSource) -> int:
    """The number of queries with labelled rows in the window (what the pairwise sample is drawn from)."""
    [(total,)] = fetch_rows(as_warehouse(con),
                            f"SELECT count(DISTINCT query_id) FROM ({source.rows_sql}) WHERE label IS NOT NULL",
                            source.params)
    return int(total)


def query_rows(con, source: LabelSource, max_queries: int) -> tuple[pd.DataFrame, int]:
    """`query_rows_query`'s rows ordered by query, and the number of queries in the window."""
    sql, params = query_rows_query(source, max_queries)
    frame = as_warehouse(con).query_df(f"SELECT * FROM ({sql}) ORDER BY query_id", params)
    return frame, queries_in_window(con, source)
