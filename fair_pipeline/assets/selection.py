"""Model-selection assets (issue 8): elicit a fair metric from an oracle, rank the candidates by it, and move
the registry alias `champion` to the winner.

`elicited_metric` asks the configured oracle (by default a SIMULATED one whose ground truth is in the run
config; or a person's answers recorded by `fair-pipeline elicit`) and stores the metric. `model_selection`
evaluates every candidate (retrained ranker lambda x EO relaxation alpha) on held-out labelled rows, ranks
them by the metric and registers the winner as `fair-ranker` @champion.
"""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import json

import dagster as dg
import numpy as np
import pandas as pd
from pydantic import Field

from fair_pipeline import metric_oracle as mo
from fair_pipeline import settings
from fair_pipeline.core.elicitation import DEFAULT_RADIUS, group_pairs, metric_to_dict
from fair_pipeline.resources import DuckDBWarehouse
from fair_pipeline.selection_store import ELICITED_METRICS, now_utc, write_elicited_metric
from fair_pipeline.tracking import MLflowTracking
from fair_pipeline.warehouse import table_exists

OWNERS = ["team:fairness"]
GROUP = "selection"
ELICITED_METRIC_KEY = dg.AssetKey(["marts", "elicited_metric"])
ITEMS_KEY = dg.AssetKey(["staging", "stg_items"])
SIMULATED_LABEL = "SIMULATED oracle: answers come from the ground-truth metric in the run config, not from a person"
RECORDED_LABEL = "recorded oracle: a person's answers from `fair-pipeline elicit`, replayed"


class ElicitedMetricConfig(dg.Config):
    oracle: str = Field("simulated", description="simulated (ground truth below; SIMULATION) or recorded "
                        "(answers stored by `fair-pipeline elicit`).")
    truth_a: list[float] = Field([0.6, 0.8], description="Simulated truth: misclassification costs a (>= 0; scaled to |a|=1).")
    truth_B: list[list[list[float]]] = Field(
        [], description="Simulated truth: one PSD k x k disparity matrix per group pair (scaled to 1/2 sum |B|_F = 1); "
        "empty = the identity for every pair.")
    truth_lam: float = Field(0.5, description="Simulated truth: trade-off lam in [0, 1] (0 errors only, 1 disparities only).")
    flip_fraction: float = Field(0.0, description="Simulated oracle: share of answers flipped at random (a noisy person).")
    seed: int = Field(0, description="Simulated oracle: seed of the answer flips.")
    votes: int = Field(1, description="Simulated oracle: answers per question (odd; majority vote against flips).")
    tolerance: float = Field(1e-2, description="Simulated oracle: angular bisection tolerance of every search.")
    radius: float = Field(DEFAULT_RADIUS, description="Simulated oracle: radius of the feasible sphere of queried rates.")
    group_labels: list[str] = Field(
        [], description="The metric's groups in order. Simulated: empty = the item catalogue's groups (sorted). "
        "Recorded: empty = the session's labels; else renames them, in order, to the data's group ids.")
    session_id: str = Field("", description="Recorded oracle: session to replay (empty: the newest one with answers).")
    elicitation_db: str = Field("", description="Recorded oracle: DuckDB file of `fair-pipeline elicit` "
                                "(empty: $FAIR_PIPELINE_HOME/elicitation.duckdb).")


def catalogue_groups(con) -> tuple[str, ...]:
    if not table_exists(con, "staging", "stg_items"):
        raise dg.Failure("staging.stg_items does not exist; materialize raw/items and the staging models first")
    rows = con.execute("SELECT DISTINCT group_label FROM staging.stg_items ORDER BY 1").fetchall()
    if len(rows) < 2:
        raise dg.Failure(f"staging.stg_items has groups {[r[0] for r in rows]}; a fair metric needs at least 2")
    return tuple(str(r[0]) for r in rows)


def elicit(config: ElicitedMetricConfig, warehouse: DuckDBWarehouse) -> mo.ElicitationResult:
    """Run the configured oracle; bad configuration becomes a dg.Failure naming the setting."""
    try:
        if config.oracle == "simulated":
            labels = tuple(config.group_labels)
            if not labels:
                with warehouse.connect(read_only=True) as con:
                    labels = catalogue_groups(con)
            truth = mo.SimulatedTruth(config.truth_a, config.truth_B, config.truth_lam, config.flip_fraction, config.seed)
            return mo.elicit_simulated(truth, labels, config.tolerance, config.radius, votes=config.votes)
        if config.oracle == "recorded":
            db = config.elicitation_db or str(settings.home() / "elicitation.duckdb")
            result = mo.elicit_recorded(db, config.session_id)
            return relabelled(result, tuple(config.group_labels)) if config.group_labels else result
    except (mo.OracleConfigError, ValueError) as error:
        raise dg.Failure(description=f"elicited_metric (oracle={config.oracle!r}): {error}") from error
    raise dg.Failure(description=f"elicited_metric: unknown oracle {config.oracle!r}; expected one of {list(mo.ORACLE_KINDS)}")


def relabelled(result: mo.ElicitationResult, labels: tuple[str, ...]) -> mo.ElicitationResult:
    if len(labels) != len(result.group_labels):
        raise mo.OracleConfigError(f"group_labels {list(labels)} name {len(labels)} groups; the session has "
                                   f"{len(result.group_labels)}: {list(result.group_labels)}")
    return mo.dataclasses.replace(result, group_labels=labels)


def metric_row(result: mo.ElicitationResult, run_id: str) -> dict:
    """The marts.elicited_metrics row of an elicitation."""
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


def metric_table(result: mo.ElicitationResult) -> pd.DataFrame:
    """Elicited (and, when simulated, true) a, B and lam as one row per parameter: the report's metric table."""
    rows = [("lam", result.metric.lam, None if result.truth is None else result.truth.lam)]
    for i, value in enumerate(result.metric.a):
        rows.append((f"a[{i + 1}]", value, None if result.truth is None else result.truth.a[i]))
    labels = result.group_labels
    for (u, v), b in zip(group_pairs(result.metric.n_groups), result.metric.pair_matrices()):
        true_b = None if result.truth is None else result.truth.B[u, v]
        for i, j in np.ndindex(*b.shape):
            if i <= j:
                rows.append((f"B[{labels[u]} vs {labels[v]}][{i + 1},{j + 1}]", b[i, j],
                             None if true_b is None else true_b[i, j]))
    frame = pd.DataFrame(rows, columns=["parameter", "elicited", "truth"])
    frame.insert(0, "oracle", SIMULATED_LABEL if result.simulated else f"{RECORDED_LABEL} (session {result.session_id})")
    return frame


@dg.asset(
    key=ELICITED_METRIC_KEY,
    deps=[ITEMS_KEY],
    pool="duckdb",
    group_name=GROUP,
    kinds={"python", "duckdb", "mlflow"},
    owners=OWNERS,
    code_version="1",
    description=(
        "The fair quadratic metric (Hiranandani et al., Definition 4: cost (1-lam)<a, 1-r> + lam/2 sum_{u<v} "
        "(r^u-r^v)^T B^{uv} (r^u-r^v) of group-wise TPR/TNR) elicited from pairwise comparisons by fair QPME. "
        "Oracle `simulated` (default; a SIMULATION: answers from the ground truth in the run config, optionally "
        "flipped; the elicitation error against that truth is reported) or `recorded` (a person's answers from "
        "`fair-pipeline elicit`, replayed; inconsistent or incomplete sessions are refused). Appended to "
        "`marts.elicited_metrics` and logged to MLflow (experiment fair_pipeline/selection)."
    ),
)
def elicited_metric(
    context: dg.AssetExecutionContext, config: ElicitedMetricConfig, warehouse: DuckDBWarehouse, mlflow: MLflowTracking,
) -> dg.MaterializeResult:
    result = elicit(config, warehouse)
    metric = result.metric
    label = SIMULATED_LABEL if result.simulated else RECORDED_LABEL
    context.log.info(f"{label}: lam={metric.lam:.3f} after {metric.n_queries} queries")
    row = metric_row(result, context.run_id)
    table = metric_table(result)
    metadata = {
        "oracle": label, "oracle_kind": result.oracle_kind, "simulated": result.simulated,
        "group_labels": dg.MetadataValue.json(list(result.group_labels)),
        "lam": float(metric.lam), "a": dg.MetadataValue.json(metric.a.round(4).tolist()),
        "n_queries": int(metric.n_queries), "n_inconsistencies": result.n_inconsistencies,
        "metric": dg.MetadataValue.md(f"**{label}**\n\n" + table.drop(columns="oracle").round(4)
                                      .astype(object).where(table.drop(columns="oracle").notna(), "").to_markdown(index=False)),
        "table": ELICITED_METRICS,
    }
    band = metric.diagnostics.get("tolerance_band", {})
    if band.get("n_draws"):
        metadata["lam_95_band_from_tolerance"] = dg.MetadataValue.json([round(x, 4) for x in band["lam_interval"]])
    if result.simulated:
        metadata["elicitation_errors"] = dg.MetadataValue.json({k: round(v, 5) for k, v in result.errors().items()})
        metadata["n_flipped_answers"] = result.n_flipped
        metadata["truth_satisfies_assumption4"] = mo.truth_is_regular(result)
        if not metadata["truth_satisfies_assumption4"]:
            context.log.warning("the simulated truth violates Assumption 4: elicitation is not guaranteed to recover it")
    else:
        metadata["session_id"] = result.session_id
    tags = {"fair_pipeline.simulation": str(result.simulated).lower(), "fair_pipeline.oracle": result.oracle_kind}
    with mlflow.start_run(context, "selection", tags=tags) as run:
        run.log_params({"oracle": result.oracle_kind, "n_groups": metric.n_groups, "tolerance": result.tolerance,
                        "radius": result.radius, "group_labels": ",".join(result.group_labels)}
                       | ({"flip_fraction": config.flip_fraction, "seed": config.seed, "votes": config.votes}
                          if result.simulated else {"session_id": result.session_id}))
        run.log_metrics({"lam": metric.lam, "n_queries": metric.n_queries, "n_inconsistencies": result.n_inconsistencies}
                        | {f"error_{k}": v for k, v in (result.errors() or {}).items()})
        run.log_dict(metric_to_dict(metric) | {"group_labels": list(result.group_labels), "oracle": label}, "elicited_metric.json")
        if result.truth is not None:
            run.log_dict(metric_to_dict(result.truth) | {"flip_fraction": config.flip_fraction, "seed": config.seed},
                         "simulated_truth.json")
        run.log_table(table, "elicited_metric")  # the fairness report's model-selection section
        metadata["mlflow_run_id"] = run.run_id
        metadata["mlflow_run"] = dg.MetadataValue.url(run.url)
    with warehouse.connect() as con:
        write_elicited_metric(con, row)
    return dg.MaterializeResult(metadata=metadata)


selection_assets = [elicited_metric]
