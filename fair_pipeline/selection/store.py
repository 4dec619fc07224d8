"""The model-selection tables in the warehouse (glue for the `elicited_metric` and `model_selection` assets).

    marts.elicited_metrics   one row per elicitation (history; readers take the newest): oracle kind, whether
                             it is a SIMULATION, the metric (a, B per group pair, lam, tau) as JSON and columns,
                             queries used, and for the simulated oracle the ground truth and the elicitation errors
    marts.model_ranking      per asset partition D, the ranking: one row per candidate (ranker lambda x EO alpha, and the other `family`s) with its
                             group-wise rates and counts, cost, SE, CI (marginal), the paired difference vs the
                             winner clustered by item (diff_vs_winner, diff_se, diff_ci_low, diff_ci_high, diff_p, diff_df, diff_disagreeing;
                             paired_clusters / paired_rows), rank, the registered champion version, and the
                             elicitation it was ranked by (`metric_elicited_at`)

Each write is one transaction.
"""
from __future__ import annotations

import datetime as dt
import json

import pandas as pd

from fair_pipeline.platform.partition_store import load_partition, replace_partition
from fair_pipeline.platform.warehouse import table_exists, transaction
from fair_pipeline.selection.elicitation import FairQuadraticMetric, metric_from_dict, metric_to_dict

ELICITED_METRICS = "marts.elicited_metrics"
MODEL_RANKING = "marts.model_ranking"

_ELICITED_DDL = f"""CREATE TABLE IF NOT EXISTS {ELICITED_METRICS} (
    elicited_at TIMESTAMP NOT NULL,
    dagster_run_id VARCHAR,
    oracle_kind VARCHAR NOT NULL,      -- simulated | recorded
    simulated BOOLEAN NOT NULL,        -- answers came from a configured ground truth, not a person
    session_id VARCHAR,                -- recorded oracle: the `fair-pipeline elicit` session replayed
    group_labels VARCHAR[] NOT NULL,   -- the metric's group order
    n_groups INTEGER NOT NULL,
    n_classes INTEGER NOT NULL,
    a DOUBLE[] NOT NULL,
    lam DOUBLE NOT NULL,
    n_queries INTEGER NOT NULL,
    tolerance DOUBLE NOT NULL,
    radius DOUBLE NOT NULL,
    n_inconsistencies INTEGER NOT NULL,
    metric_json VARCHAR NOT NULL,      -- metric_to_dict(): a, B per pair, lam, group_weights, n_queries
    truth_json VARCHAR,                -- simulated oracle: the ground truth (same format)
    error_a DOUBLE,                    -- |a_hat - a|_2 (simulated oracle)
    error_B DOUBLE,                    -- sum over group pairs of |B_hat - B|_F
    error_lam DOUBLE,                  -- |lam_hat - lam|
    n_flipped INTEGER
)"""


def write_elicited_metric(con, row: dict) -> None:
    """Append one elicitation (all columns of marts.elicited_metrics, by name), in one transaction."""
    frame = pd.DataFrame([row])
    with transaction(con):
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        con.execute(_ELICITED_DDL)
        con.register("_elicited_metric", frame)
        try:
            con.execute(f"INSERT INTO {ELICITED_METRICS} BY NAME SELECT * FROM _elicited_metric")
        finally:
            con.unregister("_elicited_metric")


def load_latest_metric(con) -> tuple[FairQuadraticMetric, dict]:
    """(metric, its row as a dict) of the newest elicitation; LookupError when there is none."""
    if not table_exists(con, *ELICITED_METRICS.split(".")):
        raise LookupError(f"{ELICITED_METRICS} does not exist; materialize the elicited_metric asset first")
    frame = con.execute(f"SELECT * FROM {ELICITED_METRICS} ORDER BY elicited_at DESC LIMIT 1").df()
    if frame.empty:
        raise LookupError(f"{ELICITED_METRICS} is empty; materialize the elicited_metric asset first")
    row = frame.iloc[0].to_dict()
    row["group_labels"] = [str(g) for g in row["group_labels"]]
    return metric_from_dict(json.loads(row["metric_json"])), row


def load_metric_row(con, elicited_at=None) -> dict:
    """The row of the elicitation made at `elicited_at` (a ranking's `metric_elicited_at`), else of the newest one;
    LookupError when there is none."""
    if elicited_at is None or pd.isna(elicited_at):
        return load_latest_metric(con)[1]
    if not table_exists(con, *ELICITED_METRICS.split(".")):
        raise LookupError(f"{ELICITED_METRICS} does not exist; materialize the elicited_metric asset first")
    frame = con.execute(f"SELECT * FROM {ELICITED_METRICS} WHERE elicited_at = $at LIMIT 1",
                        {"at": pd.Timestamp(elicited_at).to_pydatetime()}).df()
    if frame.empty:
        raise LookupError(f"{ELICITED_METRICS} holds no elicitation made at {elicited_at} (the ranking's metric)")
    return frame.iloc[0].to_dict()


def load_ranking(con, partition: dt.date | str | None = None) -> pd.DataFrame:
    """The ranking of partition `partition` (default: the newest stored), best first; LookupError naming what is
    missing."""
    frame = load_partition(con, MODEL_RANKING, partition, hint="materialize the model_selection asset for that partition")
    return frame.sort_values("rank", na_position="last", kind="stable").reset_index(drop=True)


def metric_row(result, run_id: str) -> dict:
    """The marts.elicited_metrics row of an elicitation (a `metric_oracle.ElicitationResult`)."""
    metric, errors = result.metric, result.errors()
    truth = None
    if result.truth is not None:
        truth = json.dumps(metric_to_dict(result.truth))
    return {
        "elicited_at": now_utc(), "dagster_run_id": run_id, "oracle_kind": result.oracle_kind,
        "simulated": result.simulated, "session_id": result.session_id, "group_labels": list(result.group_labels),
        "n_groups": metric.n_groups, "n_classes": metric.n_classes, "a": metric.a.tolist(), "lam": metric.lam,
        "n_queries": metric.n_queries, "tolerance": result.tolerance, "radius": result.radius,
        "n_inconsistencies": result.n_inconsistencies, "metric_json": json.dumps(metric_to_dict(metric)),
        "truth_json": truth, "error_a": errors and errors["a"], "error_B": errors and errors["B"],
        "error_lam": errors and errors["lam"], "n_flipped": result.n_flipped if result.simulated else None,
    }


def replace_ranking(con, ranking: pd.DataFrame, partition: dt.date) -> int:
    """Replace partition `partition`'s rows of marts.model_ranking, in one transaction."""
    return replace_partition(con, {MODEL_RANKING: ranking}, partition)[MODEL_RANKING]


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
