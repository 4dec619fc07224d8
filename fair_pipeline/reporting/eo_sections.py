"""The report's sections on the EO transform stage: the per-group CDF transforms (with what they change in the
audit of the same day) and exposure / merit before and after (a SIMULATION on held-out requests), with the
exposure-per-merit ratio judged against its margin δ on the log scale."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.outputs import PRODUCTION
from fair_pipeline.audit.stats.equivalence import classify_gaps, verdict_kind
from fair_pipeline.audit.stats.exposure import DEFAULT_EXPOSURE_MARGIN
from fair_pipeline.reporting import audit_sections, figures
from fair_pipeline.reporting.formatting import (
    ci_text,
    p_phrase,
    p_text,
    significance_findings,
    verdict_status,
    with_ci,
    z_test_p,
)
from fair_pipeline.reporting.model import Figure, Finding, ReportInputs, SectionContent, StageMissing, Table, Text


def cdf_summary(cdf: pd.DataFrame, levels: tuple[float, ...] = (0.1, 0.5, 0.9)) -> pd.DataFrame:
    """Per group: sample sizes and the score at a few CDF levels, with the band's half-width at each."""
    rows = []
    for group, part in cdf.groupby("group", sort=True):
        row = {"group": group}
        for column in ("n_positives", "n_effective"):
            if column in part.columns:
                row[column] = f"{part[column].iloc[0]:,.0f}"
        for level in levels:
            at = part.iloc[(part["cdf"] - level).abs().argmin()]
            band = (at["cdf_ci_high"] - at["cdf_ci_low"]) / 2 if {"cdf_ci_low", "cdf_ci_high"} <= set(part.columns) else float("nan")
            row[f"score at F = {level:g}"] = f"{at['score']:.3f}" + ("" if pd.isna(band) else f" (F ± {band:.3f})")
        rows.append(row)
    return pd.DataFrame(rows)


TRANSFORM_NOTE = (
    "A per-group CDF transform is increasing within each group, so it keeps every group's own ranking: "
    "**within-group AUCs are unchanged**. It moves one group's scores relative to the other's, so the cross-group "
    "ranking **xAUC changes**. The audit of the same day shows both (production scores vs the transformed ones):"
)


def eo_transform(inputs: ReportInputs) -> SectionContent:
    cdf = inputs.stored_table("eo_transform_cdf", ["group", "score", "cdf"])
    has_ci = {"cdf_ci_low", "cdf_ci_high"} <= set(cdf.columns)
    blocks = [
        Text("Per-group weighted CDFs of the production score among clicked items (weights 1/ŵ undo position bias): "
             "the EO transform maps each group's score through its own CDF so that equally relevant items get equal "
             "transformed scores. Bands: simultaneous 95% DKW bands at the effective sample size."),
        Figure("eo_cdf", figures.curves_with_bands(cdf, "score", "cdf", "cdf_ci_low" if has_ci else None,
                                                   "cdf_ci_high" if has_ci else None, "group", "score", "weighted CDF", step=True),
               "Per-group CDF transforms"),
        Table(cdf_summary(cdf), "Per-group sample sizes and scores at CDF levels"),
    ]
    findings = []
    try:
        pauc = inputs.stored_table("partial_auc", audit_sections.PAUC_COLUMNS)
        xauc = inputs.stored_table("xauc", audit_sections.XAUC_COLUMNS)
        transformed = [m for m in pauc["model"].unique() if str(m).startswith("eo_")]
        if PRODUCTION in set(pauc["model"]) and transformed:
            blocks += [Text(TRANSFORM_NOTE),
                       Table(audit_sections.transform_comparison(pauc, xauc, PRODUCTION, transformed),
                             "Within-group AUC and xAUC [95% CI]: production vs the EO transforms")]
            findings = audit_sections.transform_findings(pauc, xauc, PRODUCTION, transformed)
        else:
            blocks.append(Text("The audit has not scored both production and an EO transform yet, so the comparison of "
                               "within-group AUC and xAUC is missing."))
    except StageMissing as missing:
        blocks.append(Text(f"The comparison with the audit is missing: {missing}"))
    return SectionContent(blocks=blocks, findings=findings, source=inputs.sources.get("eo_transform_cdf", ""))


_RANKING_LABELS = {"raw": "before", "weighted": "after", "unweighted": "unweighted"}


def exposure_ratios(summary: pd.DataFrame) -> pd.DataFrame:
    """Per ranking (before, unweighted, after, in that order): the group-0 / group-1 ratio of exposure per unit of
    merit with its 95% CI on the log scale, where its verdict is judged (log ratio ± 1.96 SE/ratio, delta method),
    back-transformed, and its position on the plot's x axis."""
    rows = summary[summary["method"].isin(list(_RANKING_LABELS))].copy()
    rows["ranking"] = rows["method"].map(_RANKING_LABELS)
    rows["order"] = rows["ranking"].map({"before": 0, "unweighted": 1, "after": 2})
    rows = rows.sort_values("order", kind="stable").reset_index(drop=True)
    rows["x"] = np.arange(len(rows))
    rows["ratio"] = rows["exposure_over_merit_ratio"]
    with np.errstate(divide="ignore", invalid="ignore"):
        half = 1.96 * rows["exposure_over_merit_ratio_se"] / rows["ratio"].where(rows["ratio"] > 0)
    rows["low"] = rows["ratio"] * np.exp(-half)
    rows["high"] = rows["ratio"] * np.exp(half)
    return rows


def exposure_ratio_findings(summary: pd.DataFrame, margin: float = DEFAULT_EXPOSURE_MARGIN) -> list[Finding]:
    """Per ranking, the group-0 / group-1 ratio of exposure per unit of merit (Corollary 1: 1 = exposure
    proportional to merit) with its 95% CI, judged on the log scale against the margin δ = log 1.25 (ratios in
    [0.8, 1.25] too small to matter) by the audit's verdict rule (`classify_gaps`: larger than δ only when the
    interval lies beyond ±δ). SE of the log ratio by the delta method: SE(ratio) / ratio."""
    findings = []
    for row in exposure_ratios(summary).itertuples(index=False):
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.log(row.ratio) if row.ratio > 0 else np.nan
            se_log = row.exposure_over_merit_ratio_se / row.ratio if row.ratio > 0 else np.nan
        verdicts, p_tost = classify_gaps([log_ratio], [se_log], margin)
        verdict = verdict_kind(verdicts[0])
        p = z_test_p(log_ratio, np.log(row.low), np.log(row.high), null=0.0)  # the interval shown, on its scale
        band = f"[{np.exp(-margin):.2f}, {np.exp(margin):.2f}]"
        findings.append(Finding(
            f"{row.ranking} ({row.method} scores): exposure per unit of merit, group-0 / group-1 ratio = "
            f"{ci_text(row.ratio, row.low, row.high)} (1 = proportional exposure; δ = log 1.25 on the log scale, "
            f"ratios in {band} too small to matter; {p_phrase(p)}, TOST {p_phrase(p_tost[0])}): {verdict}",
            verdict_status(verdict), verdict=verdict))
    return findings


def exposure_merit(inputs: ReportInputs) -> SectionContent:
    required = ["ranking", "group", "exposure", "exposure_ci_low", "exposure_ci_high", "merit", "merit_ci_low", "merit_ci_high", "n"]
    frame = inputs.stored_table("exposure_merit", required)
    table = frame[["ranking", "group", "n"]].copy()
    table["exposure [95% CI]"] = with_ci(frame, "exposure", "exposure_ci_low", "exposure_ci_high")
    table["merit [95% CI]"] = with_ci(frame, "merit", "merit_ci_low", "merit_ci_high")
    if {"exposure_over_merit", "exposure_over_merit_se"} <= set(frame.columns):
        ratio = frame.assign(low=frame["exposure_over_merit"] - 1.96 * frame["exposure_over_merit_se"],
                             high=frame["exposure_over_merit"] + 1.96 * frame["exposure_over_merit_se"])
        table["exposure / merit [95% CI]"] = with_ci(ratio, "exposure_over_merit", "low", "high")
    findings = []
    if "p_value" in frame.columns:
        table["p-value"] = frame["p_value"].map(p_text)
        findings = significance_findings(
            frame, lambda r: f"{r['ranking']} ranking: exposure of group {r['group']}", "vs its merit share", value="exposure"
        )
    summary, verdicts = None, []
    try:
        summary = inputs.stored_table("eo_evaluation_summary", ["method", "exposure_over_merit_ratio", "exposure_over_merit_ratio_se"])
        ratio_findings = exposure_ratio_findings(summary)
        findings += ratio_findings
        verdicts = [f.verdict for f in ratio_findings]
    except StageMissing:
        pass  # the per-group table above still stands
    simulated = "simulation" in frame.columns and frame["simulation"].astype(bool).all()
    return SectionContent(
        blocks=[
            Text(("**SIMULATION**: held-out simulated requests re-ranked by each score, clicks drawn from the simulator's "
                  "ground truth. " if simulated else "")
                 + "Exposure = expected examination a group's items receive; merit = their relevance. Before = production "
                   "scores, after = the weighted (1/ŵ) EO transform. Fair exposure in the sense of Corollary 1 means "
                   "equal exposure per unit of merit across groups (ratio 1)."),
            exposure_figure(frame, summary),
            Table(table, "Exposure and merit by group"),
        ],
        findings=findings,
        source=inputs.sources.get("exposure_merit", ""),
        verdicts=verdicts,
    )


def exposure_figure(frame: pd.DataFrame, summary: pd.DataFrame | None) -> Figure:
    """The ratio the findings test (group-0 / group-1 exposure per unit of merit, 1 = proportional), per ranking;
    raw exposure per group only when no ranking's ratio was logged."""
    ratios = exposure_ratios(summary) if summary is not None else pd.DataFrame()
    if len(ratios):
        svg = figures.points_with_errors(ratios, "x", "ratio", "low", "high", None, "ranking",
                                         "exposure/merit, group 0 ÷ group 1", xticks=ratios["ranking"].tolist(),
                                         reference=1.0, reference_label="1 = exposure proportional to merit")
        return Figure("exposure_merit", svg, "Exposure per unit of merit, group-0 / group-1 ratio, by ranking (95% CI)")
    order = list(dict.fromkeys(["before", "after", *frame["ranking"]]))
    plot = frame.assign(x=frame["ranking"].map({name: i for i, name in enumerate(order)}))
    svg = figures.points_with_errors(plot, "x", "exposure", "exposure_ci_low", "exposure_ci_high", "group", "ranking",
                                     "exposure", xticks=[n for n in order if n in set(frame["ranking"])])
    return Figure("exposure_merit", svg, "Exposure per group before and after the transform (95% CI)")
