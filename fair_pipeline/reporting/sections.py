"""The report's sections. Each reads one stage's output and turns it into tables, figures and findings.

Sections for stages that write DuckDB marts query the warehouse; later stages log their tables to
MLflow with `TrackedRun.log_table(frame, name)` and the section reads the newest finished run's copy.
The table contracts (name: required columns; optional columns in brackets) are:

    position_bias_curve: position, estimate, ci_low, ci_high [method, n_impressions]
    eo_transform_cdf:    group, score, cdf [cdf_ci_low, cdf_ci_high]
    exposure_merit:      ranking ("before"/"after"), group, exposure, exposure_ci_low, exposure_ci_high,
                         merit, merit_ci_low, merit_ci_high, n [p_value]
    roc_curves:          model, group, fpr, tpr, tpr_ci_low, tpr_ci_high
    partial_auc:         model, group, estimate, ci_low, ci_high, n_pos, n_neg, p_value [fpr_low, fpr_high,
                         training_window]
    xauc:                model, direction, estimate, ci_low, ci_high, n_pos, n_neg, p_value
    xroc_curves:         model, direction, fpr, tpr                      (optional companion of xauc)
    pairwise_accuracy:   model, group_a, group_b, estimate, ci_low, ci_high, n_pairs [p_value]
    lambda_frontier:     lambda, utility, utility_ci_low, utility_ci_high, unfairness, unfairness_ci_low,
                         unfairness_ci_high
    model_ranking:       rank, model [cost, ci_low, ci_high: shown as cost with CI; tpr[g], tnr[g], error_part,
                         violation_part, min_group_count, champion_version, reason; other columns without cost]
    elicited_metric:     oracle, parameter, elicited [truth, n_queries]   (optional companion of model_ranking)

A not-estimable figure is NaN (never 0); p_value is NaN where no test applies (e.g. the reference
group). A stage owner who needs a different presentation replaces the builder: `SECTIONS` is a list of
`SectionSpec(key, title, stage, build)` with `build(inputs: ReportInputs) -> SectionContent`.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from fair_pipeline.core.proportions import two_proportion_test, wilson_interval
from fair_pipeline.reporting import figures
from fair_pipeline.reporting.model import (
    ALPHA,
    Figure,
    Finding,
    ReportInputs,
    SectionContent,
    SectionSpec,
    StageMissing,
    Table,
    Text,
)


def with_ci(frame: pd.DataFrame, value: str, low: str, high: str, digits: int = 3) -> pd.Series:
    """'0.812 [0.790, 0.833]', or 'not estimable' where the estimate is NaN."""

    def cell(row: pd.Series) -> str:
        if pd.isna(row[value]):
            return "not estimable"
        if pd.isna(row[low]) or pd.isna(row[high]):
            return f"{row[value]:.{digits}f} [CI n/a]"
        return f"{row[value]:.{digits}f} [{row[low]:.{digits}f}, {row[high]:.{digits}f}]"

    return frame.apply(cell, axis=1) if len(frame) else pd.Series([], dtype=str)


def p_text(p: float) -> str:
    return "n/a" if pd.isna(p) else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def p_phrase(p: float) -> str:
    """'p < 0.001' or 'p = 0.012'."""
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _counts(row: pd.Series) -> str:
    return ", ".join(f"{c} = {int(row[c]):,}" for c in ("n", "n_pos", "n_neg", "n_pairs") if c in row and pd.notna(row[c]))


def significance_findings(
    frame: pd.DataFrame, subject: Callable[[pd.Series], str], comparison: str, value: str = "estimate", alpha: float = ALPHA
) -> list[Finding]:
    """One neutral statement per tested row, e.g. 'model m1: partial AUC of group 1 = 0.062 [0.055, 0.069]
    vs the reference group (p = 0.002; n_pos = 380, n_neg = 620)', classed significant at `alpha`, not
    significant, or not estimable (NaN estimate). Rows without a p-value (e.g. the reference) are skipped."""
    findings = []
    low, high = ("ci_low", "ci_high") if value == "estimate" else (f"{value}_ci_low", f"{value}_ci_high")
    for _, row in frame.iterrows():
        counts = _counts(row)
        if pd.isna(row[value]):
            findings.append(Finding(f"{subject(row)}: not estimable ({counts or 'too few observations'})", "not estimable"))
            continue
        if pd.isna(row.get("p_value", float("nan"))):
            continue
        estimate = with_ci(pd.DataFrame([row]), value, low, high).iloc[0] if {low, high} <= set(row.index) else f"{row[value]:.3f}"
        status = "significant" if row["p_value"] < alpha else "not significant"
        detail = p_phrase(row["p_value"]) + (f"; {counts}" if counts else "")
        findings.append(Finding(f"{subject(row)} = {estimate} {comparison} ({detail})", status))
    return findings


# ---------------------------------------------------------------- stages with DuckDB marts (built today)
def data_volume(inputs: ReportInputs) -> SectionContent:
    volume = inputs.sql(
        "SELECT CAST(partition_date AS VARCHAR) AS partition, source, accepted_rows, clicks, rejected_rows "
        "FROM marts.daily_volume ORDER BY partition_date, source",
        [("marts", "daily_volume")],
    )
    if volume.empty:
        raise StageMissing("marts.daily_volume is empty: no partition has been ingested")
    reasons = inputs.sql(
        "SELECT source, reason, CAST(sum(rejected_rows) AS BIGINT) AS rejected_rows, count(DISTINCT partition_date) AS partitions "
        "FROM staging.stg_quarantine GROUP BY ALL ORDER BY rejected_rows DESC",
        [("staging", "stg_quarantine")],
    )
    per_day = volume.pivot_table(index="partition", columns="source", values=["accepted_rows", "rejected_rows"], aggfunc="sum")
    per_day.columns = [f"{source} {what.replace('_rows', '')}" for what, source in per_day.columns]
    per_day = per_day.reset_index()
    accepted, rejected = int(volume["accepted_rows"].sum()), int(volume["rejected_rows"].sum())
    share = rejected / (accepted + rejected) if accepted + rejected else float("nan")
    findings = [
        Finding(
            f"{accepted:,} impressions accepted over {volume['partition'].nunique()} partition(s); "
            f"{rejected:,} rows ({share:.3%}) quarantined",
            "info",
        )
    ]
    if len(reasons):
        top = reasons.iloc[0]
        findings.append(Finding(f"most quarantined rows: {top['reason']} ({int(top['rejected_rows']):,} rows, {top['source']})", "info"))
    blocks = [
        Table(per_day, "Accepted and quarantined rows per partition and source"),
        Figure(
            "data_volume",
            figures.stacked_bars(per_day, "partition", [c for c in per_day.columns if c != "partition"], "rows"),
            "Rows per partition (accepted and quarantined, by source)",
        ),
    ]
    blocks.append(Table(reasons, "Quarantine reasons (all partitions)") if len(reasons) else Text("No row has been quarantined."))
    return SectionContent(
        blocks=blocks,
        findings=findings,
        metrics={"accepted_rows": accepted, "rejected_rows": rejected, "rejected_share": share},
        source="marts.daily_volume, staging.stg_quarantine",
    )


def ctr_by_position(inputs: ReportInputs) -> SectionContent:
    frame = inputs.sql(
        "SELECT policy, position, CAST(sum(impressions) AS BIGINT) AS impressions, CAST(sum(clicks) AS BIGINT) AS clicks "
        "FROM marts.daily_ctr_by_position GROUP BY ALL ORDER BY policy, position",
        [("marts", "daily_ctr_by_position")],
    )
    if frame.empty:
        raise StageMissing("marts.daily_ctr_by_position is empty")
    frame["ctr"] = frame["clicks"] / frame["impressions"]
    frame["ci_low"], frame["ci_high"] = wilson_interval(frame["clicks"], frame["impressions"])
    frame["cell"] = with_ci(frame, "ctr", "ci_low", "ci_high", 4) + frame["impressions"].map(" (n = {:,})".format)
    table = frame.pivot(index="position", columns="policy", values="cell").fillna("no impressions").reset_index()
    table.columns.name = None
    findings = []
    shuffle = frame[frame["policy"] == "shuffle"].sort_values("position")
    if len(shuffle) >= 2:
        top, bottom = shuffle.iloc[0], shuffle.iloc[-1]
        diff, p = two_proportion_test(top["clicks"], top["impressions"], bottom["clicks"], bottom["impressions"])
        label = (
            f"under shuffled (randomized) traffic, CTR at position {int(top['position'])} minus position "
            f"{int(bottom['position'])} = {diff:+.4f} (n = {int(top['impressions']):,} / {int(bottom['impressions']):,})"
        )
        if np.isnan(p):
            findings.append(Finding(f"{label}: not estimable", "not estimable"))
        else:
            status = "significant" if p < ALPHA else "not significant"
            findings.append(Finding(f"{label}; position effect {p_phrase(p)}", status))
    return SectionContent(
        blocks=[
            Text("Click-through rate by displayed position with Wilson 95% intervals. Under `shuffle` traffic the "
                 "position is randomized, so the CTR curve's shape reflects position bias alone."),
            Figure("ctr_by_position", figures.points_with_errors(frame, "position", "ctr", "ci_low", "ci_high", "policy",
                                                                  "position", "CTR"), "CTR by position and policy (95% CI)"),
            Table(table, "CTR [95% CI] (impressions) by position and policy, all partitions"),
        ],
        findings=findings,
        metrics={f"ctr_{r.policy}_pos{int(r.position)}": float(r.ctr) for r in frame.itertuples() if r.position == 1},
        source="marts.daily_ctr_by_position",
    )


# ---------------------------------------------------------------- stages logging to MLflow (hooks)
def position_bias(inputs: ReportInputs) -> SectionContent:
    curve = inputs.stage_table("position_bias_curve", "position_bias", ["position", "estimate", "ci_low", "ci_high"])
    truth = inputs.truth("bias_curve")
    by = "method" if "method" in curve.columns else None
    reference = truth.rename(columns={"weight": "estimate"}) if truth is not None else None
    table = curve.copy()
    table["w [95% CI]"] = with_ci(curve, "estimate", "ci_low", "ci_high")
    findings = []
    if truth is not None:
        merged = curve.merge(truth, on="position")
        covered = ((merged["ci_low"] <= merged["weight"]) & (merged["weight"] <= merged["ci_high"])).sum()
        table = table.merge(truth.rename(columns={"weight": "true w"}).round(3), on="position", how="left")
        findings.append(Finding(f"simulated truth lies inside the 95% CI at {covered} of {len(merged)} (method, position) pairs", "info"))
    lowest = curve.sort_values("position").groupby(by or (lambda _: "estimate")).tail(1)
    for _, row in lowest.iterrows():
        if pd.isna(row["estimate"]):
            findings.append(Finding(f"bias at position {int(row['position'])}: not estimable", "not estimable"))
        else:
            status = "significant" if row["ci_high"] < 1 else "not significant"
            findings.append(Finding(
                f"examination weight at position {int(row['position'])} is {row['estimate']:.3f} "
                f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}] relative to the top slot", status))
    return SectionContent(
        blocks=[
            Figure("position_bias", figures.curves_with_bands(curve, "position", "estimate", "ci_low", "ci_high", by,
                                                              "position", "examination weight w", reference),
                   "Estimated position-bias curve with 95% CI" + (" and the simulator's truth (dashed)" if truth is not None else "")),
            Table(table.drop(columns=["estimate", "ci_low", "ci_high"]), "Position-bias estimates"),
        ],
        findings=findings,
        metrics={f"w_pos{int(r.position)}": float(r.estimate) for r in curve.itertuples() if not pd.isna(r.estimate)}
        if by is None else {},
        source=inputs.sources.get("position_bias_curve", ""),
    )


def eo_transform(inputs: ReportInputs) -> SectionContent:
    cdf = inputs.stage_table("eo_transform_cdf", "eo_transform", ["group", "score", "cdf"])
    has_ci = {"cdf_ci_low", "cdf_ci_high"} <= set(cdf.columns)
    return SectionContent(
        blocks=[
            Text("Per-group weighted CDFs of the production score among relevant items: the EO transform maps each "
                 "group's score through its own CDF so that equally relevant items get equal transformed scores."),
            Figure("eo_cdf", figures.curves_with_bands(cdf, "score", "cdf", "cdf_ci_low" if has_ci else None,
                                                       "cdf_ci_high" if has_ci else None, "group", "score", "weighted CDF", step=True),
                   "Per-group CDF transforms"),
        ],
        source=inputs.sources.get("eo_transform_cdf", ""),
    )


def exposure_merit(inputs: ReportInputs) -> SectionContent:
    required = ["ranking", "group", "exposure", "exposure_ci_low", "exposure_ci_high", "merit", "merit_ci_low", "merit_ci_high", "n"]
    frame = inputs.stage_table("exposure_merit", "eo_transform", required)
    table = frame[["ranking", "group", "n"]].copy()
    table["exposure [95% CI]"] = with_ci(frame, "exposure", "exposure_ci_low", "exposure_ci_high")
    table["merit [95% CI]"] = with_ci(frame, "merit", "merit_ci_low", "merit_ci_high")
    findings = []
    if "p_value" in frame.columns:
        table["p-value"] = frame["p_value"].map(p_text)
        findings = significance_findings(
            frame, lambda r: f"{r['ranking']} ranking: exposure of group {r['group']}", "vs its merit share", value="exposure"
        )
    order = list(dict.fromkeys(["before", "after", *frame["ranking"]]))
    plot = frame.assign(x=frame["ranking"].map({name: i for i, name in enumerate(order)}))
    return SectionContent(
        blocks=[
            Figure("exposure_merit", figures.points_with_errors(plot, "x", "exposure", "exposure_ci_low", "exposure_ci_high",
                                                                "group", "ranking", "exposure",
                                                                xticks=[n for n in order if n in set(frame["ranking"])]),
                   "Exposure per group before and after the transform (95% CI)"),
            Table(table, "Exposure and merit by group"),
        ],
        findings=findings,
        source=inputs.sources.get("exposure_merit", ""),
    )


def roc_audit(inputs: ReportInputs) -> SectionContent:
    pauc = inputs.stage_table("partial_auc", "audit",
                              ["model", "group", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"])
    blocks = []
    try:
        curves = inputs.stage_table("roc_curves", "audit", ["model", "group", "fpr", "tpr", "tpr_ci_low", "tpr_ci_high"])
        for model, part in curves.groupby("model"):
            blocks.append(Figure(f"roc_{model}", figures.curves_with_bands(part, "fpr", "tpr", "tpr_ci_low", "tpr_ci_high", "group",
                                                                           "false positive rate", "true positive rate", diagonal=True),
                                 f"ROC per group with 95% bands, model {model}"))
    except StageMissing as missing:
        blocks.append(Text(f"ROC curves missing: {missing}"))
    table = pauc[["model", "group", "n_pos", "n_neg"]].copy()
    if "training_window" in pauc.columns:  # the evaluation window is in the source line (the audit run's name)
        table["trained on"] = pauc["training_window"]
    if {"fpr_low", "fpr_high"} <= set(pauc.columns):
        table["FPR range"] = pauc["fpr_low"].map("{:g}".format) + "–" + pauc["fpr_high"].map("{:g}".format)
    table["partial AUC [95% CI]"] = with_ci(pauc, "estimate", "ci_low", "ci_high")
    table["p-value"] = pauc["p_value"].map(p_text)
    blocks.append(Table(table, "Partial AUC by group (p-value: difference from the reference group)"))
    return SectionContent(
        blocks=blocks,
        findings=significance_findings(pauc, lambda r: f"model {r['model']}: partial AUC of group {r['group']}",
                                       "vs the reference group"),
        source=inputs.sources.get("partial_auc", ""),
    )


def xauc_audit(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stage_table("xauc", "audit", ["model", "direction", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"])
    blocks = []
    try:
        curves = inputs.stage_table("xroc_curves", "audit", ["model", "direction", "fpr", "tpr"])
        for model, part in curves.groupby("model"):
            blocks.append(Figure(f"xroc_{model}", figures.curves_with_bands(part, "fpr", "tpr", None, None, "direction",
                                                                            "FPR (negatives of one group)", "TPR (positives of the other)",
                                                                            diagonal=True), f"xROC curves, model {model}"))
    except StageMissing:
        pass
    table = frame[["model", "direction", "n_pos", "n_neg"]].copy()
    table["xAUC [95% CI]"] = with_ci(frame, "estimate", "ci_low", "ci_high")
    table["p-value"] = frame["p_value"].map(p_text)
    blocks.append(Table(table, "Cross-group AUC (xAUC)"))
    return SectionContent(
        blocks=blocks,
        findings=significance_findings(frame, lambda r: f"model {r['model']}: xAUC {r['direction']}", "vs the opposite direction"),
        source=inputs.sources.get("xauc", ""),
    )


def pairwise_accuracy(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stage_table("pairwise_accuracy", "audit",
                               ["model", "group_a", "group_b", "estimate", "ci_low", "ci_high", "n_pairs"])
    blocks = []
    for model, part in frame.groupby("model"):
        matrix = part.pivot(index="group_a", columns="group_b", values="estimate")
        blocks.append(Figure(f"pairwise_{model}", figures.heatmap(matrix, f"model {model}", "pairwise accuracy"),
                             f"Pairwise accuracy matrix, model {model}"))
    table = frame[["model", "group_a", "group_b", "n_pairs"]].copy()
    table["accuracy [95% CI]"] = with_ci(frame, "estimate", "ci_low", "ci_high")
    findings = []
    if "p_value" in frame.columns:
        table["p-value"] = frame["p_value"].map(p_text)
        findings = significance_findings(frame, lambda r: f"model {r['model']}: pairwise accuracy {r['group_a']}>{r['group_b']}", "vs parity")
    blocks.append(Table(table, "Pairwise accuracies"))
    return SectionContent(blocks=blocks, findings=findings, source=inputs.sources.get("pairwise_accuracy", ""))


def lambda_frontier(inputs: ReportInputs) -> SectionContent:
    cols = ["lambda", "utility", "utility_ci_low", "utility_ci_high", "unfairness", "unfairness_ci_low", "unfairness_ci_high"]
    frame = inputs.stage_table("lambda_frontier", "training", cols)
    table = frame[["lambda"]].copy()
    table["utility [95% CI]"] = with_ci(frame, "utility", "utility_ci_low", "utility_ci_high")
    table["unfairness [95% CI]"] = with_ci(frame, "unfairness", "unfairness_ci_low", "unfairness_ci_high")
    return SectionContent(
        blocks=[
            Figure("lambda_frontier", figures.frontier(frame, "unfairness", "utility", "unfairness_ci_low", "unfairness_ci_high",
                                                       "utility_ci_low", "utility_ci_high", "lambda", "unfairness", "utility"),
                   "Utility / unfairness trade-off over the penalty weight λ (95% CI)"),
            Table(table, "λ trade-off frontier"),
        ],
        source=inputs.sources.get("lambda_frontier", ""),
    )


SELECTION_NOTE = (
    "Candidates are ranked by the elicited fair metric (Hiranandani et al., Definition 4): cost = (1 − λ)⟨a, 1 − r⟩ "
    "+ λ/2 Σ_{u<v} (r^u − r^v)ᵀ B^{uv} (r^u − r^v) of each group's TPR and TNR at the candidate's operating "
    "threshold on held-out rows; lower is better. Intervals are delta-method 95% CIs from the group-wise counts; "
    "a candidate with too few positives or negatives in a group is not estimable and ranked last.")


def _elicited_metric_blocks(inputs: ReportInputs) -> list:
    """The metric the ranking used (logged next to it by model_selection): oracle label, parameters."""
    try:
        metric = inputs.stage_table("elicited_metric", "selection", ["oracle", "parameter", "elicited"])
    except StageMissing as missing:
        return [Text(f"The elicited metric is not available: {missing}")]
    table = metric.drop(columns=["oracle"]).round(4)
    if "truth" in table.columns and table["truth"].isna().all():
        table = table.drop(columns=["truth"])
    return [Text(f"**Metric: {metric['oracle'].iloc[0]}.**"), Table(table, "Elicited metric (λ, a, B)")]


def model_selection(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stage_table("model_ranking", "selection", ["rank", "model"]).sort_values("rank", na_position="last")
    blocks = [Text(SELECTION_NOTE), *_elicited_metric_blocks(inputs)]
    findings = []
    if {"cost", "ci_low", "ci_high"} <= set(frame.columns):
        table = frame[["rank", "model"]].copy()
        table["cost [95% CI]"] = with_ci(frame, "cost", "ci_low", "ci_high", digits=4)
        extra = [c for c in frame.columns if c.startswith(("tpr[", "tnr[")) or c in
                 ("error_part", "violation_part", "min_group_count", "champion_version", "reason")]
        table = pd.concat([table, frame[extra].round(4)], axis=1)
        blocks.append(Table(table, "Model-selection ranking"))
        findings = _selection_findings(frame)
    else:
        blocks.append(Table(frame, "Model-selection ranking"))
        if len(frame):
            findings = [Finding(f"model selection ranks {frame.iloc[0]['model']} first", "info")]
    return SectionContent(blocks=blocks, findings=findings, source=inputs.sources.get("model_ranking", ""))


def _selection_findings(frame: pd.DataFrame) -> list[Finding]:
    ranked = frame[frame["cost"].notna()]
    if ranked.empty:
        return [Finding("model selection: no candidate is estimable on the held-out rows", "not estimable")]
    win = ranked.iloc[0]
    text = f"model selection: {win['model']} has the lowest cost {win['cost']:.4f} [{win['ci_low']:.4f}, {win['ci_high']:.4f}]"
    if len(ranked) < 2:
        return [Finding(text, "info")]
    runner = ranked.iloc[1]
    versus = f" vs runner-up {runner['model']} {runner['cost']:.4f} [{runner['ci_low']:.4f}, {runner['ci_high']:.4f}]"
    separated = win["ci_high"] < runner["ci_low"]
    return [Finding(text + versus + ("" if separated else " (intervals overlap)"),
                    "significant" if separated else "not significant")]


SECTIONS: list[SectionSpec] = [
    SectionSpec("data_volume", "Data volume and quarantine", "ingestion", data_volume),
    SectionSpec("ctr_by_position", "Click-through rate by position", "staging", ctr_by_position),
    SectionSpec("position_bias", "Position-bias curve", "position_bias", position_bias),
    SectionSpec("eo_transform", "Per-group CDF transforms", "eo_transform", eo_transform),
    SectionSpec("exposure_merit", "Exposure and merit, before and after", "eo_transform", exposure_merit),
    SectionSpec("roc", "ROC curves and partial AUC by group", "audit", roc_audit),
    SectionSpec("xauc", "xROC / xAUC", "audit", xauc_audit),
    SectionSpec("pairwise", "Pairwise accuracy matrices", "audit", pairwise_accuracy),
    SectionSpec("lambda_frontier", "λ trade-off frontier", "training", lambda_frontier),
    SectionSpec("model_selection", "Model selection", "selection", model_selection),
]


def register_section(spec: SectionSpec, after: str | None = None) -> None:
    """Replace the section with the same key, or add it (after section `after`, else at the end).

    For a stage owner whose output needs a presentation the default builder cannot give:
        register_section(SectionSpec("position_bias", "Position-bias curve", "position_bias", my_builder))
    """
    keys = [s.key for s in SECTIONS]
    if spec.key in keys:
        SECTIONS[keys.index(spec.key)] = spec
    elif after is not None:
        if after not in keys:
            raise ValueError(f"no report section {after!r} to insert after; sections are {keys}")
        SECTIONS.insert(keys.index(after) + 1, spec)
    else:
        SECTIONS.append(spec)
