"""The fairness_audit asset: every scored output of the pipeline audited on the same held-out labelled rows.

Daily-partitioned: partition D evaluates day D (the staging views' partition D) with the EO transforms and
ranker candidates of partition D, which were trained on the days before D, so the audit is out of sample by
construction; the (warning) check `audited_outputs_are_held_out` names any audited output fitted on an
evaluated partition (e.g. with a wider `window_days`). The scored outputs
are a registry (`fair_pipeline.audit.outputs.SCORED_OUTPUT_LOADERS`); an output whose stage has not produced
anything yet is listed as unavailable with the reason, never silently skipped.
"""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dataclasses

import dagster as dg
import pandas as pd
from pydantic import Field

from fair_pipeline.audit import DEFAULT_CUTOFFS, AuditInputError
from fair_pipeline.audit import sql as aw
from fair_pipeline.audit.cell_audit import audit_cells
from fair_pipeline.audit.evaluation import OutputAudit, audit_output, evaluation_data
from fair_pipeline.audit.exposure_sql import exposure_tables
from fair_pipeline.audit.outputs import SCORED_OUTPUT_TABLES, ScoredOutput, Unavailable, scored_outputs
from fair_pipeline.audit.report import (
    TRANSFORM_NOTE,
    exposure_markdown,
    groups_markdown,
    pairs_markdown,
    pairwise_markdown,
    transform_markdown,
    warehouse_tables,
    xauc_markdown,
)
from fair_pipeline.audit.stats.clustered import ESTIMANDS
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_COUNT
from fair_pipeline.audit.stats.equivalence import DEFAULT_MARGINS, resolve_margins
from fair_pipeline.audit.store import write_audit
from fair_pipeline.audit.streamed import scratch_dir
from fair_pipeline.audit.tracking import log_audit
from fair_pipeline.platform.asset_defaults import pipeline_asset
from fair_pipeline.platform.partitions import daily_partitions, partition_day
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.settings import group_columns
from fair_pipeline.platform.tracking import MLflowTracking, TrackingUnavailableError, figure_link_markdown
from fair_pipeline.platform.windows import DEFAULT_HOLDOUT_DAYS

FAIRNESS_AUDIT_KEY = dg.AssetKey(["marts", "fairness_audit"])
UPSTREAM = [
    dg.AssetKey(["staging", "stg_observational_impressions"]),
    dg.AssetKey(["staging", "stg_randomized_impressions"]),
    dg.AssetKey(["staging", "stg_items"]),
]
ESTIMABLE_CHECK = "every_group_estimable"
HELD_OUT_CHECK = "audited_outputs_are_held_out"
SIMULATION_BANNER = ("SIMULATION: labels are the simulator's true relevance Y(1) (landing/_truth), available only "
                     "for simulated logs; real logs use label_source='randomized_clicks'.")


class FairnessAuditConfig(dg.Config):
    label_source: str = Field(
        "auto", description="relevance (SIMULATION truth, joined on item_id), randomized_clicks (clicks on randomized "
        "traffic) or auto (relevance when the simulator's truth file exists, else randomized_clicks).")
    window_days: int = Field(DEFAULT_HOLDOUT_DAYS, description="Evaluation window: the newest N partitions holding the "
                             "label source's traffic through the asset partition D (which must hold some); more than 1 "
                             "evaluates days the models of D were trained on (in-sample, flagged by a check).")
    randomized_policies: list[str] = Field(
        ["shuffle"], description="Randomized policies whose clicks are labels (shuffle: position independent of score).")
    cutoffs: list[float] = Field(list(DEFAULT_CUTOFFS), description="FPR cutoffs a of the truncated AUCs I(a).")
    min_count: int = Field(DEFAULT_MIN_COUNT, description="Positives and negatives a group needs to be estimated.")
    confidence: float = Field(0.95, description="Confidence level of every interval.")
    margins: dict[str, float] = Field(
        {}, description="Practical margins δ per metric, overriding the defaults "
        f"{DEFAULT_MARGINS} (keys: {', '.join(DEFAULT_MARGINS)}). A group gap is reported as larger than δ "
        "(significant), significant but within ±δ, equivalent within ±δ (TOST), inconclusive or not estimable.")
    pairwise_max_queries: int = Field(
        2_000, description="Pairwise accuracies use at most this many queries (deterministic sample by md5(query_id)).")
    outputs: list[str] = Field([], description="Scored outputs to audit (empty: every registered one).")
    variance: str = Field(
        "item_clustered", description="Which uncertainty every SE/CI reports. item_clustered (default): the population "
        "estimand, new items drawn like these; items repeat across impressions with one label, so impressions are not "
        "independent. two_way: clustered by item and by query (new items and new queries). conditional: Lemma 3 with "
        "every impression independent, i.e. for these exact items under new traffic (too narrow for the population).")


def resolve_label_source(name: str, landing, day=None) -> str:
    if name == "auto":
        return "relevance" if aw.truth_path(landing, day).exists() else "randomized_clicks"
    return name


def _selected(entries, wanted: list[str]):
    if not wanted:
        return entries
    known = [e.name for e in entries]
    missing = [w for w in wanted if w not in known]
    if missing:
        raise dg.Failure(f"outputs {missing} are not registered scored outputs; registered: {known}")
    return [e for e in entries if e.name in wanted]


def outputs_frame(entries, audits: dict, summary: dict, source: aw.LabelSource, queries_in_window: int,
                  run_id: str) -> pd.DataFrame:
    rows = []
    now = pd.Timestamp.now(tz="UTC").tz_localize(None)
    for e in entries:
        row = {"scored_output": e.name, "simulation_labels": source.simulation, "rows": summary["rows"],
               "labelled_rows": summary["labelled_rows"], "unlabelled_rows": summary["unlabelled_rows"],
               "queries_in_window": queries_in_window, "audited_at": now, "dagster_run_id": run_id}
        if isinstance(e, Unavailable):
            row.update(status="unavailable", reason=e.reason)
        elif e.name in audits:
            a: OutputAudit = audits[e.name]
            g = a.report.groups.drop_duplicates("group")
            row.update(status="audited", description=e.description, basis=e.basis, held_out=a.held_out,
                       trained_from=e.trained_from, trained_through=e.trained_through, n_pos=int(g["n_pos"].sum()),
                       n_neg=int(g["n_neg"].sum()), groups=len(g), pairwise_queries=a.pairwise_queries,
                       reason=in_sample_reason(a), training_window=a.output.training_window)
        rows.append(row)
    return pd.DataFrame(rows)


def in_sample_reason(a: OutputAudit) -> str | None:
    """Why an audit is not held out (None when it is)."""
    if a.held_out:
        return None
    if a.held_out is False:
        return f"in-sample: the evaluation window overlaps the output's training data ({a.output.training_window})"
    return "training window unknown: cannot tell held-out from in-sample"


def held_out_check(audits: dict[str, OutputAudit], window) -> dg.AssetCheckResult:
    """WARN naming each audited output fitted on an evaluated partition (or on an unknown window)."""
    bad = {name: in_sample_reason(a) for name, a in audits.items() if not a.held_out}
    fitted = sorted(name for name, a in audits.items() if a.output.fitted_on_logs)
    return dg.AssetCheckResult(
        check_name=HELD_OUT_CHECK, asset_key=FAIRNESS_AUDIT_KEY, passed=not bad, severity=dg.AssetCheckSeverity.WARN,
        description=(f"evaluated on {window.span}; " + "; ".join(f"{n}: {r}" for n, r in bad.items())) if bad else
        f"every audited output fitted on the logs ({len(fitted)}) was trained before the evaluation window {window.span}",
        metadata={"evaluation_window": window.span, "in_sample": dg.MetadataValue.json(sorted(bad)),
                  "training_windows": dg.MetadataValue.json({n: a.output.training_window for n, a in audits.items()})},
    )


def estimable_check(audits: dict[str, OutputAudit]) -> dg.AssetCheckResult:
    """WARN listing each (output, group, cutoff) that is not estimable, with its counts and the reason."""
    bad = []
    for name, a in audits.items():
        g = a.report.groups
        for row in g[~g["estimable"].astype(bool)].itertuples():
            bad.append(f"{name} group {row.group!r} at FPR {row.cutoff:g}: {row.note}")
    return dg.AssetCheckResult(
        check_name=ESTIMABLE_CHECK, asset_key=FAIRNESS_AUDIT_KEY, passed=not bad, severity=dg.AssetCheckSeverity.WARN,
        description=("; ".join(bad[:20]) + (f"; ... {len(bad) - 20} more" if len(bad) > 20 else "")) if bad
        else f"every group of {len(audits)} audited output(s) is estimable at every cutoff",
        metadata={"not_estimable": len(bad)},
    )


def _outputs_markdown(frame: pd.DataFrame) -> str:
    view = frame.reindex(columns=["scored_output", "status", "held_out", "trained_from", "trained_through", "n_pos",
                                  "n_neg", "groups", "pairwise_queries", "reason"])
    return view.astype(object).where(view.notna(), "").to_markdown(index=False)


@dataclasses.dataclass
class AuditRun:
    """What `compute_fairness_audit` audited for partition D and wrote to the warehouse."""

    window: object
    source: object
    summary: dict
    entries: list
    audits: dict[str, OutputAudit]
    outputs: pd.DataFrame
    exposure: dict[str, pd.DataFrame]  # the logged ranking's exposure parity tables (empty when not computed)
    exposure_note: str  # why exposure parity was not computed, or ""
    written: dict[str, int]


def compute_fairness_audit(con, marts, scratch, config: FairnessAuditConfig, label: str, landing, day, margins,
                           run_id: str, log=None) -> AuditRun:
    """Audit every selected scored output of partition `day` on the held-out labelled rows of its window and write
    the results (one transaction); AuditInputError names bad input, an output that cannot be audited is listed as
    unavailable with the reason."""
    window = aw.partition_evaluation_window(marts, label, config.window_days, day)
    source = aw.label_source(label, landing, window, config.randomized_policies)
    summary = aw.row_summary(marts, source)
    entries = _selected(scored_outputs(con, partition=day), config.outputs)
    available = [e for e in entries if isinstance(e, ScoredOutput)]
    data = evaluation_data(marts, source, sorted({f for e in available for f in e.features}), config.variance,
                           config.pairwise_max_queries, scratch)
    if not summary["labelled_rows"]:  # no rows in score_counts / cluster_counts
        raise AuditInputError(f"{source.name}: no labelled rows in {window.label}")
    audits: dict[str, OutputAudit] = {}
    for entry in available:
        try:
            audits[entry.name] = audit_output(entry, data, window.first, config.cutoffs, min_count=config.min_count,
                                              confidence=config.confidence, margins=margins, con=con)
        except AuditInputError as error:  # e.g. an EO transform that never saw a group: named, not fatal
            if log is not None:
                log.warning(f"{entry.name}: not audited: {error}")
            entries = [Unavailable(entry.name, f"not audited: {error}") if e is entry else e for e in entries]
    if not audits:
        raise AuditInputError("no scored output could be audited: " + "; ".join(
            f"{e.name}: {e.reason}" for e in entries if isinstance(e, Unavailable)))
    outputs = outputs_frame(entries, audits, summary, source, data.queries_in_window, run_id)
    exposure, exposure_note = exposure_tables(con, marts, window, day, [e for e in available if e.name in audits])
    if exposure_note and log is not None:
        log.warning(exposure_note)
    cells = {}
    if group_columns():  # by each protected attribute of the items table and their crossing
        cells, notes = audit_cells(marts, scratch, source, window, [a.output for a in audits.values()],
                                   group_columns(), variance=config.variance, max_queries=config.pairwise_max_queries,
                                   cutoffs=config.cutoffs, min_count=config.min_count, confidence=config.confidence,
                                   margins=margins, con=con)
        for note in notes if log is not None else ():
            log.warning(note)
    tables = {"fairness_audit_outputs": outputs, **warehouse_tables(list(audits.values())), **exposure, **cells}
    written = write_audit(con, source.name, window.first, window.last, tables, partition=day)
    return AuditRun(window, source, summary, entries, audits, outputs, exposure, exposure_note, written)


def build_fairness_audit(defined_keys=()) -> dg.AssetsDefinition:
    """The asset, depending on the staging views and on those scored-output tables (EO transforms, ranker
    candidates) that `defined_keys` (the other assets of the Definitions) produce."""
    defined = {dg.AssetKey(list(k)) if not isinstance(k, dg.AssetKey) else k for k in defined_keys}
    outputs_deps = [dg.AssetKey(list(t)) for t in SCORED_OUTPUT_TABLES if dg.AssetKey(list(t)) in defined]

    @pipeline_asset(
        key=FAIRNESS_AUDIT_KEY,
        deps=[*UPSTREAM, *outputs_deps],
        partitions_def=daily_partitions,
        group_name="audit",
        code_version="1",
        check_specs=[
            dg.AssetCheckSpec(
                ESTIMABLE_CHECK, asset=FAIRNESS_AUDIT_KEY,
                description="Every group of every audited output has enough positives and negatives at every cutoff "
                "(warns; a not-estimable group is reported as such, never as fair)."),
            dg.AssetCheckSpec(
                HELD_OUT_CHECK, asset=FAIRNESS_AUDIT_KEY,
                description="No audited output was fitted on a partition of the evaluation window (warns and names "
                "the in-sample outputs, e.g. after holdout_days=0 or a wider audit window_days)."),
        ],
    )
    def fairness_audit(
        context: dg.AssetExecutionContext, config: FairnessAuditConfig, warehouse: DuckDBWarehouse,
        landing: LandingZone, mlflow: MLflowTracking,
    ) -> dg.MaterializeResult:
        """Fairness audit of every scored output (production scores; EO-transformed scores; retrained ranker
        candidates of partition D, as their stages produce them) on the same labelled rows of day D, which
        the trained stages of partition D never saw. Labels: the simulator's true relevance (SIMULATION
        only) or clicks on randomized traffic. Per output: truncated AUCs I(a) per group at every FPR
        cutoff, group differences with z, p and Holm, and each gap's effect size against a practical margin
        δ (config `margins`; verdict: larger than δ, significant but within ±δ, equivalent by TOST,
        inconclusive), xAUC; SEs are item-clustered by default (config `variance`: the population estimand;
        `conditional` = Lemma 3 / DeLong with impressions independent), within-query pairwise accuracies on
        a bounded query sample; exposure per unit of merit of each group under the logged ranking
        (observational impressions of day D, the chosen position-bias curve, item x request clustered CIs); ROC
        (95% band) and xROC curves. SQL does the row-level work (group x score
        counts). One MLflow run per audit (experiment fair_pipeline/audit) logs its figures and headline
        metrics; the fairness report reads the tables: `marts.fairness_audit_outputs`, `_groups`, `_pairs`,
        `_xauc`, `_xauc_deltas`, `_pairwise`, `_curves`, `_exposure_groups`, `_exposure_pairs`. Groups with too few positives or negatives are
        reported as not estimable, never as fair."""
        day = partition_day(context)
        label = resolve_label_source(config.label_source, landing.resolved_path, day)
        try:
            margins = resolve_margins(config.margins)
        except ValueError as error:
            raise dg.Failure(description=f"fairness_audit config margins: {error}") from error
        with warehouse.connect() as con, scratch_dir(con) as scratch:
            marts = warehouse.engine_for(con)  # held-out rows on the engine; outputs and results in the DuckDB store
            try:
                run = compute_fairness_audit(con, marts, scratch, config, label, landing.resolved_path,
                                             day, margins, context.run_id, context.log)
            except AuditInputError as error:
                raise dg.Failure(description=str(error)) from error
        audits, window = list(run.audits.values()), run.window
        try:  # the warehouse rows are written; logging again is idempotent
            run_id, run_url, figure_urls = log_audit(mlflow, context, audits, audit_params(run, config, margins),
                                                     (str(window.first), str(window.last)),
                                                     f"{run.source.name} labels, {window.label}")
        except TrackingUnavailableError as error:
            context.log.error(str(error))
            raise dg.RetryRequested(max_retries=2, seconds_to_wait=5) from error
        metadata = _metadata(run.source, window, run.summary, run.outputs, run.audits, run.written, figure_urls)
        metadata["exposure_parity"] = dg.MetadataValue.md(exposure_markdown(run.exposure, run.exposure_note))
        metadata.update(mlflow_run_id=run_id, mlflow_run=dg.MetadataValue.url(run_url))
        return dg.MaterializeResult(metadata=metadata,
                                    check_results=[estimable_check(run.audits), held_out_check(run.audits, window)])

    return fairness_audit


def audit_params(run: AuditRun, config: FairnessAuditConfig, margins) -> dict:
    return {"label_source": run.source.name, "window_start": run.window.first, "window_end": run.window.last,
            "cutoffs": list(config.cutoffs), "min_count": config.min_count, "confidence": config.confidence,
            "pairwise_max_queries": config.pairwise_max_queries, "outputs": sorted(run.audits),
            "variance": config.variance, "margins": margins}


def _metadata(source, window, summary, outputs, audits: dict[str, OutputAudit], written, figure_urls: dict) -> dict:
    metadata = {
        "dagster/row_count": written["fairness_audit_groups"],
        "label_source": source.name,
        "labels": SIMULATION_BANNER if source.simulation else
        "clicks on randomized traffic (position independent of the score); a click is a noisy label P = w_position Y",
        "window_start": str(window.first),
        "window_end": str(window.last),
        "evaluation_partitions": dg.MetadataValue.json([str(d) for d in window.dates]),
        "training_windows": dg.MetadataValue.json({n: a.output.training_window for n, a in audits.items()}),
        "rows": summary["rows"],
        "unlabelled_rows": summary["unlabelled_rows"],
        "variance": ESTIMANDS[next(iter(audits.values())).report.groups["variance_estimand"].iloc[0]],
        "clusters": dg.MetadataValue.json({n: _clusters(a) for n, a in audits.items()}),
        "outputs": dg.MetadataValue.md(_outputs_markdown(outputs)),
        "tables": dg.MetadataValue.json({k: v for k, v in written.items()}),
    }
    for name, a in audits.items():
        metadata[f"{name}/groups"] = dg.MetadataValue.md(groups_markdown(a))
        metadata[f"{name}/group_differences"] = dg.MetadataValue.md(pairs_markdown(a))
        metadata[f"{name}/xauc"] = dg.MetadataValue.md(xauc_markdown(a))
        metadata[f"{name}/pairwise"] = dg.MetadataValue.md(pairwise_markdown(a))
        metadata[f"{name}/curves"] = dg.MetadataValue.md(
            figure_link_markdown(figure_urls[name], f"ROC with 95% band and xROC, {name}"))
    note = transform_markdown(list(audits.values()))
    metadata["transform_note"] = dg.MetadataValue.md(
        note or TRANSFORM_NOTE + "\n\n(No EO-transformed output was audited in this run, so the comparison is not shown.)")
    return metadata


def _clusters(a: OutputAudit):
    value = a.report.groups["clusters"].iloc[0]
    return None if pd.isna(value) else int(value)


def build_audit_assets(upstream: list[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    return [build_fairness_audit({key for a in upstream for key in a.keys})]


fairness_audit = build_fairness_audit()  # standalone (tests, notebooks): staging deps only
