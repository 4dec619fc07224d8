"""The report's model-selection section: the ranking of candidates by the elicited fair metric with each one's
paired difference vs the winner and the champion model (tables `model_ranking`, `elicited_metric`; contracts in
`fair_pipeline.reporting.sections`; the λ frontier is `reporting.frontier`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.reporting.decision import deployed_text
from fair_pipeline.reporting.formatting import ci_text, p_phrase, p_text, with_ci
from fair_pipeline.reporting.model import Finding, ReportInputs, SectionContent, StageMissing, Table, Text


def champion_text(name: str | None, version: str | int | None, candidate: str | None = None) -> str:
    """'Champion model: fair-ranker version 3 (models:/fair-ranker@champion), candidate ...' or why there is none."""
    if not name or version is None or str(version) in ("", "None", "nan"):
        return "No champion model: model selection has not registered one yet."
    chosen = f", the candidate {candidate}" if candidate else ""
    return f"Champion model: **{name} version {version}** (`models:/{name}@champion`{chosen})."


def champion_blocks(name: str | None, version: str | int | None, candidate: str | None = None) -> tuple[Text, Finding]:
    """The champion as a paragraph for a section and as a headline fact for the summary."""
    text = champion_text(name, version, candidate)
    return Text(text), Finding(text.replace("**", "").replace("`", ""), "info")


SELECTION_NOTE = (
    "Candidates are ranked by the elicited fair metric (Hiranandani et al., Definition 4): cost = (1 − λ)⟨a, 1 − r⟩ "
    "+ λ/2 Σ_{u<v} (r^u − r^v)ᵀ B^{uv} (r^u − r^v) of each group's TPR and TNR at the candidate's operating "
    "threshold on held-out rows; lower is better. The cost's interval is the candidate's own (marginal) delta-method "
    "95% CI from the group-wise counts; to compare candidates, use the paired difference vs the winner: cost(candidate) "
    "− cost(winner) on the same held-out rows with a 95% CI clustered by item (each item counts once however often it "
    "was shown) and a two-sided p-value. A candidate with too few positives or negatives in a group is not estimable "
    "and ranked last.")


def _elicited_metric_blocks(inputs: ReportInputs) -> list:
    """The metric the ranking used (logged next to it by model_selection): oracle label, parameters."""
    try:
        metric = inputs.stored_table("elicited_metric", ["oracle", "parameter", "elicited"])
    except StageMissing as missing:
        return [Text(f"The elicited metric is not available: {missing}")]
    table = metric.drop(columns=["oracle"]).round(4)
    if "truth" in table.columns and table["truth"].isna().all():
        table = table.drop(columns=["truth"])
    return [Text(f"**Metric: {metric['oracle'].iloc[0]}.**"), Table(table, "Elicited metric (λ, a, B)")]


def model_selection(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stored_table("model_ranking", ["rank", "model"]).sort_values("rank", na_position="last")
    blocks = [Text(SELECTION_NOTE), *_elicited_metric_blocks(inputs)]
    if "selected_by" in frame.columns and frame["selected_by"].notna().any():
        blocks.append(Text(f"**Ranked by:** {frame['selected_by'].dropna().iloc[0]}."))
    if weighs_exposure(frame):
        paired = "diff_ci_low" in frame.columns and frame["diff_ci_low"].notna().any()
        note = PAIRED_WITH_EXPOSURE if paired else NO_PAIRED_WITH_EXPOSURE
        blocks.append(Text(note.format(weight=float(frame["exposure_weight"].dropna().iloc[0]))))
    findings = []
    if {"cost", "ci_low", "ci_high"} <= set(frame.columns):
        # the decision columns first (rank, the paired difference and its p), the candidate's details after
        table = frame[["rank", "model"]].copy()
        if {"diff_vs_winner", "diff_ci_low", "diff_ci_high"} <= set(frame.columns):
            table["Δ cost vs winner [95% CI, paired by item]"] = frame.apply(_paired_text, axis=1)
            if "diff_p" in frame.columns:
                table["p (Δ = 0)"] = frame["diff_p"].map(p_text)
        table["cost [95% CI]"] = with_ci(frame, "cost", "ci_low", "ci_high", digits=4)
        extra = [c for c in frame.columns if c in ("family", "champion_version")] + [
            c for c in frame.columns if c.startswith(("tpr[", "tnr[")) or c in
            ("error_part", "violation_part", "exposure_disparity", "min_group_count", "reason")]
        table = pd.concat([table, frame[extra].round(4)], axis=1)
        blocks.append(Table(table, "Model-selection ranking"))
        findings = selection_findings(frame)
        champion = frame[frame["champion_version"].notna()] if "champion_version" in frame.columns else frame.iloc[:0]
        try:  # what @champion points at after this day's selection, as the first screen says it
            deployed = inputs.stored_table("deployed_model", ["model", "champion_version", "partition_date"])
        except StageMissing:
            deployed = None
        if deployed is not None:
            text = deployed_text(frame, deployed, inputs.partition, inputs.serving)
            blocks.insert(0, Text(text))
            findings.append(Finding(text.replace("**", "").replace("`", ""), "info"))
        elif len(champion):
            registered = champion.iloc[0].get("registered_model")
            text, finding = champion_blocks(registered if isinstance(registered, str) else "the registered model",
                                            champion.iloc[0]["champion_version"], champion.iloc[0]["model"])
            blocks.insert(0, text)
            findings.append(finding)
    else:
        blocks.append(Table(frame, "Model-selection ranking"))
        if len(frame):
            findings = [Finding(f"{frame.iloc[0]['model']} ranks first", "info")]
    return SectionContent(blocks=blocks, findings=findings, source=inputs.sources.get("model_ranking", ""))


PAIRED_WITH_EXPOSURE = (
    "**Paired differences of the totals:** the cost weighs exposure (μ = {weight:g}); each Δ cost is cost(rates) + "
    "μ · exposure disparity of the candidate minus the winner's, its CI from both parts' influence per item joined "
    "(the rates on the held-out rows, the disparity on the logged requests both candidates re-rank; clustered by "
    "item, the exposure part also by request, with the examination curve's uncertainty).")
NO_PAIRED_WITH_EXPOSURE = (
    "**No paired differences to the winner:** the cost weighs exposure (μ = {weight:g}), and the paired difference "
    "clustered by item covers only the rates' part of the cost, measured on the held-out rows; the exposure "
    "disparity comes from the logged requests with its own SE per candidate, not paired across candidates. The "
    "Δ cost column shows the total's difference without a CI; compare candidates by their own total-cost CIs, "
    "which ignore that every candidate is scored on the same rows and requests (wider than a paired CI would be).")


def weighs_exposure(frame: pd.DataFrame) -> bool:
    """Whether the ranking's cost includes μ · exposure disparity (μ > 0): its paired differences are then the
    totals' (empty where a candidate lacks either part)."""
    return "exposure_weight" in frame.columns and bool((frame["exposure_weight"].fillna(0) > 0).any())


def _paired_text(row: pd.Series) -> str:
    if pd.isna(row["diff_vs_winner"]):
        return "not estimable"
    if row["diff_vs_winner"] == 0 and pd.isna(row["diff_ci_low"]):
        return "winner (reference)"
    if pd.isna(row["diff_ci_low"]):
        why = "exposure weighed" if pd.notna(row.get("exposure_weight")) and row.get("exposure_weight") > 0 else \
            "no held-out rows"
        return f"{row['diff_vs_winner']:+.4f} (no paired CI: {why})"
    return ci_text(row["diff_vs_winner"], row["diff_ci_low"], row["diff_ci_high"], digits=4, signed=True)


def selection_findings(frame: pd.DataFrame) -> list[Finding]:
    ranked = frame[frame["cost"].notna()]
    if ranked.empty:
        return [Finding("no candidate is estimable on the held-out rows", "not estimable")]
    return _candidate_findings(ranked) + _family_findings(frame, ranked)


def _family_findings(frame: pd.DataFrame, ranked: pd.DataFrame) -> list[Finding]:
    """Which family of candidates won, and each other family's best member's paired difference to the winner."""
    if "family" not in frame.columns:
        return []
    win = ranked.iloc[0]
    others = []
    for family, part in ranked[ranked["family"] != win["family"]].groupby("family", sort=True):
        best = part.iloc[0]
        others.append(f"{family} best {best['model']} costs " + (
            f"{_paired_text(best)} more" if "diff_ci_low" in part.columns and pd.notna(best["diff_ci_low"])
            else f"{best['cost']:.4f}"))
    absent = sorted(set(frame["family"].dropna()) - set(ranked["family"]))
    text = (f"the winning family is {win['family']} ({win['model']})"
            + (f"; other families' best vs the winner (paired, clustered by item): {'; '.join(others)}" if others else "")
            + (f"; no estimable candidate in {', '.join(absent)}" if absent else ""))
    return [Finding(text, "info")]


def _candidate_findings(ranked: pd.DataFrame) -> list[Finding]:
    win = ranked.iloc[0]
    text = f"{win['model']} has the lowest cost {win['cost']:.4f} [{win['ci_low']:.4f}, {win['ci_high']:.4f}]"
    if len(ranked) < 2:
        return [Finding(text, "info")]
    runner = ranked.iloc[1]
    if {"diff_vs_winner", "diff_ci_low", "diff_ci_high", "diff_p"} <= set(ranked.columns) and pd.notna(runner["diff_ci_low"]):
        items = (f": {runner['paired_clusters']:,.0f} items, {runner['paired_rows']:,.0f} rows;"
                 if pd.notna(runner.get("paired_clusters", np.nan)) and pd.notna(runner.get("paired_rows", np.nan)) else "")
        separated = runner["diff_ci_low"] > 0
        versus = (f"; runner-up {runner['model']} costs {_paired_text(runner)} more (paired difference clustered by "
                  f"item{items or ','} {p_phrase(runner['diff_p'])})")
        return [Finding(text + versus + ("" if separated else ": within sampling noise"),
                        "significant" if separated else "not significant")]
    versus = f" vs runner-up {runner['model']} {runner['cost']:.4f} [{runner['ci_low']:.4f}, {runner['ci_high']:.4f}]"
    separated = win["ci_high"] < runner["ci_low"]
    return [Finding(text + versus + ("" if separated else " (intervals overlap)"),
                    "significant" if separated else "not significant")]
