"""Training assets: MI-penalized fits on Adult / COMPAS, and ranker candidates from click logs.

`benchmark_models` reads only the shipped benchmark files (unpartitioned, no upstream assets) and registers
every fit as a version of `fair-benchmark-<dataset>`, moving `champion` by the rule in
`fair_pipeline.training.reference.registry`;
`ranker_candidates` retrains the ranker over a window of observational impressions with inverse-propensity
weights from the chosen position-bias curve. Both log one MLflow run per fit and write their tables in
one transaction each (`fair_pipeline.training.store`).
"""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dataclasses
import json
import time

import dagster as dg
import numpy as np
import pandas as pd
from pydantic import Field

from fair_pipeline.platform.asset_defaults import pipeline_asset
from fair_pipeline.platform.metric_keys import LABEL_TABLE, metric_name
from fair_pipeline.platform.partition_store import replace_partition
from fair_pipeline.platform.partitions import (
    daily_partitions,
    days_before,
    log_missing_days,
    mapped_span,
    min_window_days,
    partition_day,
    window_metadata,
)
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import (
    CHAMPION,
    TAG_HELD_OUT,
    MLflowTracking,
    TrackingUnavailableError,
    benchmark_model_name,
    figure_link_markdown,
)
from fair_pipeline.position_bias import PositionBiasInputError, load_chosen_position_bias
from fair_pipeline.position_bias.assets import POSITION_BIAS_KEY
from fair_pipeline.training import rankers as rt
from fair_pipeline.training.click_training import ClickTrainingError
from fair_pipeline.training.figures import group_paucs, plot_group_comparison, plot_partial_auc_path
from fair_pipeline.training.penalized.objective import SCORES
from fair_pipeline.training.reference import fits as bm
from fair_pipeline.training.reference import registry as br
from fair_pipeline.training.report import cell_text, gap_cell
from fair_pipeline.training.store import BENCHMARK_AUDITS, BENCHMARK_MODELS, RANKER_AUDITS, RANKER_CANDIDATES, replace_tables
from fair_pipeline.training.tracking import audit_labels, audit_metrics, log_fit_model

BENCHMARK_MODELS_KEY = dg.AssetKey(["marts", "benchmark_models"])
RANKER_CANDIDATES_KEY = dg.AssetKey(["marts", "ranker_candidates"])
OBSERVATIONAL_STAGING_KEY = dg.AssetKey(["staging", "stg_observational_impressions"])
RANKER_INPUTS = [
    POSITION_BIAS_KEY,
    dg.AssetDep(OBSERVATIONAL_STAGING_KEY, partition_mapping=days_before()),
    dg.AssetDep(dg.AssetKey(["staging", "stg_randomized_impressions"]), partition_mapping=days_before()),
    dg.AssetKey(["staging", "stg_items"]),
]
DEFAULT_LAMBDAS = list(bm.DEFAULT_LAMBDAS)


def _check_grid(lambdas: list[float], scores: list[str]) -> None:
    """Fails the run before any fit when the λ grid or the penalty scores are not usable."""
    if not lambdas or any(not np.isfinite(x) or x < 0 for x in lambdas) or len(set(lambdas)) != len(lambdas):
        raise dg.Failure(f"lambdas={lambdas} must be a non-empty list of distinct finite values >= 0")
    unknown = [s for s in scores if s not in SCORES]
    if unknown or not scores:
        raise dg.Failure(f"penalty scores {scores} must be a non-empty subset of {list(SCORES)}")


# ----------------------------------------------------------------------------- benchmark_models
class BenchmarkModelsConfig(dg.Config):
    lambdas: list[float] = Field(default_factory=lambda: list(DEFAULT_LAMBDAS),
                                 description="λ grid of the warm-started penalized path (sorted before fitting).")
    penalty_scores: list[str] = Field(default_factory=lambda: ["probability"],
                                      description="Scores entering the MI penalty: 'probability' (paper's result) and/or 'logit'.")
    datasets: list[str] = Field(default_factory=lambda: list(bm.BENCHMARKS), description="Subset of adult, compas.")


def _benchmark_summary(fits: list) -> str:
    rows = [{
        "model": f"{f.model_kind} ({f.penalty_score})" if f.model_kind == "penalized" else "vanilla",
        "λ": f"{f.lam:g}", "held-out AUC (95% CI)": cell_text(f.summary["auc"], f.summary["auc_se"]),
        "AUC drop": f"{f.summary['auc_drop']:.4f}", "Î (train)": f"{f.point.mi_proxy:.2e}",
        "gap @0.1": gap_cell(f.audit, 0.1), "gap @1": gap_cell(f.audit, 1.0),
    } for f in fits]
    fit = fits[0]
    head = (f"n_train={fit.summary['n_train']}, held out: {fit.summary['n_pos_test']} positives, "
            f"{fit.summary['n_neg_test']} negatives; gap = partial AUC/α of "
            f"{bm.BENCHMARKS[fit.dataset].group_a} minus {bm.BENCHMARKS[fit.dataset].group_b}\n\n")
    return head + pd.DataFrame(rows).to_markdown(index=False)


BENCHMARK_CODE_VERSION = "2"


def _log_benchmark_figures(mlflow: MLflowTracking, context, name: str, fits: list, penalty_scores) -> dict:
    """Figures 2b (per penalty score) and, for COMPAS, 2a: drawn once, logged to one MLflow run of the dataset
    (`figures/*.svg`) and linked from the Dagster metadata (`figure_link_markdown`), as the daily runs' are."""
    figures = {}
    for score in penalty_scores:
        path = bm.audits_frame([f for f in fits if f.penalty_score == score])
        figures[f"{name}_figure_2b_{score}"] = (plot_partial_auc_path(
            group_paucs(path), title=f"{name}: partial AUC by group vs λ ({score})"), f"figure 2b {name} {score}")
    if name == "compas":
        vanilla = bm.audits_frame([f for f in fits if f.model_kind == "vanilla"])
        figures["compas_figure_2a"] = (plot_group_comparison(
            group_paucs(vanilla), title="COMPAS, unpenalized: partial AUC by race"), "figure 2a COMPAS")
    with mlflow.start_run(context, "benchmarks", run_name=f"{name} figures", tags={"fair_pipeline.dataset": name}) as run:
        return {key: dg.MetadataValue.md(figure_link_markdown(run.log_figure(figure, key), caption))
                for key, (figure, caption) in figures.items()}


def _log_benchmark_fit(mlflow: MLflowTracking, context, name: str, fit) -> tuple[str, str]:
    """One MLflow run for one benchmark fit: its parameters, held-out metrics, model and audit table."""
    return log_fit_model(
        mlflow, context, stage="benchmarks",
        run_name=f"{name} {fit.model_kind} {fit.penalty_score} lam={fit.lam:g}",
        params={"dataset": name, "model": fit.model_kind, "penalty_score": fit.penalty_score, "lam": fit.lam,
                "solver": "lbfgs" if fit.model_kind == "penalized" else "sklearn-lbfgs",
                "n_features": len(fit.feature_names), "n_train": fit.summary["n_train"]},
        metrics={"auc": fit.summary["auc"], "auc_se": fit.summary["auc_se"], "auc_drop": fit.summary["auc_drop"],
                 "mi_proxy_train": fit.point.mi_proxy, "fit_seconds": fit.point.fit_seconds,
                 "n_iter": fit.point.n_iter, **audit_metrics(fit.audit)},
        model=fit.model,
        tables={"audit": fit.audit},
        tags={"fair_pipeline.dataset": name},
    )


@pipeline_asset(
    key=BENCHMARK_MODELS_KEY,
    group_name="benchmarks",
    code_version=BENCHMARK_CODE_VERSION,
    # Static data: materialized when missing or when its code changes (the automation sensor), by its own job;
    # never by the daily job or a backfill.
    automation_condition=dg.AutomationCondition.on_missing() | dg.AutomationCondition.code_version_changed(),
)
def benchmark_models(context: dg.AssetExecutionContext, config: BenchmarkModelsConfig,
                     warehouse: DuckDBWarehouse, mlflow: MLflowTracking) -> dg.MaterializeResult:
    """Nandy et al. section 4.1 on the shipped Adult (sex) and COMPAS (Black vs White) files: an unpenalized logistic
    regression and a warm-started λ path of the MI-penalized one (L-BFGS), each audited on the held-out split with
    per-group partial AUCs (95% CIs, counts) at cutoffs 0.1, 0.2, 0.5, 1 and the group gap with its p-value.

    Tables `marts.benchmark_models` (one row per fit, with its registered version) and `marts.benchmark_audits` (long
    audit rows); one MLflow run per fit (experiment fair_pipeline/benchmarks) and figures 2a and 2b. Every fit is
    registered as a version of `fair-benchmark-<dataset>` (`candidate` ends on the newest) and `champion` moves by the
    registry's champion rule; registration is all or nothing across datasets. Its own job runs it when missing or
    when its code version changes; a re-run with the same code and config registers nothing (the versions carry a
    fingerprint of both)."""
    _check_grid(config.lambdas, config.penalty_scores)
    unknown = [d for d in config.datasets if d not in bm.BENCHMARKS]
    if unknown or not config.datasets:
        raise dg.Failure(f"datasets {config.datasets} must be a non-empty subset of {list(bm.BENCHMARKS)}")
    fp = br.fingerprint(BENCHMARK_CODE_VERSION, config.datasets, config.lambdas, config.penalty_scores)
    existing = {name: br.registered_fingerprint(mlflow, benchmark_model_name(name), fp) for name in config.datasets}
    if all(existing.values()):
        versions = {name: sorted(int(v.version) for v in found) for name, found in existing.items()}
        context.log.info(f"benchmark models unchanged (fingerprint {fp}): nothing registered")
        return dg.MaterializeResult(metadata={"unchanged": True, "fingerprint": fp,
                                              "registered_versions": dg.MetadataValue.json(versions)})
    all_fits, metadata, run_ids, logged_uris = [], {}, [], []
    for name in config.datasets:
        fits = bm.fit_benchmark(name, config.lambdas, config.penalty_scores)
        for run_id, logged_uri in (_log_benchmark_fit(mlflow, context, name, fit) for fit in fits):
            run_ids.append(run_id)
            logged_uris.append(logged_uri)
        context.log.info(f"{name}: {len(fits)} fits logged")
        metadata[f"{name}_models"] = dg.MetadataValue.md(_benchmark_summary(fits))
        metadata.update(_log_benchmark_figures(mlflow, context, name, fits, config.penalty_scores))
        all_fits.extend(fits)
    models = bm.models_frame(all_fits).assign(mlflow_run_id=run_ids, model_uri=[f"runs:/{r}/model" for r in run_ids])
    counts, seconds = _register_and_store(context, warehouse, br.RegistryBatch(mlflow), all_fits, logged_uris,
                                          models, metadata, fp)
    return dg.MaterializeResult(metadata={
        "dagster/row_count": counts[BENCHMARK_MODELS], "audit_rows": counts[BENCHMARK_AUDITS], "fingerprint": fp,
        "lambdas": dg.MetadataValue.json(sorted(config.lambdas)), "mlflow_run_ids": dg.MetadataValue.json(run_ids),
        "champion_rule": br.CHAMPION_RULE, "registration_seconds": round(seconds, 3), **metadata,
    })


def _register_and_store(context, warehouse: DuckDBWarehouse, batch: "br.RegistryBatch", fits: list,
                        logged_uris: list[str], models: pd.DataFrame, metadata: dict, fp: str) -> tuple[dict, float]:
    """Registers every fit and writes both tables, all or nothing: on any failure the batch's versions are
    removed and the aliases put back; an unavailable tracking server asks Dagster for a retry."""
    started = time.perf_counter()
    try:
        models = _register_benchmarks(context, batch, fits, logged_uris, models, metadata, fp)
        seconds = time.perf_counter() - started
        with warehouse.connect() as con:
            counts = replace_tables(con, {BENCHMARK_MODELS: models, BENCHMARK_AUDITS: bm.audits_frame(fits)})
    except BaseException as error:
        batch.rollback()  # no version of this run stays registered; candidate / champion back where they were
        if isinstance(error, TrackingUnavailableError):  # safe to retry: the registry is as it was
            context.log.error(str(error))
            raise dg.RetryRequested(max_retries=2, seconds_to_wait=5) from error
        raise
    context.log.info(f"registered {len(batch.created)} benchmark model versions in {seconds:.2f}s")
    return counts, seconds


def _rule_table(choice: "br.ChampionChoice", fits: list, versions: list) -> str:
    table = choice.table.assign(
        version=[f"v{v}" for v in versions],
        model=["vanilla" if f.model_kind == "vanilla" else f"penalized ({f.penalty_score})" for f in fits],
        champion=["✔" if j == choice.index else "" for j in range(len(fits))])
    view = table[["version", "model", "lam", "auc", "min_p_value", "min_p_holm", "max_abs_z", "qualifies", "champion"]].rename(
        columns={"lam": "λ", "auc": "held-out AUC", "min_p_value": "smallest gap p", "min_p_holm": "Holm-adjusted",
                 "max_abs_z": "largest |z|"})
    return view.to_markdown(index=False, floatfmt=".4g")


def _register_benchmarks(context, batch: "br.RegistryBatch", fits: list, logged_uris: list[str], models: pd.DataFrame,
                         metadata: dict, fp: str) -> pd.DataFrame:
    """Register every fit under its dataset's model name (alias `candidate` ends on the newest), move `champion`
    by the rule, and return `models` with registered_model, model_version, qualifies and champion columns."""
    versions, qualifies, champion = [None] * len(fits), [False] * len(fits), [False] * len(fits)
    for dataset in dict.fromkeys(f.dataset for f in fits):
        index = [k for k, f in enumerate(fits) if f.dataset == dataset]
        mine = [fits[k] for k in index]
        choice = br.choose_champion([f.audit for f in mine], [f.lam for f in mine], [f.summary["auc"] for f in mine])
        name = benchmark_model_name(dataset)
        for j, (k, fit) in enumerate(zip(index, mine)):
            row = choice.table.iloc[j]
            tags = br.version_tags(dataset, fit.model_kind, fit.penalty_score, fit.lam, fit.summary["auc"],
                                   fit.summary["auc_se"], fit.audit, models.loc[k, "mlflow_run_id"], row, choice,
                                   chosen=choice.index == j) | {br.FINGERPRINT_TAG: fp}
            versions[k] = str(batch.register(logged_uris[k], name, tags).version)
            qualifies[k] = bool(row["qualifies"])
        metadata[f"{dataset}_registered_versions"] = dg.MetadataValue.json([int(versions[i]) for i in index])
        if choice.index is None:
            context.log.warning(f"{name}: {choice.reason}")
            metadata[f"{dataset}_champion"] = dg.MetadataValue.md(
                f"**{name}**: no champion. {choice.reason}\n\n" + _rule_table(choice, mine, [versions[i] for i in index]))
            continue
        k, fit = index[choice.index], mine[choice.index]
        previous = batch.set_champion(name, versions[k])
        champion[k] = True
        label = "vanilla" if fit.model_kind == "vanilla" else f"penalized ({fit.penalty_score}) λ={fit.lam:g}"
        context.log.info(f"{name}@{CHAMPION} -> v{versions[k]} ({label}): {choice.reason}")
        metadata[f"{dataset}_champion"] = dg.MetadataValue.md(
            f"**{name}@{CHAMPION} = v{versions[k]}**: {label}, held-out AUC {cell_text(fit.summary['auc'], fit.summary['auc_se'])}"
            f" (was {'v' + previous if previous else 'unset'}).\n\nWhy: {choice.reason}.\n\nRule: {br.CHAMPION_RULE}.\n\n"
            + _rule_table(choice, mine, [versions[i] for i in index]))
        metadata[f"{dataset}_champion_version"] = int(versions[k])
    return models.assign(registered_model=[benchmark_model_name(f.dataset) for f in fits], model_version=versions,
                         champion_rule_qualifies=qualifies, champion=champion)


# ----------------------------------------------------------------------------- ranker_candidates
class RankerCandidatesConfig(dg.Config):
    lambdas: list[float] = Field(default_factory=lambda: list(DEFAULT_LAMBDAS), description="λ grid (warm-started path).")
    penalty_score: str = Field("probability", description="Score entering the MI penalty: 'probability' or 'logit'.")
    feature_columns: list[str] = Field(default_factory=list,
                                       description="Item feature columns of staging.stg_items; empty: every numeric column.")


def _candidates_summary(frame: pd.DataFrame, candidates: list) -> str:
    rows = []
    for row, candidate in zip(frame.itertuples(), candidates):
        clicks = candidate.audit[candidate.audit["label_source"] == rt.HELDOUT_CLICKS] if not candidate.audit.empty else candidate.audit
        rows.append({
            "λ": f"{row.lam:g}", "Î (train)": f"{row.mi_proxy_train:.2e}",
            "held-out AUC, shuffle clicks (95% CI)": cell_text(row.heldout_auc, row.heldout_auc_se),
            "gap @0.1": gap_cell(clicks, 0.1) if len(clicks) else "not audited",
            "truth AUC (95% CI)": cell_text(row.truth_auc, row.truth_auc_se) if np.isfinite(row.truth_auc) else "no truth",
            "coefficients": ", ".join(f"{k}={v:+.3f}" for k, v in json.loads(row.coefficients).items()),
        })
    return pd.DataFrame(rows).to_markdown(index=False)


def _candidate_audits(candidates: list, ids) -> pd.DataFrame:
    frames = [c.audit.assign(candidate_id=cid, lam=c.point.lam) for c, cid in zip(candidates, ids) if not c.audit.empty]
    if not frames:  # no held-out label source had both classes: an empty table, the reasons are in the candidates
        return pd.DataFrame({"candidate_id": pd.Series(dtype=str), "label_source": pd.Series(dtype=str)})
    return pd.concat(frames, ignore_index=True)


@dataclasses.dataclass
class RankerPath:
    """What `compute_ranker_candidates` fitted for partition D: the window, the IPW curve, the features, the
    training data, the held-out click aggregates, the simulator truth (evaluation only) and the fitted candidates."""

    window: object
    curve: pd.DataFrame
    features: list[str]
    data: object
    clicks: pd.DataFrame
    truth: object
    candidates: list


def ranker_inputs(con, marts, config: RankerCandidatesConfig, landing, day, span) -> RankerPath:
    """What partition `day` trains on, over the partition mapping's `span` of days (read from the warehouse; the
    candidates are fitted afterwards, with the connection closed)."""
    window = rt.partition_window(marts, *span, day, min_window_days())
    curve = load_chosen_position_bias(con, day)
    features = rt.feature_columns(marts, config.feature_columns, day)  # the catalogue as of `day`
    data = rt.training_data(marts, window, curve, features, day)  # the catalogue as of `day`
    clicks = rt.heldout_click_aggregates(marts, window, features, day)
    truth = rt.truth_items(marts, landing, features, day)  # evaluation only
    return RankerPath(window, curve, features, data, clicks, truth, [])


def compute_ranker_candidates(path: RankerPath, config: RankerCandidatesConfig) -> RankerPath:
    """Fit the λ path and audit every candidate on held-out labels; a fit's ValueError (e.g. a (group, label) cell
    too small for the penalty) becomes a RankerTrainingError naming the window."""
    try:
        candidates = rt.fit_candidates(path.data, path.features, config.lambdas, config.penalty_score, path.clicks,
                                       path.truth)
    except ValueError as error:
        raise rt.RankerTrainingError(f"ranker fit over {path.window.label} failed: {error}") from error
    return dataclasses.replace(path, candidates=candidates)


def log_ranker_candidates(mlflow: MLflowTracking, context, path: RankerPath, config: RankerCandidatesConfig):
    """One MLflow run per candidate (its model, params, held-out metrics and audit table) and one for the path with
    the partial-AUC-vs-λ figure; returns (the candidates' rows, their audit rows, metadata)."""
    window, data, curve = path.window, path.data, path.curve
    run_ids = []
    for candidate in path.candidates:
        point = candidate.point
        run_id, _ = log_fit_model(
            mlflow, context, stage="training",
            run_name=f"ranker {window.first}..{window.last} lam={point.lam:g}",
            params={"lam": point.lam, "penalty_score": config.penalty_score, "solver": "lbfgs",
                    "window": f"{window.first}..{window.last}", "features": ",".join(path.features),
                    "position_bias_method": curve.attrs.get("method"), "n_items_train": data.rows.n_items,
                    "impressions_train": data.impressions},
            metrics={"mi_proxy_train": point.mi_proxy, "fit_seconds": point.fit_seconds, "n_iter": point.n_iter,
                     **{metric_name(source, "auc"): s["auc"] for source, s in candidate.heldout.items()},
                     **{metric_name(source, "auc_se"): s["auc_se"] for source, s in candidate.heldout.items()},
                     **(audit_metrics(candidate.audit) if not candidate.audit.empty else {})},
            model=point.model, tables={"audit": candidate.audit, LABEL_TABLE: audit_labels(candidate.audit)},
            tags={"fair_pipeline.window": f"{window.first}..{window.last}", TAG_HELD_OUT: window.held_out_text},
        )
        run_ids.append(run_id)
    frame = rt.candidates_frame(path.candidates, window, path.features, config.penalty_score, data,
                                str(curve.attrs.get("method")), run_ids)
    audits = _candidate_audits(path.candidates, frame["candidate_id"])
    with mlflow.start_run(context, "training", run_name=f"ranker path {window.first}..{window.last}",
                          window=(str(window.first), str(window.last)), tags={TAG_HELD_OUT: window.held_out_text}) as run:
        run.log_params({"lambdas": sorted(config.lambdas), "penalty_score": config.penalty_score,
                        "features": ",".join(path.features)})
        run.log_table(frame, "ranker_candidates")
        source_rows = audits[audits["label_source"] == rt.HELDOUT_CLICKS] if len(audits) else audits
        metadata = {"mlflow_run_ids": dg.MetadataValue.json(run_ids), "mlflow_path_run": dg.MetadataValue.url(run.url),
                    "mlflow_path_run_id": run.run_id}
        if len(source_rows):
            figure = plot_partial_auc_path(group_paucs(source_rows), title="Ranker: held-out partial AUC by group vs λ")
            metadata["partial_auc_vs_lambda"] = dg.MetadataValue.md(figure_link_markdown(
                run.log_figure(figure, "partial_auc_vs_lambda"), "ranker figure 2b"))
    return frame, audits, metadata


def ranker_metadata(path: RankerPath, frame: pd.DataFrame, counts: dict) -> dict:
    window, data, clicks = path.window, path.data, path.clicks
    return {
        "dagster/row_count": counts[RANKER_CANDIDATES],
        "audit_rows": counts[RANKER_AUDITS],
        "window_start": str(window.first),
        "window_end": str(window.last),
        **window_metadata(window),
        "impressions_train": data.impressions,
        "clicks_train": data.clicks,
        "items_train": data.rows.n_items,
        "clipped_items": data.rows.clipped_items,
        "clipped_weight": float(data.rows.clipped_weight),
        "unknown_item_impressions": data.unknown_item_impressions,
        "heldout_shuffle_impressions": int(clicks["n_pos"].sum() + clicks["n_neg"].sum()) if len(clicks) else 0,
        "position_bias_method": str(path.curve.attrs.get("method")),
        "truth_available": path.truth is not None,
        "features": dg.MetadataValue.json(path.features),
        "candidates": dg.MetadataValue.md(_candidates_summary(frame, path.candidates)),
    }


@pipeline_asset(key=RANKER_CANDIDATES_KEY, deps=RANKER_INPUTS, partitions_def=daily_partitions, group_name="training",
                code_version="1")
def ranker_candidates(context: dg.AssetExecutionContext, config: RankerCandidatesConfig,
                      warehouse: DuckDBWarehouse, landing: LandingZone, mlflow: MLflowTracking) -> dg.MaterializeResult:
    """Retrains the ranker (logistic regression on item features, MI-penalized over a λ grid, warm-started L-BFGS)
    for partition D on the observational clicks of the calendar days D-k..D-1 (k = $FAIR_PIPELINE_WINDOW_DAYS,
    the partition mapping's window; days without data are named; day D is left to the fairness audit of partition D), with inverse-propensity weights 1/ŵ_position from the chosen
    position-bias curve; the log is aggregated in SQL to one row per item. Each candidate is audited on held-out
    labels: clicks of the window's shuffle requests (never trained on), and the simulator's true relevance when
    landing/_truth exists (evaluation only). Tables `marts.ranker_candidates` (coefficients JSON, Î, held-out
    AUC and per-group partial AUCs, MLflow run id) and `marts.ranker_candidate_audits` (long audit rows); one
    MLflow run per candidate (experiment fair_pipeline/training) and one per path (the fairness report draws the
    λ frontier from the tables: held-out AUC vs |partial-AUC gap| at 0.1)."""
    _check_grid(config.lambdas, [config.penalty_score])
    day = partition_day(context)
    with warehouse.connect() as con:
        marts = warehouse.engine_for(con)  # staging rows on the engine; the curve from the DuckDB store
        try:
            path = ranker_inputs(con, marts, config, landing.resolved_path, day,
                                 mapped_span(context, OBSERVATIONAL_STAGING_KEY, day))
        except (rt.RankerTrainingError, PositionBiasInputError, ClickTrainingError) as error:
            raise dg.Failure(description=str(error)) from error
    log_missing_days(context, path.window, "ranker training")
    data = path.data
    context.log.info(
        f"ranker training over {path.window.label}: {data.impressions} impressions, {data.clicks} clicks, "
        f"{data.rows.n_items} items, features {path.features}; IPW curve {path.curve.attrs.get('method')}")
    try:
        path = compute_ranker_candidates(path, config)
    except rt.RankerTrainingError as error:
        raise dg.Failure(description=str(error)) from error
    frame, audits, logged = log_ranker_candidates(mlflow, context, path, config)
    with warehouse.connect() as con:
        counts = replace_partition(con, {RANKER_CANDIDATES: frame, RANKER_AUDITS: audits}, day)
    return dg.MaterializeResult(metadata=ranker_metadata(path, frame, counts) | logged)


training_assets = [benchmark_models, ranker_candidates]
