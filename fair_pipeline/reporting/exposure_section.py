"""Report section: exposure per unit of merit of each group under the logged ranking, measured from the logs.

Reads the audit's warehouse tables `marts.fairness_audit_exposure_groups` / `_pairs` of the report's partition
(newest when none). It sits beside the EO stage's "Exposure and merit, before and after", which is a SIMULATION
(held-out requests re-simulated); these numbers come from the logged impressions and clicks.
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.audit.stats.equivalence import EQUIVALENT, LARGER, NOT_ESTIMABLE, WITHIN, verdict_kind
from fair_pipeline.reporting.model import Finding, ReportInputs, SectionContent, StageMissing, Table, Text

GROUPS = ("marts", "fairness_audit_exposure_groups")
PAIRS = ("marts", "fairness_audit_exposure_pairs")
CELLS = ("marts", "fairness_audit_exposure_cells")
CROSS = " × "
_STATUS = {LARGER: "gap larger than δ", WITHIN: "within ±δ", EQUIVALENT: "equivalent", NOT_ESTIMABLE: "not estimable"}


def _ci(value, low, high) -> str:
    return "not estimable" if pd.isna(value) else f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _partition_rows(inputs: ReportInputs, table: tuple[str, str]) -> pd.DataFrame:
    where = "partition_date = $p" if inputs.partition is not None else \
        f"partition_date = (SELECT max(partition_date) FROM {'.'.join(table)})"
    params = {"p": inputs.partition} if inputs.partition is not None else None
    return inputs.sql(f"SELECT * FROM {'.'.join(table)} WHERE {where}", [table], params)


def _candidates_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per candidate ranking x group: its exposure-per-merit ratio to the reference, off-policy."""
    return pd.DataFrame({
        "candidate": pairs["scored_output"], "group / reference": [f"{g} / {r}" for g, r in
                                                                 zip(pairs["group"], pairs["reference"])],
        "ratio [95% CI]": [_ci(v, lo, hi) for v, lo, hi in zip(pairs["ratio"], pairs["ci_low"], pairs["ci_high"])],
        "p (Holm)": pairs["p_holm"].map(lambda p: "n/a" if pd.isna(p) else f"{p:.2g}"),
        "verdict": pairs["verdict"], "note": pairs["note"].fillna("")})


def _attribute_blocks(inputs: ReportInputs) -> tuple[list, list[Finding]]:
    """Per protected attribute of the items table, then their crossing: each group or cell's exposure / merit and its
    ratio to the table's largest group, and which cells were not estimable and why."""
    try:
        cells = _partition_rows(inputs, CELLS)
    except StageMissing:  # a warehouse audited before attribute tables existed
        return [], []
    cells = cells[cells["scored_output"] == "production"]
    if cells.empty:
        return [], []
    names = sorted(cells["attributes"].unique(), key=lambda n: (CROSS in n, n))
    blocks = [Text("By protected attribute (items-table columns $FAIR_PIPELINE_GROUP_COLUMNS), from the logs: each "
                   "attribute on its own (marginal tables), then their crossing; each table's reference is its largest "
                   "group or cell, Holm within a table. A cell with too few impressions, clicks or clusters is not "
                   "estimable and stays in its table with the reason.")]
    findings = []
    for name in names:
        rows = cells[cells["attributes"] == name].sort_values("label", key=lambda s: s.astype(str))
        reference = rows["reference"].iloc[0]
        blocks.append(Table(pd.DataFrame({
            "group" if CROSS not in name else "cell": rows["label"], "impressions": rows["n"], "clicks": rows["clicks"],
            "items": rows["items"],
            "exposure / merit [95% CI]": [_ci(v, lo, hi) for v, lo, hi in
                                          zip(rows["exposure_over_merit"], rows["ci_low"], rows["ci_high"])],
            f"ratio to {reference} [95% CI]": ["reference" if v == "reference" else _ci(r, lo, hi) for r, lo, hi, v in
                                               zip(rows["ratio"], rows["ratio_ci_low"], rows["ratio_ci_high"],
                                                   rows["verdict"])],
            "verdict": rows["verdict"], "note": rows["note"].fillna("")}),
            f"{'crossed' if CROSS in name else 'marginal'}: {name}"))
        blank = rows[~rows["estimable"].astype(bool)]
        blocks.append(Text(f"{name}: " + ("every group estimable." if blank.empty else
                                          f"not estimable: {', '.join(map(str, blank['label']))}.")))
        for row in rows[rows["verdict"] != "reference"].itertuples():
            findings.append(Finding(
                f"logged ranking, from the logs, {name}: exposure per unit of merit of {row.label} / {row.reference} = "
                f"{_ci(row.ratio, row.ratio_ci_low, row.ratio_ci_high)}: {row.verdict}",
                _STATUS.get(verdict_kind(row.verdict), "inconclusive"), verdict=row.verdict))
    return blocks, findings


def logged_exposure(inputs: ReportInputs) -> SectionContent:
    groups, pairs = _partition_rows(inputs, GROUPS), _partition_rows(inputs, PAIRS)
    if groups.empty:
        raise StageMissing("the audit stored no exposure parity for this partition (see the audit asset's log)")
    logged = groups["scored_output"] == "production"
    others, other_pairs = groups[~logged], pairs[pairs["scored_output"] != "production"]
    groups, pairs = groups[logged], pairs[pairs["scored_output"] == "production"]
    if groups.empty:
        raise StageMissing("the audit stored no exposure parity of the logged ranking for this partition")
    groups = groups.sort_values("group", key=lambda s: s.astype(str))
    first = groups.iloc[0]
    table = pd.DataFrame({
        "group": groups["group"], "impressions": groups["n"], "clicks": groups["clicks"], "items": groups["items"],
        "exposure": groups["exposure"].round(4), "merit": groups["merit"].round(4),
        "exposure / merit [95% CI]": [_ci(v, lo, hi) for v, lo, hi in
                                      zip(groups["exposure_over_merit"], groups["ci_low"], groups["ci_high"])],
        "note": groups["note"].fillna("")})
    ratios = pd.DataFrame({
        "group / reference": [f"{g} / {r}" for g, r in zip(pairs["group"], pairs["reference"])],
        "ratio [95% CI]": [_ci(v, lo, hi) for v, lo, hi in zip(pairs["ratio"], pairs["ci_low"], pairs["ci_high"])],
        "p (Holm)": pairs["p_holm"].map(lambda p: "n/a" if pd.isna(p) else f"{p:.2g}"),
        "verdict": pairs["verdict"]})
    findings = []
    for row in pairs.itertuples():
        kind = verdict_kind(row.verdict)
        findings.append(Finding(
            f"logged ranking, from the logs: exposure per unit of merit of group {row.group} / group {row.reference} = "
            f"{_ci(row.ratio, row.ci_low, row.ci_high)} (1 = exposure proportional to merit): {row.verdict}",
            _STATUS.get(kind, "inconclusive"), verdict=row.verdict))
    text = (f"From the logs (not a simulation): {first['ranking']} on partition {pd.Timestamp(first['partition_date']).date()}; "
            f"exposure = mean examination weight of the group's slots, merit = clicks / examination weight; "
            f"examination: {first['examination']}; CIs {first['variance_estimand']}. Verdicts on the log ratio against "
            f"δ = {pairs['margin'].iloc[0]:.3f} (ratios within [{1 / 1.25:.2f}, 1.25] too small to matter) with Holm. "
            "The section \"Exposure and merit, before and after\" is a SIMULATION study (held-out requests "
            "re-simulated) and measures another quantity: the examination of a group's relevant items (Nandy et "
            "al., Corollary 1), where this section measures the examination of all its items per unit of mean "
            "relevance; the two differ when a ranking places a group's relevant items differently from its others. "
            "The numbers here are measured on the logged impressions and clicks.")
    blocks = [Text(text), Table(table, "per group"), Table(ratios, "each group vs the largest")]
    attribute_blocks, attribute_findings = _attribute_blocks(inputs)
    blocks, findings = blocks + attribute_blocks, findings + attribute_findings
    if not other_pairs.empty:
        blocks += [Text(f"Off-policy, from the logs: {others['ranking'].iloc[0].split(' re-ranked by ')[0]} "
                        "re-ranked by each candidate (each shown item takes the slot of its new rank; exposure reads "
                        "the new slot, merit the logged click at the logged slot). Assumes the examination curve does "
                        "not depend on the ranking and only the shown items can be re-ordered; CIs two-way clustered "
                        "on the sampled items and requests."),
                   Table(_candidates_table(other_pairs), "each candidate ranking: group vs reference")]
    source = ", ".join(".".join(t) for t in (GROUPS, PAIRS) + ((CELLS,) if attribute_blocks else ()))
    return SectionContent(blocks=blocks, findings=findings, source=source)
