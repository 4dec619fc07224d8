"""Model-selection assets: elicit a fair metric from an oracle, rank the candidates by it, and move
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

from fair_pipeline.audit import sql as aw
from fair_pipeline.audit.assets import FAIRNESS_AUDIT_KEY
from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.assets import EO_TRANSFORM_KEY
from fair_pipeline.eo.evaluation import DEFAULT_ALPHAS
from fair_pipeline.eo.serving import log_fair_ranker
from fair_pipeline.platform import settings
from fair_pipeline.platform.asset_defaults import pipeline_asset
from fair_pipeline.platform.partitions import daily_partitions, partition_day
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, TAG_MODEL_PARTITION, MLflowTracking, TrackingUnavailableError
from fair_pipeline.platform.windows import is_newest_partition
from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.selection import candidates as sc
from fair_pipeline.selection import families as fam
from fair_pipeline.selection import metric_oracle as mo
from fair_pipeline.selection.elicitation import (
    DEFAULT_RADIUS,
    metric_to_dict,
)
from fair_pipeline.selection.elicitation.paired import MIN_DISAGREEING
from fair_pipeline.selection.evaluation import INTERVALS_NOTE, Selection, compute_model_selection
from fair_pipeline.selection.exposure import EXPOSURE_NOTE
from fair_pipeline.selection.report import (
    RECORDED_LABEL,
    SIMULATED_LABEL,
    markdown,
    metric_table,
    oracle_label,
    ranking_markdown,
)
from fair_pipeline.selection.store import (
    ELICITED_METRICS,
    MODEL_RANKING,
    metric_row,
    now_utc,
    replace_ranking,
    write_elicited_metric,
)
from fair_pipeline.training.assets import RANKER_CANDIDATES_KEY

GROUP = "selection"
ELICITED_METRIC_KEY = dg.AssetKey(["marts", "elicited_metric"])
ITEMS_KEY = dg.AssetKey(["staging", "stg_items"])


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
    exposure_weight: float | None = Field(
        None, description="Weight mu of a candidate's exposure disparity on the logs (1/2 sum over group pairs of "
        "squared log exposure-ratio differences) added to the metric's cost by model selection. Unset: the recorded "
        "session's answer to `fair-pipeline elicit`'s exposure question (0 if it has none; the simulated oracle: 0); "
        "a number states it here and overrides the session's. 0: exposure parity is reported, not weighed.")


STATED_WEIGHT = "stated in the elicited_metric asset's config (exposure_weight), not elicited"


def catalogue_groups(con) -> tuple[str, ...]:
    """The item catalogue's groups, from a `Warehouse` (or a DuckDB connection)."""
    labels = sc.catalogue_group_labels(con)
    if labels is None:
        raise dg.Failure("staging.stg_items does not exist; materialize raw/items and the staging models first")
    if len(labels) < 2:
        raise dg.Failure(f"staging.stg_items has groups {labels}; a fair metric needs at least 2")
    return tuple(labels)


def elicit(config: ElicitedMetricConfig, warehouse: DuckDBWarehouse) -> mo.ElicitationResult:
    """Run the configured oracle, the metric carrying the configured exposure weight; bad configuration becomes a
    dg.Failure naming the setting."""
    result = _run_oracle(config, warehouse)
    if config.exposure_weight is None:
        return result
    try:
        metric = mo.dataclasses.replace(result.metric, exposure_weight=float(config.exposure_weight),
                                        exposure_weight_source=STATED_WEIGHT)
    except ValueError as error:
        raise dg.Failure(description=f"elicited_metric: {error}") from error
    return mo.dataclasses.replace(result, metric=metric)


def _run_oracle(config: ElicitedMetricConfig, warehouse: DuckDBWarehouse) -> mo.ElicitationResult:
    try:
        if config.oracle == "simulated":
            labels = tuple(config.group_labels)
            if not labels:
                with warehouse.connect(read_only=True) as con:
                    labels = catalogue_groups(warehouse.engine_for(con))
            truth = mo.SimulatedTruth(config.truth_a, config.truth_B, config.truth_lam, config.flip_fraction, config.seed)
            return mo.elicit_simulated(truth, labels, config.tolerance, config.radius, votes=config.votes)
        if config.oracle == "recorded":
            db = config.elicitation_db or str(settings.default_elicitation_db())
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


def elicited_metric_metadata(result: mo.ElicitationResult, label: str) -> dict:
    metric = result.metric
    table = metric_table(metric, result.truth, result.group_labels, oracle_label(result.simulated, result.session_id),
                         metric.n_queries)
    metadata = {
        "oracle": label, "oracle_kind": result.oracle_kind, "simulated": result.simulated,
        "group_labels": dg.MetadataValue.json(list(result.group_labels)),
        "lam": float(metric.lam), "a": dg.MetadataValue.json(metric.a.round(4).tolist()),
        "n_queries": int(metric.n_queries), "n_inconsistencies": result.n_inconsistencies,
        "metric": dg.MetadataValue.md(f"**{label}**\n\n" + markdown(table[["parameter", "elicited", "truth"]].round(4))),
        "table": ELICITED_METRICS,
    }
    band = metric.diagnostics.get("tolerance_band", {})
    if band.get("n_draws"):
        metadata["lam_95_band_from_tolerance"] = dg.MetadataValue.json([round(x, 4) for x in band["lam_interval"]])
    if not result.simulated:
        return metadata | {"session_id": result.session_id}
    return metadata | {"elicitation_errors": dg.MetadataValue.json({k: round(v, 5) for k, v in result.errors().items()}),
                       "n_flipped_answers": result.n_flipped, "truth_satisfies_assumption4": mo.truth_is_regular(result)}


def log_elicited_metric(mlflow: MLflowTracking, context, result: mo.ElicitationResult, config: ElicitedMetricConfig,
                        label: str) -> dict:
    """One MLflow run (stage selection): the oracle's settings, lam and the elicitation errors, the metric (and the
    simulated truth) as JSON; returns metadata linking it."""
    metric = result.metric
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
    return {"mlflow_run_id": run.run_id, "mlflow_run": dg.MetadataValue.url(run.url)}


@pipeline_asset(key=ELICITED_METRIC_KEY, deps=[ITEMS_KEY], group_name=GROUP, code_version="1")
def elicited_metric(
    context: dg.AssetExecutionContext, config: ElicitedMetricConfig, warehouse: DuckDBWarehouse, mlflow: MLflowTracking,
) -> dg.MaterializeResult:
    """The fair quadratic metric (Hiranandani et al., Definition 4: cost (1-lam)<a, 1-r> + lam/2 sum_{u<v}
    (r^u-r^v)^T B^{uv} (r^u-r^v) of group-wise TPR/TNR) elicited from pairwise comparisons by fair QPME. Oracle
    `simulated` (default; a SIMULATION: answers from the ground truth in the run config, optionally flipped; the
    elicitation error against that truth is reported) or `recorded` (a person's answers from `fair-pipeline elicit`,
    replayed; inconsistent or incomplete sessions are refused). Appended to `marts.elicited_metrics` and logged to
    MLflow (experiment fair_pipeline/selection)."""
    result = elicit(config, warehouse)
    label = SIMULATED_LABEL if result.simulated else RECORDED_LABEL
    context.log.info(f"{label}: lam={result.metric.lam:.3f} after {result.metric.n_queries} queries")
    metadata = elicited_metric_metadata(result, label)
    if result.simulated and not metadata["truth_satisfies_assumption4"]:
        context.log.warning("the simulated truth violates Assumption 4: elicitation is not guaranteed to recover it")
    metadata |= log_elicited_metric(mlflow, context, result, config, label)
    with warehouse.connect() as con:
        write_elicited_metric(con, metric_row(result, context.run_id))
    return dg.MaterializeResult(metadata=metadata)


# ----------------------------------------------------------------------------------------------- model selection
MODEL_SELECTION_KEY = dg.AssetKey(["marts", "model_selection"])
ESTIMABLE_CHECK = "at_least_one_estimable_candidate"
SEPARATED_CHECK = "winner_beats_runner_up_paired"
SEPARATED_CHECK_DESCRIPTION = (
    "The paired difference cost(runner-up) - cost(winner) on the same held-out rows, clustered by item, has a CI "
    "that excludes 0 (warns when the choice is within sampling noise).")


class ModelSelectionConfig(dg.Config):
    label_source: str = Field(
        "auto", description="Held-out labels: randomized_relevance (SIMULATION truth on randomized requests, which no "
        "fit uses), randomized_clicks (clicks on randomized requests), relevance (truth on production impressions; "
        "in-sample for windows the rankers trained on), or auto (randomized_relevance when the simulator's truth "
        "exists, else randomized_clicks).")
    window_days: int = Field(1, description="Evaluation window: the newest N partitions holding the label source's "
                             "traffic through the asset partition D (which must hold some).")
    randomized_policies: list[str] = Field(["shuffle"], description="Randomized policies whose requests are evaluated.")
    alphas: list[float] = Field(list(DEFAULT_ALPHAS), description="EO relaxation grid applied to every ranker (0 = the ranker itself).")
    selection_rate: float = Field(
        0.4, description="Operating threshold rule: h = 1 for the top `selection_rate` share of held-out examples by "
        "score (ties at the threshold included), the same share for every candidate.")
    min_count: int = Field(20, description="Positives and negatives every group needs for a candidate to be estimable.")
    min_positives: int = Field(30, description="Clicks every group needs in a ranker's window to re-fit its EO transform.")
    confidence: float = Field(0.95, description="Confidence level of the cost intervals.")
    families: list[str] = Field(list(fam.NEW_FAMILIES), description="Candidate families added to the rankers (mi_penalty) "
                                "and their EO transforms (eo_transform): threshold_postprocessor, reject_option, pairwise_fair "
                                "(fair_pipeline.selection.families; fitted on the training window, never on the evaluated day).")
    register_champion: bool = Field(True, description="Register the winner as a fair-ranker version tagged with the "
                                    "partition; @champion moves to it only for the newest partition with data.")


def selection_checks(ranking: pd.DataFrame) -> list[dg.AssetCheckResult]:
    estimable = ranking[ranking["estimable"].astype(bool)]
    checks = [dg.AssetCheckResult(
        check_name=ESTIMABLE_CHECK, asset_key=MODEL_SELECTION_KEY, passed=not estimable.empty,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{len(estimable)} of {len(ranking)} candidates estimable" if not estimable.empty else
        "no estimable candidate: " + "; ".join(ranking["reason"].astype(str).unique()[:5]))]
    metadata = {}
    if len(estimable) >= 2:
        win, runner = estimable.iloc[0], estimable.iloc[1]
        diff, low, high = (float(runner[c]) for c in ("diff_vs_winner", "diff_ci_low", "diff_ci_high"))
        separated = bool(low > 0) if np.isfinite(low) else False
        paired = (f"runner-up {runner['model']} minus winner {win['model']}: cost difference {diff:.4f} "
                  f"[{low:.4f}, {high:.4f}] (paired, clustered by item: {_count(runner['paired_clusters'])} items, "
                  f"{_count(runner['paired_rows'])} rows; p = {float(runner['diff_p']):.3g})")
        description = paired + ("" if separated else (": the interval includes 0, the choice is within sampling noise"
                                                      if np.isfinite(low) else _no_interval(runner)))
        metadata = {"winner": str(win["model"]), "runner_up": str(runner["model"]), "diff_runner_up_minus_winner": diff,
                    "diff_se": float(runner["diff_se"]), "diff_ci_low": low, "diff_ci_high": high,
                    "diff_p": float(runner["diff_p"]), "n_clusters_items": _count(runner["paired_clusters"]),
                    "n_rows": _count(runner["paired_rows"]),
                    "interval": "paired difference vs the winner on the same held-out rows, clustered by item",
                    "winner_cost_marginal_ci": [float(win["ci_low"]), float(win["ci_high"])],
                    "runner_up_cost_marginal_ci": [float(runner["ci_low"]), float(runner["ci_high"])]}
    else:
        separated, description = True, "fewer than two estimable candidates: nothing to separate"
    checks.append(dg.AssetCheckResult(check_name=SEPARATED_CHECK, asset_key=MODEL_SELECTION_KEY, passed=separated,
                                      severity=dg.AssetCheckSeverity.WARN, description=description,
                                      metadata={k: dg.MetadataValue.json(v) if isinstance(v, list) else v
                                                for k, v in metadata.items() if v is not None}))
    return checks


def _no_interval(runner) -> str:
    k = runner.get("diff_disagreeing", np.nan)
    if np.isfinite(k) and k < MIN_DISAGREEING:
        return (f": not estimable ({int(k)} items on which the two decide differently; an interval needs "
                f">= {MIN_DISAGREEING})")
    return ": no paired interval"


def _count(value) -> int | None:
    return int(value) if pd.notna(value) else None


def register_winner(mlflow: MLflowTracking, run, winner: sc.Candidate, items: pd.DataFrame, tags: dict,
                    promote: bool):
    """Log the winner as the fair-ranker pyfunc (its ranker + its re-fitted, alpha-relaxed transform; input: item
    features and group_id) and register it, @champion when `promote`, all or nothing (MLflowTracking.register_model)."""
    example = items[list(winner.ranker.features)].head(5).assign(group_id=items["group"].head(5).astype(str))
    info = log_fair_ranker(winner.transform, winner.ranker.model, winner.ranker.features, registered_model_name=None,
                           input_example=example.reset_index(drop=True))
    alias = CHAMPION if promote else None
    return mlflow.register_model(info.model_uri, FAIR_RANKER, run=run, alias=alias, tags=tags), info.model_uri


def selection_metadata(sel: Selection, config: ModelSelectionConfig) -> dict:
    oracle = oracle_label(bool(sel.info["simulated"]), sel.info["session_id"])
    winner = sel.winner
    return {
        "oracle": oracle, "metric_lam": float(sel.metric.lam), "metric_a": dg.MetadataValue.json(sel.metric.a.round(4).tolist()),
        "label_source": sel.source.name, "simulation_labels": sel.source.simulation,
        "evaluation_window": sel.window.label, "selection_rate": config.selection_rate,
        "candidates": len(sel.ranking), "estimable_candidates": len(sel.estimable),
        "ranking": dg.MetadataValue.md(f"Metric: {oracle}; lam={sel.metric.lam:.3f}\n\n" + ranking_markdown(sel.ranking)
                                       + f"\n\n{INTERVALS_NOTE}"),
        "intervals": INTERVALS_NOTE,
        "exposure": EXPOSURE_NOTE + (f" Not computed: {sel.exposure_note}" if sel.exposure_note else ""),
        "paired_clusters_items": _count(sel.ranking["paired_clusters"].max()) or 0,
        "paired_rows": _count(sel.ranking["paired_rows"].max()) or 0,
        "winner": sel.best or "none (no estimable candidate)",
        "winner_family": fam.winning_family(sel.ranking) or "none",
        "families_cpu_seconds": round(sel.families_cpu, 3),
        "registered_candidate": winner.name if winner else "none (no estimable ranker + EO candidate)",
    }


def log_model_selection(mlflow: MLflowTracking, context, sel: Selection, config: ModelSelectionConfig, day,
                        newest: bool) -> tuple[dict, object]:
    """One MLflow run (stage selection): settings, the metric, the group-wise rates and the winner's cost; the
    winner registered as a `fair-ranker` version tagged with the partition, @champion when `newest`. Returns
    (metadata, the registered version or None)."""
    estimable, winner, champion = sel.estimable, sel.winner, None
    tags = {"fair_pipeline.simulation": str(bool(sel.info["simulated"]) or sel.source.simulation).lower(),
            "fair_pipeline.oracle": sel.info["oracle_kind"]}
    with mlflow.start_run(context, "selection", window=(str(sel.window.first), str(sel.window.last)), tags=tags) as run:
        run.log_params({"label_source": sel.source.name, "window_start": sel.window.first, "window_end": sel.window.last,
                        "families": list(config.families), "alphas": list(config.alphas),
                        "selection_rate": config.selection_rate, "min_count": config.min_count,
                        "confidence": config.confidence, "oracle": sel.info["oracle_kind"]})
        run.log_dict(json.loads(sel.info["metric_json"]) | {"group_labels": list(sel.info["group_labels"]),
                     "oracle": oracle_label(bool(sel.info["simulated"]), sel.info["session_id"])}, "elicited_metric.json")
        run.log_table(sel.rates, "model_selection_rates")
        if not estimable.empty:
            runner_up = estimable.iloc[1] if len(estimable) >= 2 and np.isfinite(estimable.iloc[1]["diff_se"]) else None
            run.log_metrics({"winner_cost": estimable.iloc[0]["cost"], "winner_cost_se": estimable.iloc[0]["cost_se"],
                             "estimable_candidates": len(estimable)}
                            | ({} if runner_up is None else {"runner_up_diff": runner_up["diff_vs_winner"],
                                                             "runner_up_diff_se": runner_up["diff_se"],
                                                             "runner_up_diff_p": runner_up["diff_p"]}))
        metadata = {"mlflow_run_id": run.run_id, "mlflow_run": dg.MetadataValue.url(run.url)}
        if winner is not None and config.register_champion:
            champion, metadata["champion_model_uri"] = register_winner(
                mlflow, run, winner, sel.items, {"candidate": winner.name, "selection_run": run.run_id,
                                                 TAG_MODEL_PARTITION: str(day)}, promote=newest)
    return metadata, champion


def champion_metadata(champion, day, newest: bool) -> dict:
    return {"promoted": bool(champion is not None and newest), "champion_version": (
        "unchanged (nothing registered)" if champion is None else f"{FAIR_RANKER} v{champion.version} @{CHAMPION}"
        if newest else f"{FAIR_RANKER} v{champion.version} registered; @{CHAMPION} unchanged ({day} is not the newest "
        f"partition with data; `fair-pipeline promote --partition {day}` moves it)")}


def stored_ranking(sel: Selection, champion, run_id: str) -> pd.DataFrame:
    """The ranking as `marts.model_ranking` keeps it: the registered version on the winner's row, the registered
    model's name and the elicitation it was ranked by."""
    winner = sel.winner
    return sel.ranking.assign(
        champion_version=np.where(sel.ranking["model"] == (winner.name if winner else None),
                                  str(champion.version) if champion else None, None),
        registered_model=FAIR_RANKER, metric_elicited_at=sel.info["elicited_at"], selected_at=now_utc(),
        dagster_run_id=run_id)


@pipeline_asset(
    key=MODEL_SELECTION_KEY,
    deps=[ELICITED_METRIC_KEY, RANKER_CANDIDATES_KEY, EO_TRANSFORM_KEY, FAIRNESS_AUDIT_KEY],
    partitions_def=daily_partitions,
    group_name=GROUP,
    code_version="4",
    check_specs=[
        dg.AssetCheckSpec(ESTIMABLE_CHECK, asset=MODEL_SELECTION_KEY,
                          description="At least one candidate has enough held-out positives and negatives in every group."),
        dg.AssetCheckSpec(SEPARATED_CHECK, asset=MODEL_SELECTION_KEY, description=SEPARATED_CHECK_DESCRIPTION),
    ],
)
def model_selection(
    context: dg.AssetExecutionContext, config: ModelSelectionConfig, warehouse: DuckDBWarehouse,
    landing: LandingZone, mlflow: MLflowTracking,
) -> dg.MaterializeResult:
    """Model selection by the elicited fair metric, per daily partition D. Candidates: every retrained ranker of
    partition D (marts.ranker_candidates, the penalized lambda grid) x every EO relaxation alpha, the
    weighted-CDF transform re-fitted on that ranker's own scores over its training window
    (fair_pipeline.selection.candidates), and the `families` of fair_pipeline.selection.families fitted on that
    window (Hardt's derived predictor and Kamiran's reject option on the least penalized ranker, Narasimhan's
    pairwise-fair ranker; `family` column). Each is evaluated on held-out labelled rows (default: day D's
    randomized requests, which no fit uses; labels = SIMULATION truth, or clicks on real logs) at its own
    threshold selecting the top `selection_rate` share: group-wise TPR/TNR with n_pos/n_neg, cost under the
    metric with a delta-method SE and CI (the candidate's own figure, marginal); and, for comparing, every
    candidate's paired difference vs the winner on the same rows, clustered by item (diff_vs_winner with SE, CI,
    two-sided p; the check compares the runner-up with this paired interval); not-estimable candidates last with
    the reason. The ranking goes to `marts.model_ranking` (with the elicitation it was ranked by,
    `metric_elicited_at`); the winner is registered as a `fair-ranker` version tagged with its partition, and
    the alias `champion` moves to it only when D is the newest partition with data (a backfill of older days
    never moves it; `fair-pipeline promote --partition D` does, explicitly)."""
    day = partition_day(context)
    with warehouse.connect(read_only=True) as con:
        marts = warehouse.engine_for(con)  # the logs on the engine; metric, rankers, transforms in the DuckDB store
        newest = is_newest_partition(marts, day)
        try:
            sel = compute_model_selection(con, marts, config, landing.resolved_path, day)
        except (LookupError, sc.SelectionInputError, aw.AuditDataError, EOInputError, PositionBiasInputError) as error:
            raise dg.Failure(description=f"model_selection: {error}") from error
    context.log.info(f"{len(sel.candidates)} ranker candidates and the families {config.families} on "
                     f"{sel.source.name} labels, {sel.window.label}")
    if sel.exposure_note:
        context.log.warning(sel.exposure_note)
    metadata = selection_metadata(sel, config)
    if sel.best is not None and (sel.winner is None or sel.winner.name != sel.best):
        context.log.warning(f"the best candidate {sel.best} (family {metadata['winner_family']}) is not a ranking model, "
                            "so " + (f"the best ranker candidate {sel.winner.name} is registered as {FAIR_RANKER}"
                                     if sel.winner else "nothing is registered"))
    try:
        logged, champion = log_model_selection(mlflow, context, sel, config, day, newest)
    except TrackingUnavailableError as error:  # nothing written to the warehouse yet; a retry starts over
        context.log.error(str(error))
        raise dg.RetryRequested(max_retries=2, seconds_to_wait=5) from error
    ranking = stored_ranking(sel, champion, context.run_id)
    with warehouse.connect() as con:
        rows = replace_ranking(con, ranking, day)
    metadata |= logged | champion_metadata(champion, day, newest) | {"dagster/row_count": rows, "table": MODEL_RANKING}
    return dg.MaterializeResult(metadata=metadata, check_results=selection_checks(ranking))


selection_assets = [elicited_metric, model_selection]
