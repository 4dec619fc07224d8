"""EO transform assets (Nandy et al., Theorem 1): fit the per-group weighted-CDF transforms on a training
window of observational partitions, and evaluate them by re-ranking held-out SIMULATED requests.

Both are daily-partitioned. Partition D of the transform is fitted on the calendar days D-k..D-1 of the daily mart
`marts.eo_score_click_counts` (k = $FAIR_PIPELINE_WINDOW_DAYS, read from the time-window partition mapping that
declares it in the lineage; days without data are named, never replaced by older ones), with
the position-bias curve of partition D; day D itself is what the fairness audit of partition D evaluates, so the
audit is out of sample by construction.
"""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dataclasses
import datetime as dt

import dagster as dg
import numpy as np
import pandas as pd
from pydantic import Field

from fair_pipeline.eo import store as eo_store
from fair_pipeline.eo.aggregate import EOInputError, unit_weights
from fair_pipeline.eo.evaluation import DEFAULT_ALPHAS, MAX_DEFAULT_REQUESTS, default_requests, evaluate_rerankings
from fair_pipeline.eo.figures import SIMULATION_LABEL
from fair_pipeline.eo.report import (
    knots_summary,
    load_simulation_truth,
    per_group_markdown,
    positions_markdown,
    summary_markdown,
    transforms_figure,
)
from fair_pipeline.eo.serving import log_fair_ranker, production_ranker
from fair_pipeline.eo.sql import read_weighted_sums
from fair_pipeline.eo.transform import WeightedCDFTransformer, fit_from_weighted_sums
from fair_pipeline.eo.window import eo_partition_window
from fair_pipeline.ingestion.catalogue_dates import delivery_on
from fair_pipeline.platform.asset_defaults import pipeline_asset
from fair_pipeline.ingestion.landing import truth_dir
from fair_pipeline.platform.metric_keys import LABEL_TABLE, group_key, label_table, metric_name
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
from fair_pipeline.platform.sql_models import SQL_PARAMETERS
from fair_pipeline.platform.tracking import (
    CANDIDATE,
    FAIR_RANKER,
    TAG_HELD_OUT,
    TAG_MODEL_PARTITION,
    MLflowTracking,
    figure_link_markdown,
)
from fair_pipeline.platform.windows import PartitionWindow, is_newest_partition
from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.position_bias.assets import POSITION_BIAS_KEY
from fair_pipeline.position_bias.store import load_chosen_position_bias

GROUP = "eo_transform"
EO_TRANSFORM_KEY = dg.AssetKey(["marts", "eo_transforms"])
EO_EVALUATION_KEY = dg.AssetKey(["marts", "eo_evaluation"])
CLICK_COUNTS_KEY = dg.AssetKey(["marts", "eo_score_click_counts"])
VALID_CHECK = "stored_transform_is_monotone_and_exact"
ESTIMABLE_CHECK = "every_group_estimable"
PROBE_POINTS = 2_001


class EOTransformConfig(dg.Config):
    n_knots: int = Field(1001, description="Probabilities at which each group's CDF is stored (every 1/(n-1)).")
    min_positives: int = Field(30, description="A group with fewer clicks than this is reported as not estimable.")
    out_of_range: str = Field("shift", description="Scores outside a group's knots: 'shift' (slope 1) or 'clip'.")
    log_serving_model: bool = Field(True, description="Log and register the fair-ranker pyfunc (simulated data only).")


class EOEvaluationConfig(dg.Config):
    n_requests: int = Field(0, description="Held-out simulated requests to re-rank. 0: the simulation's requests per day, "
                                           f"at most {MAX_DEFAULT_REQUESTS:,}.")
    days_after_window: int = Field(1, description="The held-out day is this many days after the training window.")
    alphas: list[float] = Field(list(DEFAULT_ALPHAS), description="Relaxation grid of the weighted transform (figure 3).")


def too_few_clicks(counts: pd.DataFrame, min_positives: int) -> str | None:
    """Why the window is not estimable (groups with fewer than min_positives clicks, named with counts), or None."""
    by_group = counts.dropna(subset=["group_id"]).groupby("group_id")["clicks"].sum()
    small = by_group[by_group < max(min_positives, 1)]
    if by_group.empty:
        return "no group has any impression in the window"
    if small.empty:
        return None
    detail = ", ".join(f"group {g!r}: {int(n)} clicks" for g, n in small.items())
    return f"not estimable: fewer than min_positives={min_positives} positive responses in {detail}"


def validate_stored(fitted: WeightedCDFTransformer, stored: WeightedCDFTransformer) -> list[str]:
    """Problems with a stored transform: knots not strictly increasing / map decreasing within a group, or the
    JSON round trip changing any fair score on a probe grid spanning every group's knots (and beyond)."""
    problems = []
    for group in fitted.groups_:
        x, y = stored.knots_[group]
        if not (np.all(np.diff(x) > 0) and np.all(np.diff(y) >= 0)):
            problems.append(f"group {group!r}: knots are not monotone")
    lo = min(float(stored.knots_[g][0][0]) for g in stored.groups_)
    hi = max(float(stored.knots_[g][0][-1]) for g in stored.groups_)
    probe = np.linspace(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), PROBE_POINTS)
    for group in fitted.groups_:
        labels = np.full(len(probe), group, dtype=object)
        before, after = fitted.transform(probe, labels), stored.transform(probe, labels)
        if not np.array_equal(before, after):
            problems.append(f"group {group!r}: {int((before != after).sum())} probe scores change after the JSON round trip")
        if np.any(np.diff(after) < 0):
            problems.append(f"group {group!r}: the fair score decreases at {int((np.diff(after) < 0).sum())} probe steps")
    return problems


def _serving_input(landing_path, truth, day: dt.date) -> tuple[list[str], pd.DataFrame]:
    """The fair ranker's input columns and an example: the first items of the catalogue that holds on `day`."""
    items = pd.read_parquet(delivery_on(landing_path, day).files[0])
    features = [f"f{k}" for k in range(truth.config.n_features)]
    return features, items[[*features, "group_id"]].head(5).reset_index(drop=True)


@dataclasses.dataclass
class TransformFit:
    """What `compute_eo_transform` made for partition D: the window, the position-bias curve it weighted by, the
    window's weighted sums per group and score value, both variants (fitted, or None with the reason) and their stored copies read back."""

    day: dt.date
    window: PartitionWindow
    curve: pd.DataFrame
    counts: pd.DataFrame
    params: dict
    reason: str | None
    fitted: dict[str, WeightedCDFTransformer]
    stored: dict


def compute_eo_transform(con, marts, config: EOTransformConfig, day: dt.date, span, run_id: str | None) -> TransformFit:
    """Fit the weighted (1/ŵ) and unweighted transforms of partition `day` on its window (the partition mapping's
    `span` of days), store both (or why they are not estimable) and read them back; EOInputError /
    PositionBiasInputError name bad input."""
    params = dict(n_knots=config.n_knots, min_positives=config.min_positives, out_of_range=config.out_of_range,
                  score_bin_width=float(SQL_PARAMETERS["eo_score_bin_width"]))
    window = eo_partition_window(marts, *span, day, min_window_days())
    curve = load_chosen_position_bias(con, day)
    try:  # bad data (e.g. clicks where the curve has no weight): name the window
        counts = read_weighted_sums(marts, window.first, window.last, curve[["position", "weight"]])
    except EOInputError as error:
        raise EOInputError(f"EO transform over {window.label}: {error}") from error
    reason = too_few_clicks(counts, config.min_positives)
    fits: dict[str, WeightedCDFTransformer | str] = {"weighted": reason, "unweighted": reason}
    if reason is None:
        try:
            fits = {"weighted": fit_from_weighted_sums(counts, **params),
                    "unweighted": fit_from_weighted_sums(unit_weights(counts), **params)}
        except EOInputError as error:
            raise EOInputError(f"EO transform over {window.label}: {error}") from error
    eo_store.write_transforms(con, window.first, window.last, len(window.dates), fits, curve.attrs.get("method"),
                              run_id, partition=day)
    fitted = {v: f for v, f in fits.items() if isinstance(f, WeightedCDFTransformer)}
    return TransformFit(day, window, curve, counts, params, reason, fitted, eo_store.load_latest_transforms(con, day))


def stored_problems(fit: TransformFit) -> list[str]:
    return [f"{v}: {p}" for v in fit.fitted for p in validate_stored(fit.fitted[v], fit.stored[v].transform)]


def eo_transform_metadata(fit: TransformFit) -> dict:
    window, curve = fit.window, fit.curve
    clicks = fit.counts.groupby("group_id", dropna=False)["clicks"].sum()
    metadata = {
        "window_start": str(window.first),
        "window_end": str(window.last),
        **window_metadata(window),
        "position_bias_method": str(curve.attrs.get("method")),
        "position_bias_window": f"{curve.attrs.get('window_start')}..{curve.attrs.get('window_end')}",
        "impressions": int(fit.counts["impressions"].sum()),
        "clicks_by_group": dg.MetadataValue.json({str(g): int(n) for g, n in clicks.items()}),
        "estimable": fit.reason is None,
        "table": eo_store.TRANSFORMS_TABLE,
    }
    if fit.reason is not None:
        return metadata | {"not_estimable": fit.reason}
    weighted = fit.fitted["weighted"]
    return metadata | {
        "dagster/row_count": len(fit.stored),
        "n_positives": dg.MetadataValue.json(weighted.n_positives_),
        "n_effective": dg.MetadataValue.json({g: round(n, 1) for g, n in weighted.n_effective_.items()}),
        "n_reference_scores": weighted.n_reference_,
        "knots_summary": dg.MetadataValue.md(knots_summary(fit.fitted).round(4).to_markdown(index=False)),
    }


def eo_transform_checks(fit: TransformFit, min_positives: int) -> list[dg.AssetCheckResult]:
    if fit.reason is not None:
        return [dg.AssetCheckResult(check_name=VALID_CHECK, passed=True, description="nothing fitted (not estimable)"),
                dg.AssetCheckResult(check_name=ESTIMABLE_CHECK, passed=False, severity=dg.AssetCheckSeverity.WARN,
                                    description=fit.reason)]
    problems, weighted = stored_problems(fit), fit.fitted["weighted"]
    return [
        dg.AssetCheckResult(
            check_name=VALID_CHECK, passed=not problems, severity=dg.AssetCheckSeverity.ERROR,
            description="; ".join(problems) or f"both variants round-trip exactly and are monotone in every group "
            f"({', '.join(weighted.groups_)}; {PROBE_POINTS} probe scores)"),
        dg.AssetCheckResult(check_name=ESTIMABLE_CHECK, passed=True,
                            description=f"clicks per group {weighted.n_positives_} >= {min_positives}"),
    ]


def log_eo_transform(mlflow: MLflowTracking, context, fit: TransformFit, config: EOTransformConfig, landing,
                     newest: bool) -> dict:
    """One MLflow run (stage eo_transform): parameters, group sizes, each variant's JSON, the knots summary and the
    figure; the weighted transform on the simulator's production ranker registered as `fair-ranker` (alias
    `candidate` only for the newest partition). Returns metadata for Dagster."""
    window, curve, weighted = fit.window, fit.curve, fit.fitted["weighted"]
    figure = transforms_figure(fit.fitted, title=f"EO transforms, {window.label}; weights 1/ŵ from {curve.attrs.get('method')}")
    truth, problems = load_simulation_truth(landing, fit.day), stored_problems(fit)
    with mlflow.start_run(context, "eo_transform", window=(str(window.first), str(window.last)),
                          tags={TAG_HELD_OUT: window.held_out_text}) as run:
        run.log_params({"window_start": window.first, "window_end": window.last, "partitions": len(window.dates),
                        "position_bias_method": curve.attrs.get("method"), **fit.params})
        run.log_metrics({metric_name("n_positives", group_key(g)): n for g, n in weighted.n_positives_.items()}
                        | {metric_name("n_effective", group_key(g)): n for g, n in weighted.n_effective_.items()})
        run.log_table(label_table(weighted.n_positives_), LABEL_TABLE)
        for variant, model in fit.fitted.items():
            run.log_dict(model.to_dict(), f"transforms/{variant}.json")
        run.log_table(knots_summary(fit.fitted), "eo_knots_summary")
        metadata = {"transforms_plot": dg.MetadataValue.md(figure_link_markdown(
            run.log_figure(figure, "eo_transforms"), "per-group weighted CDFs and fair-score maps")),
            "mlflow_run_id": run.run_id, "mlflow_run": dg.MetadataValue.url(run.url)}
        if truth is None or not config.log_serving_model or problems:
            return metadata | {"serving_model": "not logged: " + (
                "disabled by config" if not config.log_serving_model else "the stored transform failed validation"
                if problems else "no base ranker for non-simulated logs (the simulator's production ranker needs landing/_truth)")}
        features, example = _serving_input(landing, truth, fit.day)
        info = log_fair_ranker(weighted, production_ranker(truth.config), features, registered_model_name=None,
                               input_example=example)
        alias = CANDIDATE if newest else None  # an older partition (a backfill) registers but never moves the alias
        version = mlflow.register_model(info.model_uri, FAIR_RANKER, run=run, alias=alias,
                                        tags={"window": f"{window.first}..{window.last}", TAG_MODEL_PARTITION: str(fit.day)})
    return metadata | {"serving_model_uri": info.model_uri, "serving_model": (
        f"{FAIR_RANKER} v{version.version} @{CANDIDATE}" if alias else
        f"{FAIR_RANKER} v{version.version} (older partition: alias @{CANDIDATE} not moved)")}


@pipeline_asset(
    key=EO_TRANSFORM_KEY,
    deps=[dg.AssetDep(CLICK_COUNTS_KEY, partition_mapping=days_before()), POSITION_BIAS_KEY],
    partitions_def=daily_partitions,
    group_name=GROUP,
    code_version="1",
    check_specs=[
        dg.AssetCheckSpec(VALID_CHECK, asset=EO_TRANSFORM_KEY, blocking=True,
                          description="The stored JSON reproduces the fitted transform exactly and is monotone in every group."),
        dg.AssetCheckSpec(ESTIMABLE_CHECK, asset=EO_TRANSFORM_KEY,
                          description="Every group has at least min_positives clicks in the training window (warns)."),
    ],
)
def eo_transform(
    context: dg.AssetExecutionContext,
    config: EOTransformConfig,
    warehouse: DuckDBWarehouse,
    landing: LandingZone,
    mlflow: MLflowTracking,
) -> dg.MaterializeResult:
    """Equality-of-opportunity transforms (Nandy et al., Theorem 1): per group, the CDF of the scores of clicked
    impressions weighted by 1 / ŵ_position of the chosen position-bias curve, mapped back to the score scale through
    the pooled score CDF; partition D is fitted on the calendar days D-k..D-1 (k = $FAIR_PIPELINE_WINDOW_DAYS) of
    marts.eo_score_click_counts (day D is left to the fairness audit of partition D). Also the unweighted CDF (Lemma 1) for comparison.
    Table `marts.eo_transforms` keeps each variant's exact JSON; the weighted one plus the simulator's production
    ranker is logged to MLflow as the `fair-ranker` pyfunc (alias `candidate`, moved only for the newest partition).
    A group with too few clicks is reported as not estimable (warning check), never fitted on noise."""
    day = partition_day(context)
    with warehouse.connect() as con:
        marts = warehouse.engine_for(con)  # the marts' engine; curves and transforms are in the DuckDB store
        newest = is_newest_partition(marts, day)
        try:
            fit = compute_eo_transform(con, marts, config, day, mapped_span(context, CLICK_COUNTS_KEY, day), context.run_id)
        except (EOInputError, PositionBiasInputError) as error:
            raise dg.Failure(description=str(error)) from error
    context.log.info(f"EO transform over {fit.window.label}, position bias {fit.curve.attrs.get('method')}")
    log_missing_days(context, fit.window, "EO transform")
    metadata = eo_transform_metadata(fit)
    if fit.reason is not None:
        context.log.warning(fit.reason)
    else:
        metadata |= log_eo_transform(mlflow, context, fit, config, landing.resolved_path, newest)
    return dg.MaterializeResult(metadata=metadata, check_results=eo_transform_checks(fit, config.min_positives))


def _skipped_evaluation(context, warehouse: DuckDBWarehouse, day: dt.date, message: str) -> dg.MaterializeResult:
    """The evaluation ran for `day` and evaluated nothing: the store says why (the report shows it, not "never ran")."""
    context.log.warning(message)
    with warehouse.connect() as con:
        eo_store.skip_evaluation(con, day, message)
    return dg.MaterializeResult(metadata={"status": message, "evaluated": False})


def why_not_evaluated(truth, stored: dict, landing, day) -> str | None:
    """Why partition D cannot be evaluated (no simulator truth, or no estimable transform), or None."""
    if truth is None:
        return (f"skipped: not a simulation: no ground truth for {day} under {truth_dir(landing, day)} "
                "(config.json, items.parquet); re-ranking needs the simulator to draw new clicks")
    not_estimable = {v: s.reason for v, s in stored.items() if not s.estimable}
    if not_estimable:
        return f"skipped: no transform to evaluate ({'; '.join(f'{v}: {r}' for v, r in not_estimable.items())})"
    return None


def compute_eo_evaluation(truth, stored: dict, config: EOEvaluationConfig):
    """Re-rank the held-out simulated requests under every score (the SIMULATION study); returns (report, held-out
    day, requests)."""
    weighted, unweighted = stored["weighted"], stored["unweighted"]
    held_out = weighted.window_end + dt.timedelta(days=config.days_after_window)
    n_requests = config.n_requests or default_requests(truth.config)
    report = evaluate_rerankings(truth.config, truth.items, weighted.transform, unweighted.transform, day=held_out,
                                 n_requests=n_requests, alphas=tuple(config.alphas))
    return report, held_out, n_requests

def _keyed(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, group vs the reference group), keyed by the method (two groups) or `<method>.pair<k>`."""
    pair_index = {pair: k for k, pair in enumerate(dict.fromkeys(summary["groups"]))}
    return summary.assign(key=[m if len(pair_index) == 1 else f"{m}.pair{pair_index[g]}"
                               for m, g in zip(summary["method"], summary["groups"])]).set_index("key")


def _ratios(summary: pd.DataFrame) -> dict:
    """Per ranking method, the exposure-over-merit ratio and its SE (per group pair when there are more than two
    groups)."""
    def ratio(method: str) -> dict:
        rows = summary[summary["method"] == method]
        values = {g: {"ratio": round(float(r), 5), "se": round(float(se), 5)} for g, r, se in
                  zip(rows["groups"], rows["exposure_over_merit_ratio"], rows["exposure_over_merit_ratio_se"])}
        return next(iter(values.values())) if len(values) == 1 else values

    return {m: ratio(m) for m in ("raw", "unweighted", "weighted")}


def eo_evaluation_metadata(report, weighted, held_out: dt.date, n_requests: int, rows: int) -> dict:
    return {
        "label": SIMULATION_LABEL,
        "evaluated": True,
        "dagster/row_count": rows,
        "held_out_day": str(held_out),
        "n_requests": n_requests,
        "training_window": f"{weighted.window_start}..{weighted.window_end}",
        "position_bias_method": str(weighted.position_bias_method),
        "exposure_over_merit_ratio": dg.MetadataValue.json(_ratios(report.summary)),
        "per_group": dg.MetadataValue.md(f"**{SIMULATION_LABEL}**\n\n" + per_group_markdown(report.per_group)),
        "summary": dg.MetadataValue.md(f"**{SIMULATION_LABEL}**\n\n" + summary_markdown(report.summary)),
        "positions_of_relevant_items": dg.MetadataValue.md(positions_markdown(report.positions)),
    }


def log_eo_evaluation(mlflow: MLflowTracking, context, report, weighted, held_out: dt.date, n_requests: int,
                      config: EOEvaluationConfig) -> dict:
    """One MLflow run (stage eo_transform, a SIMULATION): ratios, KS distances and CTRs as metrics, the positions
    table and figures 1 and 3; returns metadata linking them."""
    summary = _keyed(report.summary)
    window = (str(weighted.window_start), str(weighted.window_end))
    with mlflow.start_run(context, "eo_transform", window=window, tags={"fair_pipeline.simulation": "true"}) as run:
        run.log_params({"held_out_day": held_out, "n_requests": n_requests, "alphas": list(config.alphas)})
        run.log_metrics({f"exposure_over_merit_ratio.{k}": float(summary.loc[k, "exposure_over_merit_ratio"])
                         for k in summary.index if summary.loc[k, "method"] in ("raw", "unweighted", "weighted")}
                        | {f"ks_distance.{m.replace('=', '_')}": float(summary.loc[m, "ks_distance"]) for m in summary.index}
                        | {f"ctr.{m.replace('=', '_')}": float(summary.loc[m, "ctr"]) for m in summary.index})
        run.log_table(report.positions, "eo_evaluation_positions")
        urls = {name: run.log_figure(fig, name) for name, fig in report.figures.items()}
    return {"mlflow_run_id": run.run_id, "mlflow_run": dg.MetadataValue.url(run.url),
            "figure_1": dg.MetadataValue.md(figure_link_markdown(
                urls["figure_1"], "figure 1: score and position distributions (simulation)")),
            "figure_3": dg.MetadataValue.md(figure_link_markdown(
                urls["figure_3"], "figure 3: KS distance and CTR over alpha (simulation)"))}


@pipeline_asset(key=EO_EVALUATION_KEY, deps=[EO_TRANSFORM_KEY], partitions_def=daily_partitions, group_name=GROUP,
                code_version="1")
def eo_evaluation(
    context: dg.AssetExecutionContext,
    config: EOEvaluationConfig,
    warehouse: DuckDBWarehouse,
    landing: LandingZone,
    mlflow: MLflowTracking,
) -> dg.MaterializeResult:
    """SIMULATION study of the EO transforms: re-ranks held-out simulated requests (the day after the training
    window) under raw scores, the unweighted and the weighted transform and an alpha grid, draws new clicks from the
    simulator's ground truth (landing/_truth) and reports per group exposure/merit (Corollary 1), positions of
    Y(1)=1 items, the KS distance between groups' clicked-score distributions and CTR, with figures 1 and 3 of Nandy
    et al. Tables `marts.eo_evaluation` and `marts.eo_evaluation_summary`. Skipped, with the reason in metadata and
    the store, when the logs are not simulated or no transform was estimable."""
    day = partition_day(context)
    truth = load_simulation_truth(landing.resolved_path, day)
    with warehouse.connect(read_only=True) as con:
        try:
            stored = eo_store.load_latest_transforms(con, day) if truth is not None else {}
        except EOInputError as error:
            raise dg.Failure(description=str(error)) from error
    reason = why_not_evaluated(truth, stored, landing.resolved_path, day)
    if reason is not None:
        return _skipped_evaluation(context, warehouse, day, reason)
    report, held_out, n_requests = compute_eo_evaluation(truth, stored, config)
    context.log.info(f"{SIMULATION_LABEL}: {n_requests} held-out requests on {held_out}")
    weighted = stored["weighted"]
    with warehouse.connect() as con:
        rows = eo_store.write_evaluation(con, report.per_group, report.summary, weighted.window_start,
                                         weighted.window_end, held_out, context.run_id, partition=day)
    metadata = eo_evaluation_metadata(report, weighted, held_out, n_requests, rows)
    metadata |= log_eo_evaluation(mlflow, context, report, weighted, held_out, n_requests, config)
    return dg.MaterializeResult(metadata=metadata)


eo_assets = [eo_transform, eo_evaluation]
