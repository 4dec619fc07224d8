"""The report's first screen, decision first: what is deployed and why, which gaps crossed δ since the previous
audited partition, and the gaps larger than δ as a forest plot with the ±δ band, with what each verdict means.

It reads nothing of its own beyond the registry's alias (read by the asset when it builds the report), the selection's
`deployed_model` table and the audit trend: the gaps are the rows the sections themselves show
(`SectionContent.gaps`), so the first screen and the sections never disagree.
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.audit.stats.equivalence import LARGER, verdict_kind
from fair_pipeline.reporting import figures, trend
from fair_pipeline.reporting.formatting import ci_text, count_text, sort_by_model, verdict_legend
from fair_pipeline.reporting.model import (GAP_COLUMNS, Figure, ReportInputs, SectionContent, Serving, StageMissing,
                                           Table, Text)

# The forest plot shows at most this many gaps: the serving model's and the EO transforms' first, then those whose
# interval lies furthest beyond δ; the sections list every one.
FOREST_GAPS = 12
FIRST_MODELS = ("production", "eo_weighted", "eo_unweighted")


def _name(value) -> str:
    return "n/a" if value is None or pd.isna(value) else str(value)


def deployed_text(ranking: pd.DataFrame | None, deployed: pd.DataFrame | None, partition,
                  serving: Serving | None = None) -> str:
    """What `fair-ranker@champion` is, and why it is that candidate: the winner itself, or, when the winner is not a
    ranking model the registry holds, the best one that is. With `serving` (the registry's alias when the report was
    built, the authority), the alias as the registry holds it, so a later `promote` or rollback shows in every
    report built after it, and the selection's record only explains it (or says the alias was moved since)."""
    if serving is not None:
        return _serving_text(serving, ranking, deployed, partition)
    if deployed is None or deployed.empty:
        return ("**Deployed: nothing yet.** No model selection up to this partition registered a `fair-ranker` "
                "version, so `fair-ranker@champion` is not set by this pipeline.")
    return _selection_text(ranking, deployed, partition, "Deployed") + (
        " (`fair-pipeline promote` can move the alias afterwards; the MLflow registry is the authority on what "
        "serves now.)")


def _selection_text(ranking: pd.DataFrame | None, deployed: pd.DataFrame, partition, lead: str) -> str:
    row = deployed.iloc[0]
    name, day = _name(row.get("registered_model") or "fair-ranker"), pd.Timestamp(row["partition_date"]).date()
    version = _name(row["champion_version"]).removesuffix(".0")
    text = (f"**{lead}: `{name}@champion` = version {version}**, the candidate `{row['model']}` (family "
            f"{_name(row.get('family'))}), ranked {count_text(row['rank'])} of {count_text(row['candidates'])} by the "
            f"elicited metric in the model selection of {day}.")
    if partition is not None and day < pd.Timestamp(partition).date():
        text += f" This partition's selection registered no model, so the alias still points at {day}'s."
    if ranking is not None and len(ranking):
        best = ranking.sort_values("rank", kind="stable").iloc[0]
        if best["model"] != row["model"] and day == pd.Timestamp(ranking["partition_date"].iloc[0]).date():
            cost = f", cost {best['cost']:.4f}" if "cost" in best and pd.notna(best["cost"]) else ""
            text += (f" **Selection's winner is not deployed:** `{best['model']}` (family {_name(best.get('family'))}"
                     f"{cost}) is not a ranking model the registry can serve (`{name}` packages a ranker with its EO "
                     "transform), so the best candidate that is one was registered and moved to @champion.")
        elif best["model"] == row["model"]:
            text += " It is selection's winner."
    return text


def _serving_text(serving: Serving, ranking, deployed, partition) -> str:
    # The read time is the report's `registry_read_at` (header, findings.json): in this text, which is a finding, it
    # would make two days' findings differ by the minute alone.
    source = "the MLflow registry when this report was built"
    if serving.version is None:
        text = f"**Deployed: nothing.** `{serving.name}@champion` is not set ({source})."
        return text + ("" if deployed is None or deployed.empty else " " + _selection_text(
            ranking, deployed, partition, "Last registered by selection"))
    moved = deployed is None or deployed.empty or _name(deployed.iloc[0]["champion_version"]).removesuffix(".0") != serving.version
    if not moved:
        return _selection_text(ranking, deployed, partition, "Deployed") + f" (As {source}.)"
    text = (f"**Deployed: `{serving.name}@champion` = version {serving.version}**, the candidate `{serving.candidate}` "
            f"chosen by the model selection of {serving.partition} ({source}).")
    if deployed is not None and not deployed.empty:
        row = deployed.iloc[0]
        day = pd.Timestamp(row["partition_date"]).date()
        how = ("`fair-pipeline promote --force` rolled it back to an older day" if serving.partition < day.isoformat()
               else "a newer partition's selection or `fair-pipeline promote` moved it" if serving.partition > day.isoformat()
               else "`fair-pipeline promote` moved it")
        text += (f" **Not what this report's selection left:** the selection of {day} registered version "
                 f"{_name(row['champion_version']).removesuffix('.0')} (`{row['model']}`); {how}.")
    return text


def crossings(rows: pd.DataFrame) -> tuple[pd.DataFrame, tuple | None]:
    """The trend's gaps whose verdict crossed δ (to or from 'larger than δ') between the two newest audited
    partitions, each with both days' gap [CI] and verdict; and the two days (None with fewer than two)."""
    days = sorted(rows["partition_date"].unique())
    if len(days) < 2:
        return pd.DataFrame(), None
    before, now = days[-2], days[-1]
    keys = ["metric", "scored_output", "pair"]
    a = rows[rows["partition_date"] == before].set_index(keys)
    b = rows[rows["partition_date"] == now].set_index(keys)
    both = a.join(b, how="inner", lsuffix="_before")
    larger = lambda v: v.map(verdict_kind) == LARGER  # noqa: E731
    crossed = both[larger(both["verdict_before"]) != larger(both["verdict"])].reset_index()
    table = pd.DataFrame({
        "now": crossed["verdict"], "gap now [95% CI]": [ci_text(g, lo, hi, signed=True) for g, lo, hi in
                                                        zip(crossed["gap"], crossed["ci_low"], crossed["ci_high"])],
        "δ": crossed["margin"].map(lambda d: "n/a" if pd.isna(d) else f"{d:g}"),
        "before": crossed["verdict_before"],
        "gap before [95% CI]": [ci_text(g, lo, hi, signed=True) for g, lo, hi in
                                zip(crossed["gap_before"], crossed["ci_low_before"], crossed["ci_high_before"])],
        "model": crossed["scored_output"], "gap": crossed["metric"] + " (" + crossed["pair"] + ")"})
    return sort_by_model(table), (pd.Timestamp(before).date(), pd.Timestamp(now).date())


def forest_rows(gaps: pd.DataFrame) -> pd.DataFrame:
    """The gaps larger than δ to draw (at most FOREST_GAPS): the serving model's and the EO transforms' first, then
    by how far the interval lies beyond δ."""
    large = gaps[gaps["verdict"].map(verdict_kind) == LARGER].copy()
    large["beyond"] = large[["low", "high"]].abs().min(axis=1) - large["margin"]
    large["first"] = ~large["model"].isin(FIRST_MODELS)
    return large.sort_values(["first", "beyond"], ascending=[True, False], kind="stable").head(FOREST_GAPS)


def decision(inputs: ReportInputs, gaps: pd.DataFrame) -> SectionContent:
    """The first screen's blocks, from the selection tables, the audit trend and the sections' `gaps`."""
    try:
        ranking = inputs.stored_table("model_ranking", ["rank", "model"])
    except StageMissing:
        ranking = None
    try:
        deployed = inputs.stored_table("deployed_model", ["model", "champion_version", "partition_date"])
    except StageMissing:
        deployed = None
    blocks: list = [Text(deployed_text(ranking, deployed, inputs.partition, inputs.serving))]
    try:
        changed, days = crossings(trend.trend_rows(inputs))
    except StageMissing:
        changed, days = pd.DataFrame(), None
    if days is None:
        blocks.append(Text("**Changed since the previous partition:** no earlier audited partition to compare with."))
    elif changed.empty:
        blocks.append(Text(f"**Changed since {days[0]}:** no gap crossed δ (every verdict on the trend's gaps is "
                           f"the same on {days[1]})."))
    else:
        blocks += [Text(f"**Changed since {days[0]}:** {len(changed)} gap(s) crossed δ."),
                   Table(changed, f"Gaps whose verdict crossed δ between {days[0]} and {days[1]} (each day's own CI)")]
    large = forest_rows(gaps) if len(gaps) else gaps
    total = int((gaps["verdict"].map(verdict_kind) == LARGER).sum()) if len(gaps) else 0
    if large.empty:
        blocks.append(Text(f"**No gap is larger than δ** among the {len(gaps)} audited comparisons."))
    else:
        # numbered along the axis (long names would run off the figure); the table below names each number
        large = large.reset_index(drop=True).assign(label=lambda f: (f.index + 1).astype(str))
        shown = f"{len(large)} of {total}" if total > len(large) else f"all {total}"
        blocks += [
            Text(f"**Gaps larger than δ** ({shown}; every comparison is in its section below):"),
            Figure("decision_gaps", figures.forest(large, "label", "effect", "low", "high", "margin",
                                                   "gap (numbered as in the table)", "gap with 95% CI"),
                   "Gaps larger than δ with their 95% CIs, numbered as in the table below; the shaded band is ±δ "
                   "(a gap matters when its whole interval lies outside it)"),
            Table(pd.DataFrame({"#": large["label"], "verdict": large["verdict"],
                                "gap [95% CI]": [ci_text(e, lo, hi, signed=True) for e, lo, hi in
                                                 zip(large["effect"], large["low"], large["high"])],
                                "δ": large["margin"].map(lambda d: f"{d:g}"), "model": large["model"],
                                "comparison": large["comparison"]}), "The gaps drawn above")]
    blocks.append(Text("**What the verdicts mean** (δ = the practical margin of each metric): "
                       + " ".join(line + "" for line in verdict_legend())))
    return SectionContent(blocks=blocks, source="warehouse marts.model_ranking, the audit tables and trend")


def collect_gaps(contents) -> pd.DataFrame:
    frames = [c.gaps for c in contents if c is not None and c.gaps is not None and len(c.gaps)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=GAP_COLUMNS)
