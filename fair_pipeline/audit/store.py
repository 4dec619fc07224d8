"""The fairness audit's DuckDB tables (glue; no Dagster). One row set per asset partition D (`partition_date`;
D's audit evaluates day D with the models of partition D): re-auditing D replaces exactly D's rows, in one
transaction across all tables.

  marts.fairness_audit_outputs   per scored output: audited or why not, held-out or in-sample, sample sizes
  marts.fairness_audit_groups    per output x group x FPR cutoff: truncated AUC I(a), SE, CI, normalized and
                                 McClish forms, n_pos, n_neg, estimable + note (group '(all)': pooled);
                                 every estimate table names its `variance_estimand` and number of `clusters`
  marts.fairness_audit_pairs     per output x pair of groups x cutoff: I_a - I_b, SE, CI, z, p, Holm (> 2 groups),
                                 effect (I_a - I_b)/cutoff with CI, margin δ, p_tost, verdict
  marts.fairness_audit_xauc      per output x ordered pair: xAUC(a, b) = P(R_1^a > R_0^b), SE, CI, counts
  marts.fairness_audit_xauc_deltas  per output x pair: Delta xAUC (kind xauc) and balanced xAUC_0 / xAUC_1 gaps,
                                 each with effect, CI, margin δ, p_tost, verdict
  marts.fairness_audit_pairwise  per output: within-query pairwise accuracies (`kind` matrix, marginal, overall,
                                 parity) and cross-group gaps (`kind` gap) A_{a>b} - A_{b>a} (p, Holm, effect, margin δ, p_tost, verdict);
                                 `variance_estimand` (two_way: new items and new queries), items and queries
                                 holding the pairs, `df` (effective clusters of the t interval)
  marts.fairness_audit_curves    per output: ROC per group with a pointwise 95% band (kind roc), xROC (kind xroc)
  marts.fairness_audit_exposure_groups  per ranking x group: exposure, merit, exposure/merit with CI (log scale SE),
                                 impressions, clicks, items, requests, estimable + note (audit.stats.exposure)
  marts.fairness_audit_exposure_pairs   per ranking x group vs the reference: exposure/merit ratio, CI, p, Holm,
                                 margin δ (log scale), p_tost, verdict
  marts.fairness_audit_exposure_cells   per protected attribute of the items table, and their crossing x group or
                                 cell (`cell`: the value, or the JSON array of values; `label` reads
                                 "gender=F · age=65+"): exposure/merit with CI, ratio to the table's reference with CI,
                                 Holm p, verdict, estimable + note (minimum cell size; audit.exposure_attributes);
                                 `df` / `ratio_df`: the t critical values' effective clusters
  marts.fairness_audit_cell_{groups,pairs,xauc,xauc_deltas,pairwise}  the tables above by protected attribute and
                                 crossed (audit.cell_audit): `attributes` names the table ("gender", "gender × age"),
                                 group / group_a / group_b hold the cell keys (the value, or the JSON array of
                                 values), label / label_a / label_b read "gender=F · age=65+"; `items` per cell
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from fair_pipeline.platform.partition_store import load_partition, resolve_partition, stored_partitions
from fair_pipeline.platform.warehouse import quote_identifier, table_columns, transaction

KEY = [("partition_date", "DATE"), ("label_source", "VARCHAR"), ("window_start", "DATE"), ("window_end", "DATE")]
OUT = [("scored_output", "VARCHAR")]
D, I, B, V = "DOUBLE", "BIGINT", "BOOLEAN", "VARCHAR"
# Every comparison ends with its effect size against the practical margin δ (audit.stats.equivalence); tables
# written before these columns existed gain them (NULL for the old rows) on the next write.
EQUIVALENCE = [("effect", D), ("effect_ci_low", D), ("effect_ci_high", D), ("margin", D), ("p_tost", D),
               ("verdict", V)]

SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "fairness_audit_outputs": KEY + OUT + [
        ("status", V), ("reason", V), ("description", V), ("basis", V), ("simulation_labels", B),
        ("held_out", B), ("trained_from", "DATE"), ("trained_through", "DATE"), ("rows", I), ("labelled_rows", I), ("unlabelled_rows", I),
        ("n_pos", I), ("n_neg", I), ("groups", I), ("pairwise_queries", I), ("queries_in_window", I),
        ("audited_at", "TIMESTAMP"), ("dagster_run_id", V), ("training_window", V)],
    "fairness_audit_groups": KEY + OUT + [
        ("group", V), ("is_overall", B), ("cutoff", D), ("n_pos", I), ("n_neg", I), ("auc", D), ("variance", D),
        ("se", D), ("ci_low", D), ("ci_high", D), ("auc_normalized", D), ("se_normalized", D), ("mcclish", D),
        ("mcclish_se", D), ("mcclish_ci_low", D), ("mcclish_ci_high", D), ("roc_at_cutoff", D),
        ("neg_below_cutoff", D), ("estimable", B), ("note", V), ("variance_estimand", V), ("clusters", I)],
    "fairness_audit_pairs": KEY + OUT + [
        ("group_a", V), ("group_b", V), ("cutoff", D), ("auc_a", D), ("auc_b", D), ("diff", D),
        ("diff_normalized", D), ("se", D), ("ci_low", D), ("ci_high", D), ("z", D), ("p_value", D),
        ("p_holm", D), ("estimable", B), ("variance_estimand", V), ("clusters", I)] + EQUIVALENCE,
    "fairness_audit_xauc": KEY + OUT + [
        ("group_a", V), ("group_b", V), ("xauc", D), ("variance", D), ("se", D), ("ci_low", D), ("ci_high", D),
        ("n_pos_a", I), ("n_neg_b", I), ("estimable", B), ("variance_estimand", V), ("clusters", I)],
    "fairness_audit_xauc_deltas": KEY + OUT + [
        ("kind", V), ("group_a", V), ("group_b", V), ("xauc_ab", D), ("xauc_ba", D), ("delta", D), ("se", D),
        ("ci_low", D), ("ci_high", D), ("z", D), ("p_value", D), ("p_holm", D), ("estimable", B),
        ("variance_estimand", V), ("clusters", I)] + EQUIVALENCE,
    "fairness_audit_pairwise": KEY + OUT + [
        ("kind", V), ("metric", V), ("group_a", V), ("group_b", V), ("accuracy", D), ("se", D), ("ci_low", D),
        ("ci_high", D), ("n_pairs", D), ("n_queries", I), ("estimable", B), ("p_value", D), ("p_holm", D)]
        + EQUIVALENCE + [("variance_estimand", V), ("n_items", I), ("df", D)],
    "fairness_audit_exposure_groups": KEY + OUT + [
        ("ranking", V), ("group", V), ("n", I), ("clicks", I), ("items", I), ("requests", I), ("exposure", D),
        ("merit", D), ("exposure_over_merit", D), ("se_log", D), ("ci_low", D), ("ci_high", D), ("estimable", B),
        ("note", V), ("examination", V), ("variance_estimand", V), ("df", D)],
    "fairness_audit_exposure_pairs": KEY + OUT + [
        ("ranking", V), ("group", V), ("reference", V), ("ratio", D), ("ci_low", D), ("ci_high", D), ("log_ratio", D),
        ("se_log", D), ("p_value", D), ("p_holm", D), ("margin", D), ("p_tost", D), ("verdict", V), ("note", V),
        ("examination", V), ("variance_estimand", V), ("df", D)],
    "fairness_audit_exposure_cells": KEY + OUT + [
        ("ranking", V), ("attributes", V), ("cell", V), ("label", V), ("n", I), ("clicks", I), ("items", I),
        ("requests", I), ("exposure", D), ("merit", D), ("exposure_over_merit", D), ("se_log", D), ("ci_low", D),
        ("ci_high", D), ("reference", V), ("ratio", D), ("ratio_ci_low", D), ("ratio_ci_high", D), ("p_holm", D),
        ("margin", D), ("verdict", V), ("estimable", B), ("note", V), ("examination", V), ("variance_estimand", V),
        ("df", D), ("ratio_df", D)],
    "fairness_audit_curves": KEY + OUT + [
        ("kind", V), ("group_a", V), ("group_b", V), ("fpr", D), ("tpr", D), ("se", D), ("tpr_ci_low", D),
        ("tpr_ci_high", D)],
}


def _by_cell(name: str) -> list[tuple[str, str]]:
    """A table's schema by attribute cells: its columns, the attribute table's name and the cells' labels."""
    keys = [c for c, _ in SCHEMAS[name]]
    labels = [("label", V), ("items", I)] if "group" in keys else [("label_a", V), ("label_b", V)]
    return SCHEMAS[name] + [("attributes", V)] + labels + ([("note", V)] if "note" not in keys else [])


SCHEMAS.update({name.replace("fairness_audit_", "fairness_audit_cell_"): _by_cell(name) for name in (
    "fairness_audit_groups", "fairness_audit_pairs", "fairness_audit_xauc", "fairness_audit_xauc_deltas",
    "fairness_audit_pairwise")})
TABLES = [f"marts.{name}" for name in SCHEMAS]


def _ddl(name: str) -> str:
    cols = ", ".join(f"{quote_identifier(c)} {t}" for c, t in SCHEMAS[name])
    return f"CREATE TABLE IF NOT EXISTS marts.{quote_identifier(name)} ({cols})"


def conform(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with exactly the table's columns (absent ones NULL), in order."""
    out = frame.reindex(columns=[c for c, _ in SCHEMAS[name]])
    for column, kind in SCHEMAS[name]:
        if kind == V:
            out[column] = out[column].astype(object).where(out[column].notna(), None)
        elif kind == B:
            out[column] = out[column].astype("boolean")
        elif kind == I:
            out[column] = pd.to_numeric(out[column]).round().astype("Int64")
        elif kind == D:
            out[column] = pd.to_numeric(out[column]).astype(np.float64)
    return out


def write_audit(con, label_source: str, window_start: dt.date, window_end: dt.date,
                tables: dict[str, pd.DataFrame], partition: dt.date | None = None) -> dict[str, int]:
    """Replace partition `partition`'s rows (default: the window's last day) of every audit table with `tables`
    ({name: rows}); returns rows written per table. Frames carry `scored_output` and the table's columns; the key
    columns are added here."""
    unknown = set(tables) - set(SCHEMAS)
    if unknown:
        raise ValueError(f"unknown audit tables {sorted(unknown)}; expected {sorted(SCHEMAS)}")
    key = {"partition_date": partition or window_end, "label_source": label_source, "window_start": window_start,
           "window_end": window_end}
    written = {}
    with transaction(con):
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        for name in SCHEMAS:
            con.execute(_ddl(name))
            present = set(table_columns(con, "marts", name))
            for column, kind in SCHEMAS[name]:  # a table written by an older version gains the new columns
                if column not in present:
                    con.execute(f"ALTER TABLE marts.{quote_identifier(name)} ADD COLUMN {quote_identifier(column)} {kind}")
            con.execute(f"DELETE FROM marts.{quote_identifier(name)} WHERE partition_date = $partition_date",
                        {"partition_date": key["partition_date"]})
            frame = conform(name, tables.get(name, pd.DataFrame()).assign(**key))
            written[name] = len(frame)
            if frame.empty:
                continue
            con.register("_audit_rows", frame)
            try:
                con.execute(f"INSERT INTO marts.{quote_identifier(name)} BY NAME SELECT * FROM _audit_rows")
            finally:
                con.unregister("_audit_rows")
    return written



def load_audit(con, partition: dt.date | None = None, error: type[Exception] = LookupError) -> dict[str, pd.DataFrame]:
    """{table name: rows} of partition `partition` (default: the newest audited) of every audit table (a table
    without rows for it, e.g. xAUC of a one-group audit, is empty)."""
    day = resolve_partition(con, TABLES[0], partition, error, "materialize the fairness_audit asset for that partition")
    return {name: load_partition(con, f"marts.{name}", day) if day in stored_partitions(con, f"marts.{name}")
            else pd.DataFrame() for name in SCHEMAS}
