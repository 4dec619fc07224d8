"""The report's pairwise-accuracy section: within-query pairwise accuracy matrices per model, and each cross-group
gap A(a>b) − A(b>a) with its CI and its verdict against the practical margin δ (tables `pairwise_accuracy`,
`pairwise_gaps`; contracts in `fair_pipeline.reporting.sections`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.reporting import figures
from fair_pipeline.audit.stats.equivalence import LARGER, NOT_ESTIMABLE, verdict_kind
from fair_pipeline.reporting.audit_sections import (
    delta_text,
    estimand_note,
    estimate_text,
    gap_verdict_text,
    margin_detail,
    p_status,
)
from fair_pipeline.reporting.formatting import (
    ci_text,
    count_text,
    model_list,
    p_bound,
    p_phrase,
    p_text,
    significance_findings,
    sort_by_model,
    verdict_status,
    with_ci,
    with_verdicts,
)
from fair_pipeline.reporting.model import (
    Figure,
    Finding,
    ReportInputs,
    SectionContent,
    StageMissing,
    Table,
    Text,
    gap_rows,
)


def pairwise_accuracy(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stored_table("pairwise_accuracy", ["model", "group_a", "group_b", "estimate", "ci_low", "ci_high", "n_pairs"])
    frame = sort_by_model(frame.assign(group_a=frame["group_a"].astype(str), group_b=frame["group_b"].astype(str)))

    def draw(panel, part: pd.DataFrame) -> None:
        figures.draw_heatmap(panel, part.pivot(index="group_a", columns="group_b", values="estimate"))

    cells = frame.assign(cell=with_ci(frame, "estimate", "ci_low", "ci_high") + " (" + sample_text(frame) + ")")
    table = cells.pivot_table(index=["model", "group_a"], columns="group_b", values="cell", aggfunc="first", sort=False)
    table.columns = [f"worse item in group {g}" for g in table.columns]
    table = table.reset_index().rename(columns={"group_a": "better item in group"})
    findings = []
    if "p_value" in frame.columns:
        findings = significance_findings(frame, lambda r: f"model {r['model']}: pairwise accuracy {r['group_a']}>{r['group_b']}",
                                         "vs parity")
    blocks = [Text("Within-query pairwise accuracy A(a>b) = the share of pairs (more relevant item of group a, less "
                   "relevant item of group b) in the same query that the model orders correctly (Narasimhan et al.), "
                   "with 95% CIs. " + estimand_note(frame) + "Beside each figure: its pairs, the items and queries "
                   "holding them, and the effective number of clusters behind its t interval (CR2, Satterthwaite "
                   "degrees of freedom). Off-diagonal cells far apart mean one group's better items lose to "
                   "the other group's worse items more often; the cross-group gap A(a>b) − A(b>a) is judged against "
                   "its margin δ."),
              Figure("pairwise", figures.panels(frame, "model", draw, "worse item's group", "better item's group",
                                                colorbar_label="pairwise accuracy A(a>b)"),
                     "Pairwise accuracy matrices, one panel per model"),
              Table(table, "Pairwise accuracy [95% CI] (pairs, items, queries, effective clusters)")]
    verdicts, gap_frame = [], None
    try:
        gaps = pairwise_gap_rows(inputs.stored_table("pairwise_gaps", ["model", "group_a", "group_b", "estimate",
                                                                              "ci_low", "ci_high", "p_value"]))
        blocks.append(Table(pairwise_gap_table(gaps), "Cross-group pairwise gaps A(a>b) − A(b>a) and their verdict against δ"))
        findings += pairwise_gap_findings(gaps)
        verdicts = gaps["verdict"].tolist()
        gap_frame = gap_rows(gaps["model"], "pairwise A(" + gaps["group_a"] + ">" + gaps["group_b"] + ") − A("
                             + gaps["group_b"] + ">" + gaps["group_a"] + ")", gaps["estimate"], gaps["ci_low"],
                             gaps["ci_high"], gaps["margin"], gaps["verdict"])
    except StageMissing:
        pass  # an audit logged before the gaps existed: the matrices above still stand
    return SectionContent(blocks=blocks, findings=findings, source=inputs.sources.get("pairwise_accuracy", ""),
                          verdicts=verdicts, gaps=gap_frame)


def sample_text(rows: pd.DataFrame) -> pd.Series:
    """"pairs = n, items = i, queries = q, effective clusters = df" (the parts the stored table has)."""
    def text(row) -> str:
        parts = [f"pairs = {count_text(row['n_pairs'])}"] if "n_pairs" in row and pd.notna(row["n_pairs"]) else []
        for column, name in (("n_items", "items"), ("n_queries", "queries")):
            if column in row and pd.notna(row[column]):
                parts.append(f"{name} = {count_text(row[column])}")
        if "df" in row and pd.notna(row["df"]):
            parts.append(f"effective clusters = {row['df']:.1f}")
        return ", ".join(parts)
    return rows.apply(text, axis=1) if len(rows) else pd.Series([], dtype=object)


def pairwise_gap_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The logged cross-group gaps with the decisive p, verdict (as logged, else from the CI) and status."""
    rows = sort_by_model(frame.assign(group_a=frame["group_a"].astype(str), group_b=frame["group_b"].astype(str)))
    rows["p_holm"] = rows["p_holm"] if "p_holm" in rows.columns else float("nan")
    rows["p_decisive"] = rows["p_holm"].fillna(rows["p_value"]).where(rows["estimate"].notna())
    rows = with_verdicts(rows, "pairwise_accuracy", "estimate", "ci_low", "ci_high", "p_decisive")
    rows.loc[rows["estimate"].isna(), "verdict"] = NOT_ESTIMABLE
    rows["verdict"] = rows["verdict"].map(verdict_kind)
    rows["status"] = rows["verdict"].map(verdict_status)
    return rows


def pairwise_gap_table(rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "model": rows["model"], "groups (a, b)": rows["group_a"] + ", " + rows["group_b"], "verdict": rows["verdict"],
        "A(a>b) − A(b>a) [95% CI]": rows.apply(lambda r: ci_text(r["estimate"], r["ci_low"], r["ci_high"], signed=True), axis=1),
        "δ": rows["margin"].map(lambda d: "n/a" if pd.isna(d) else f"{d:g}"),
        "p": rows["p_value"].map(p_text),
        **({"Holm p": rows["p_holm"].map(p_text)} if rows["p_holm"].notna().any() else {}),
        "TOST p": rows["p_tost"].map(p_text), "sample": sample_text(rows)})


def _pairwise_gap_text(row: pd.Series) -> str:
    a, b = row["group_a"], row["group_b"]
    if row["verdict"] == NOT_ESTIMABLE:
        return f"pairwise accuracy gap between groups {a} and {b} not estimable"
    holm = "" if pd.isna(row["p_holm"]) else f", Holm {p_phrase(row['p_holm'])}"
    queries = sample_text(row.to_frame().T).iloc[0]
    queries = f" ({queries})" if queries else ""
    return (f"A({a}>{b}) − A({b}>{a}) = {estimate_text(row, 'estimate', signed=True)}, {p_phrase(row['p_value'])}{holm}"
            f"{margin_detail(row)}{queries}: {row['verdict']}")


def pairwise_gap_findings(rows: pd.DataFrame) -> list[Finding]:
    """Every gap as a detailed finding, and one headline per group pair, verdict (and direction for gaps beyond δ)."""
    findings = [Finding(f"model {r['model']}: {_pairwise_gap_text(r)}", r["status"], headline=False, verdict=r["verdict"])
                for _, r in rows.iterrows()]
    sign = np.sign(rows["estimate"]).where(rows["verdict"] == LARGER, 0)
    for _, part in rows.groupby(["group_a", "group_b", rows["verdict"], sign], sort=False):
        first, models = part.iloc[0], list(dict.fromkeys(part["model"]))
        who = f"model {models[0]}" if len(models) == 1 else f"{len(models)} models ({model_list(models)})"
        a, b, verdict, delta = first["group_a"], first["group_b"], first["verdict"], delta_text(part)
        if verdict == NOT_ESTIMABLE:
            findings.append(Finding(f"{who}: {_pairwise_gap_text(first)}", first["status"], verdict=verdict))
            continue
        text = gap_verdict_text(
            verdict, a, b, first["estimate"] < 0, delta,
            larger=lambda lower, higher: (f"pairwise ranking unbalanced against group {lower} by more than δ = {delta} "
                                          f"(its better items lose to group {higher}'s worse items more often than "
                                          "the reverse)"),
            within=f"pairwise accuracy gap between groups {a} and {b} significant but within ±{delta}",
            balanced="pairwise accuracy balanced", inconclusive=f"pairwise accuracy gap between groups {a} and {b}",
            symbol="gap")
        findings.append(Finding(f"{who}: {text}; {p_bound(part['p_decisive'], p_status(verdict))}. {models[0]}: "
                                f"{_pairwise_gap_text(first)}", first["status"], verdict=verdict))
    return findings
