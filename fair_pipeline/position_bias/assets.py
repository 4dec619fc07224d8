"""The position_bias asset: every estimator over a training window of the daily marts, one chosen curve.

Daily-partitioned: partition D reads the calendar days D-k+1..D of the marts `position_score_bins` /
`position_swap_cells`, k = $FAIR_PIPELINE_WINDOW_DAYS (7), exactly as its time-window partition mapping declares
in the lineage view; days without data are named, never replaced by older ones. Its curve is the one partition D of the EO transform and the rankers weight clicks with.
"""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dagster as dg
import numpy as np
import pandas as pd
from pydantic import Field

from fair_pipeline.platform.asset_defaults import pipeline_asset
from fair_pipeline.platform.partitions import (
    daily_partitions,
    days_through,
    log_missing_days,
    mapped_span,
    min_window_days,
    partition_day,
    window_metadata,
)
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import MLflowTracking, TrackingUnavailableError, figure_link_markdown
from fair_pipeline.position_bias import PositionBiasInputError, compare_estimates
from fair_pipeline.position_bias.estimators import METHOD_POLICY, METHODS, position_ranges
from fair_pipeline.position_bias.report import (
    curve_markdown,
    curves_plot,
    errors_vs_truth,
    load_truth_curve,
)
from fair_pipeline.position_bias.store import CURVES_TABLE, METHODS_TABLE, methods_frame, write_estimates
from fair_pipeline.position_bias.window import (
    MethodEstimate,
    TrainingWindow,
    estimate_all_methods,
    partition_window,
)

POSITION_BIAS_KEY = dg.AssetKey(["marts", "position_bias_curves"])
MART_KEYS = [dg.AssetKey(["marts", "position_score_bins"]), dg.AssetKey(["marts", "position_swap_cells"])]
CHOSEN_CHECK = "chosen_curve_is_valid"
AGREEMENT_CHECK = "observational_agrees_with_randomized"
OBSERVATIONAL_METHODS = tuple(m for m in METHODS if METHOD_POLICY[m] == "production")


class PositionBiasConfig(dg.Config):
    truncate: int = Field(30, description="T of the chained estimators: w_j = w_T for j > T.")
    bin_width: float = Field(
        0.0, description="Score-bin width of the binned estimators (a multiple of 0.01). 0 = automatic."
    )
    chosen_method: str = Field(
        "adjacent_pairwise", description=f"The estimate later stages read; one of {', '.join(METHODS)}."
    )
    agreement_method: str = Field(
        "adjacent_pairwise",
        description="The observational estimate the agreement check compares with the randomized one.",
    )
    level: float = Field(0.95, description="Confidence level of the intervals and of the agreement test.")


def _validate(config: PositionBiasConfig) -> None:
    if config.chosen_method not in METHODS:
        raise dg.Failure(f"chosen_method={config.chosen_method!r} is not one of {list(METHODS)}")
    if config.agreement_method not in OBSERVATIONAL_METHODS:
        raise dg.Failure(f"agreement_method={config.agreement_method!r} must be an observational method {list(OBSERVATIONAL_METHODS)}")
    if config.bin_width < 0:
        raise dg.Failure(f"bin_width={config.bin_width} must be >= 0 (0 = automatic)")


# ----------------------------------------------------------------------------- checks (pure functions)
def chosen_curve_check(curve: pd.DataFrame, method: str) -> dg.AssetCheckResult:
    """Blocking: ŵ_1 = 1 and every weight finite and > 0 (downstream divides by them)."""
    weights = curve["weight"].to_numpy(dtype=float)
    w1 = float(weights[0]) if len(weights) and int(curve["position"].iloc[0]) == 1 else float("nan")
    bad = curve.loc[~(np.isfinite(weights) & (weights > 0)), "position"].astype(int).tolist()
    problems = []
    if not (np.isfinite(w1) and abs(w1 - 1.0) <= 1e-12):
        problems.append(f"ŵ_1 = {w1} (must be 1)")
    if bad:
        where = ("positions " if len(bad) > 1 else "position ") + position_ranges(bad)
        reasons = "; ".join(curve.attrs.get("warnings", []))
        problems.append(f"weight not finite and positive at {where} (not estimable" + (f": {reasons})" if reasons else ")"))
    return dg.AssetCheckResult(
        check_name=CHOSEN_CHECK,
        asset_key=POSITION_BIAS_KEY,
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{method}: " + ("; ".join(problems) if problems else f"ŵ_1 = 1 and all {len(curve)} weights finite and > 0"),
        metadata={
            "method": method,
            "w_1": w1,
            "positions": len(curve),
            "unusable_positions": dg.MetadataValue.json(bad),
        },
    )


def agreement_check(estimates: dict[str, MethodEstimate], observational: str, level: float, truncate: int) -> dg.AssetCheckResult:
    """Warn (never block) when the observational curve and the randomized one disagree beyond their joint CIs
    (Bonferroni over the compared positions <= T); not evaluated when either cannot be estimated."""
    obs, rand = estimates.get(observational), estimates.get("randomized")
    missing = [e for e in (obs, rand) if e is None or not e.estimable]
    if missing:
        reasons = "; ".join(f"{e.method}: {e.reason}" for e in missing if e is not None)
        return dg.AssetCheckResult(
            check_name=AGREEMENT_CHECK,
            asset_key=POSITION_BIAS_KEY,
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"not evaluated, so the observational estimate is unvalidated: {reasons}",
            metadata={"observational_method": observational, "evaluated": False},
        )
    table, summary = compare_estimates(obs.curve, rand.curve, level=level, max_position=truncate)
    compared = table[table["agrees"].notna()]
    worst = compared.reindex(compared["z"].abs().sort_values(ascending=False).index).head(10)
    verdict = "agree" if summary["agrees"] else "DISAGREE"
    return dg.AssetCheckResult(
        check_name=AGREEMENT_CHECK,
        asset_key=POSITION_BIAS_KEY,
        passed=bool(summary["agrees"]),
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{observational} vs randomized {verdict} over {summary['positions_compared']} positions <= {truncate}: "
            f"{len(summary['disagreeing_positions_bonferroni'])} disagree after Bonferroni, "
            f"{len(summary['disagreeing_positions'])} at level {level:.0%} (~{summary['expected_by_chance']:.1f} by chance)"
        ),
        metadata={
            "observational_method": observational,
            "evaluated": True,
            "positions_compared": summary["positions_compared"],
            "disagreeing_positions": dg.MetadataValue.json(summary["disagreeing_positions"]),
            "disagreeing_positions_bonferroni": dg.MetadataValue.json(summary["disagreeing_positions_bonferroni"]),
            "expected_by_chance": float(summary["expected_by_chance"]),
            "largest_differences": dg.MetadataValue.md(worst.round(4).to_markdown(index=False) if len(worst) else "none"),
        },
    )


# ----------------------------------------------------------------------------- metadata
def _ci_cell(row) -> str:
    if not np.isfinite(row.weight):
        return "n/a"
    return f"{row.weight:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]"


def all_curves_markdown(estimates: dict[str, MethodEstimate]) -> str:
    """One row per position, one column per estimable method: 'ŵ [CI]'."""
    columns = {
        method: pd.Series([_ci_cell(r) for r in e.curve.itertuples()], index=e.curve["position"].to_numpy())
        for method, e in estimates.items()
        if e.estimable
    }
    if not columns:
        return "no method was estimable"
    frame = pd.DataFrame(columns).rename_axis("position").fillna("n/a")
    return frame.reset_index().to_markdown(index=False)


def methods_markdown(window: TrainingWindow, estimates: dict[str, MethodEstimate], chosen: str) -> str:
    frame = methods_frame(window, estimates, chosen)
    view = frame[["method", "policy", "chosen", "estimable", "impressions", "clicks", "bin_width",
                  "not_estimable_positions", "reason", "warnings"]]
    return view.fillna("").to_markdown(index=False)


def _metadata(window: TrainingWindow, estimates: dict[str, MethodEstimate], chosen: str, truth, figure_url: str) -> dict:
    curves = {m: e.curve for m, e in estimates.items() if e.estimable}
    chosen_curve = estimates[chosen].curve
    metadata = {
        "dagster/row_count": sum(len(c) for c in curves.values()),
        "window_start": str(window.first),
        "window_end": str(window.last),
        **window_metadata(window),
        "chosen_method": chosen,
        "chosen_curve": dg.MetadataValue.md(curve_markdown(chosen_curve, truth=truth)),
        "curves_plot": dg.MetadataValue.md(figure_link_markdown(figure_url, "position-bias curves with CI bands")),
        "all_curves": dg.MetadataValue.md(all_curves_markdown(estimates)),
        "methods": dg.MetadataValue.md(methods_markdown(window, estimates, chosen)),
        "not_estimable_methods": dg.MetadataValue.json({m: e.reason for m, e in estimates.items() if not e.estimable}),
        "chosen_impressions": int(chosen_curve["impressions"].sum()),
        "chosen_clicks": int(chosen_curve["clicks"].sum()),
        "truth_available": truth is not None,
        "tables": dg.MetadataValue.json([CURVES_TABLE, METHODS_TABLE]),
    }
    for method, estimate in estimates.items():
        if estimate.estimable:
            metadata[f"impressions/{method}"] = int(estimate.curve["impressions"].sum())
    if truth is not None:
        errors = errors_vs_truth(curves, truth)
        metadata["error_vs_truth"] = dg.MetadataValue.md(
            "Simulator ground truth (reporting only; no estimator reads it). Chained methods are compared at "
            "positions <= T.\n\n" + errors.round(4).to_markdown(index=False)
        )
        for row in errors.itertuples():
            metadata[f"max_abs_error/{row.method}"] = float(row.max_abs_error)
    return metadata


def log_curves(mlflow: MLflowTracking, context, window: TrainingWindow, estimates: dict[str, MethodEstimate],
               config: PositionBiasConfig, truth) -> tuple[str, str, str]:
    """One MLflow run (stage position_bias): parameters, the chosen curve's weights as metrics, the figure. Returns
    the figure's address, the run id and the run's."""
    curves = {m: e.curve for m, e in estimates.items() if e.estimable}
    figure = curves_plot(curves, truth=truth, chosen=config.chosen_method, title=f"Position bias, {window.label}")
    with mlflow.start_run(context, "position_bias", window=(str(window.first), str(window.last))) as run:
        run.log_params({"window_start": window.first, "window_end": window.last, "partitions": len(window.dates),
                        "chosen_method": config.chosen_method, "truncate": config.truncate,
                        "bin_width": config.bin_width or "auto", "level": config.level})
        chosen = estimates[config.chosen_method].curve
        run.log_metrics({f"w_pos{int(r.position)}": r.weight for r in chosen.itertuples() if np.isfinite(r.weight)})
        return run.log_figure(figure, "position_bias_curves"), run.run_id, run.url


# ----------------------------------------------------------------------------- the asset
@pipeline_asset(
    key=POSITION_BIAS_KEY,
    deps=[dg.AssetDep(key, partition_mapping=days_through()) for key in MART_KEYS],
    partitions_def=daily_partitions,
    group_name="position_bias",
    code_version="3",
    check_specs=[
        dg.AssetCheckSpec(
            CHOSEN_CHECK,
            asset=POSITION_BIAS_KEY,
            blocking=True,
            description="ŵ_1 = 1 and every weight of the chosen curve finite and > 0; blocks downstream otherwise.",
        ),
        dg.AssetCheckSpec(
            AGREEMENT_CHECK,
            asset=POSITION_BIAS_KEY,
            description="The observational estimate agrees with the randomized one within their joint CIs (warns).",
        ),
    ],
)
def position_bias(
    context: dg.AssetExecutionContext,
    config: PositionBiasConfig,
    warehouse: DuckDBWarehouse,
    landing: LandingZone,
    mlflow: MLflowTracking,
) -> dg.MaterializeResult:
    """Position-bias curves w_j = P(Y(j)=1 | Y(1)=1) from every estimator (randomized, adjacent_swap,
    adjacent_pairwise, direct_is, naive) with 95% delta-method CIs, over the calendar days of the partition mapping
    (D-k+1..D, k = $FAIR_PIPELINE_WINDOW_DAYS) of the position-bias marts; days without data are named. Tables
    `marts.position_bias_curves` (one row per method x position; `chosen` marks the curve later stages read via `load_chosen_position_bias`) and
    `marts.position_bias_methods` (per method: estimable or why not, sample counts). Methods whose traffic is
    missing are reported as not estimable; the asset fails only when the chosen method cannot be estimated.
    Logged to MLflow (experiment fair_pipeline/position_bias: the figure and the chosen weights)."""
    _validate(config)
    day = partition_day(context)
    with warehouse.connect() as con:
        marts = warehouse.engine_for(con)  # the marts' engine; the curves are written to the DuckDB store
        try:
            window = partition_window(marts, *mapped_span(context, MART_KEYS[0], day), min_window_days())
        except PositionBiasInputError as error:
            raise dg.Failure(description=str(error)) from error  # a clear message in the UI, not a traceback
        context.log.info(f"position bias over {window.label}")
        log_missing_days(context, window, "position bias")
        estimates = estimate_all_methods(
            marts, window, truncate=config.truncate, bin_width=config.bin_width or "auto", level=config.level
        )
        chosen = estimates[config.chosen_method]
        if not chosen.estimable:
            raise dg.Failure(
                description=f"the chosen method {config.chosen_method!r} is not estimable over {window.label}: "
                f"{chosen.reason}",
                metadata={"not_estimable_methods": dg.MetadataValue.json({m: e.reason for m, e in estimates.items() if not e.estimable})},
            )
        for method, estimate in ((m, e) for m, e in estimates.items() if not e.estimable):
            context.log.warning(f"{method}: not estimable: {estimate.reason}")
        rows = write_estimates(con, window, estimates, config.chosen_method, partition=day)
    truth = load_truth_curve(landing.resolved_path, day)  # reporting only
    context.log.info(f"wrote {rows} curve rows to {CURVES_TABLE}")
    try:
        figure_url, run_id, run_url = log_curves(mlflow, context, window, estimates, config, truth)
    except TrackingUnavailableError as error:
        # The warehouse write above replaces the window's rows, so running the asset again is safe.
        context.log.error(str(error))
        raise dg.RetryRequested(max_retries=2, seconds_to_wait=5) from error
    metadata = _metadata(window, estimates, config.chosen_method, truth, figure_url)
    metadata.update({"mlflow_run_id": run_id, "mlflow_run": dg.MetadataValue.url(run_url)})
    return dg.MaterializeResult(
        metadata=metadata,
        check_results=[
            chosen_curve_check(chosen.curve, config.chosen_method),
            agreement_check(estimates, config.agreement_method, config.level, config.truncate),
        ],
    )


position_bias_assets = [position_bias]
