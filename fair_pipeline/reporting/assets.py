"""The fairness report asset: one offline HTML + Markdown report per daily partition under
$FAIR_PIPELINE_HOME/reports/<date>/ (`reports/latest` points at the newest), logged to MLflow."""
# No `from __future__ import annotations`: Dagster reads resource types from real annotations.
import datetime as dt
from collections.abc import Iterable

import dagster as dg

from fair_pipeline import charts
from fair_pipeline.platform import settings
from fair_pipeline.platform.asset_defaults import pipeline_asset
from fair_pipeline.platform.partitions import daily_partitions, partition_day
from fair_pipeline.platform.resources import DuckDBWarehouse
from fair_pipeline.platform.tracking import (FAIR_RANKER, TAG_MODEL_PARTITION, MLflowTracking, TrackingUnavailableError,
                                             figure_link_markdown, store_errors)
from fair_pipeline.reporting import Report, ReportFiles, ReportInputs, build_report, summary_lines, write_report
from fair_pipeline.reporting.build import metrics_table
from fair_pipeline.reporting.latest import partition_report_dir, point_latest_at
from fair_pipeline.reporting.model import Serving

REPORT_KEY = dg.AssetKey(["reporting", "fairness_report"])
# Figures linked from the Dagster metadata (loaded from the MLflow UI; the rest are in the HTML report and MLflow).
KEY_FIGURES = ("position_bias", "ctr_by_position", "lambda_frontier")


def leaf_keys(assets: Iterable[dg.AssetsDefinition]) -> list[dg.AssetKey]:
    """Keys no other asset depends on: depending on these puts the report after everything, with a
    lineage graph that shows one edge per branch instead of one per asset. Unpartitioned leaves (the static
    benchmarks, which have their own job) are not inputs of a daily report."""
    assets = [a for a in assets if a.partitions_def is not None]
    keys = {key for asset in assets for key in asset.keys}
    upstream = {dep for asset in assets for dep in asset.dependency_keys}
    return sorted(keys - upstream - {REPORT_KEY}, key=lambda k: k.to_user_string())


def serving_champion(mlflow: MLflowTracking) -> Serving | None:
    """`fair-ranker@champion` as the registry holds it now (the authority: `promote` moves it after the selection
    that set it); None when the store cannot be read (locked, unreachable, refusing), and the report then says what
    the selection recorded. Any other error is a bug and fails the report."""
    try:
        version = mlflow.champion(FAIR_RANKER)
    except store_errors():
        return None
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if version is None:
        return Serving(FAIR_RANKER, None, read_at=now)
    return Serving(FAIR_RANKER, str(version.version), version.tags.get(TAG_MODEL_PARTITION, "?"),
                   version.tags.get("candidate", "?"), now)


def compute_report(warehouse: DuckDBWarehouse, day, serving: Serving | None = None) -> tuple[Report, ReportFiles]:
    """Build partition `day`'s report from the warehouse and write it under reports/<day>/."""
    marts = None if warehouse.resolved_engine == "duckdb" else warehouse.engine_for(None)
    inputs = ReportInputs(home=settings.home(), warehouse_path=warehouse.resolved_path, partition=day, marts=marts,
                          serving=serving)
    try:
        report = build_report(inputs)
    finally:
        inputs.close()
    return report, write_report(report, partition_report_dir(settings.reports_dir(), day))


def log_report(mlflow: MLflowTracking, context, report: Report, files: ReportFiles):
    """One MLflow run (stage reporting) with the report's files and key figures, for people; returns the run."""
    with mlflow.start_run(context, "reporting", run_name="fairness_report") as run:
        for path in (files.html, files.markdown, files.findings):
            run.log_artifact(path, "report")
        for path in files.figures:
            run.log_artifact(path, "report/figures")
        run.log_metrics(report.metrics())
        run.set_tags({"sections_available": len(report.available), "sections_missing": len(report.missing)})
    return run


def report_metadata(report: Report, files: ReportFiles, latest, run) -> dict:
    figures = {figure.name: figure for figure in report.figures()}
    metadata = {
        "report_html": dg.MetadataValue.path(str(files.html)),
        "latest": f"reports/latest -> {latest}",
        "summary_markdown": dg.MetadataValue.path(str(files.markdown)),
        "mlflow_run_id": run.run_id,
        "mlflow_run": dg.MetadataValue.url(run.url),
        "sections_available": len(report.available),
        "sections_missing": dg.MetadataValue.json([s.spec.title for s in report.missing]),
        "summary": dg.MetadataValue.md("\n".join(summary_lines(report))),
        "verdict_counts": dg.MetadataValue.json(report.verdict_counts()),
        "key_figures": dg.MetadataValue.md(metrics_table(report)),
    }
    for name in KEY_FIGURES:
        if name in figures:
            metadata[f"figure_{name}"] = dg.MetadataValue.md(figure_link_markdown(
                run.artifact_url(f"report/figures/{name}{charts.SUFFIX}"), figures[name].caption))
    return metadata


def build_fairness_report_asset(upstream: Iterable[dg.AssetsDefinition]) -> dg.AssetsDefinition:
    """The report runs after every other asset, so it is rebuilt from the latest materializations."""

    # reads the warehouse (pool duckdb: DuckDB cannot open it read-only while another process writes)
    @pipeline_asset(key=REPORT_KEY, deps=leaf_keys(upstream), partitions_def=daily_partitions, group_name="reporting",
                    kinds={"python", "mlflow", "html"}, code_version="2")
    def fairness_report(context: dg.AssetExecutionContext, warehouse: DuckDBWarehouse, mlflow: MLflowTracking) -> dg.MaterializeResult:
        """Fairness report of partition D, built from every stage's stored results for D (the warehouse only): data
        volume and quarantine, CTR by position, position bias, per-group CDF transforms, exposure/merit, ROC/partial
        AUC, xAUC, pairwise accuracies, the λ frontier and model selection, with a plain-language summary that leads
        with the group gaps larger than their practical margin δ and counts every comparison's verdict, and the
        audit's trend over the newest partitions (each gap per day with its CI). Written to
        $FAIR_PIPELINE_HOME/reports/<D>/ (self-contained HTML + Markdown; `reports/latest` points at the newest
        partition's) and logged to MLflow (experiment fair_pipeline/reporting). Stages without results for D are
        listed as missing, with the reason."""
        day = partition_day(context)
        report, files = compute_report(warehouse, day, serving_champion(mlflow))
        latest = point_latest_at(settings.reports_dir(), day)
        try:
            run = log_report(mlflow, context, report, files)
        except TrackingUnavailableError as error:
            # Building the report is idempotent, so a locked or unreachable store is worth another try.
            context.log.error(str(error))
            raise dg.RetryRequested(max_retries=2, seconds_to_wait=5) from error
        # One line, not one per finding: `fair-pipeline run --verbose` prints Dagster's log and then every finding,
        # which printed each finding twice; the findings are in the report, findings.json and the summary metadata.
        context.log.info(f"{len(report.findings())} findings in {len(report.available)} sections: {files.findings}")
        return dg.MaterializeResult(metadata=report_metadata(report, files, latest, run))

    return fairness_report
