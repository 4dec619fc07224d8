"""Report section: partial AUC, xAUC and pairwise accuracy by protected attribute and by their crossing.

Reads the audit's `marts.fairness_audit_cell_*` tables (`audit.cell_audit`; filled when
`$FAIR_PIPELINE_GROUP_COLUMNS` names items-table columns) of the report's partition (newest when none). Each
metric gets two tables, the marginal tables (one attribute at a time) and the crossed one side by side as row
blocks of one table, one column per scored output: each cell's estimate with its CI, then each comparison's
effect with its CI, verdict against the margin δ and Holm p (Holm within one attribute table). A note lists the
cells that were not estimable and why; they stay in the tables as "not estimable", never as fair.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.clustered import ESTIMANDS
from fair_pipeline.audit.stats.equivalence import LARGER, verdict_kind
from fair_pipeline.reporting.formatting import ci_text, model_order, p_text
from fair_pipeline.reporting.model import Finding, ReportInputs, SectionContent, Table, Text

GROUPS = ("marts", "fairness_audit_cell_groups")
PAIRS = ("marts", "fairness_audit_cell_pairs")
XAUC_DELTAS = ("marts", "fairness_audit_cell_xauc_deltas")
PAIRWISE = ("marts", "fairness_audit_cell_pairwise")
CROSS = " × "
PRIMARY_CUTOFF = 0.1  # the partial AUC the tables quote: the low-FPR region the papers focus on (as the ROC section)


def _rows(inputs: ReportInputs, table: tuple[str, str]) -> pd.DataFrame:
    name = ".".join(table)
    if inputs.partition is not None:
        return inputs.sql(f"SELECT * FROM {name} WHERE partition_date = $p", [table], {"p": inputs.partition})
    return inputs.sql(f"SELECT * FROM {name} WHERE partition_date = (SELECT max(partition_date) FROM {name})", [table])


def _table_title(name: str) -> str:
    return f"{'crossed' if CROSS in name else 'marginal'}: {name}"


def _ordered(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Marginal tables first (by name), the crossing last; within a table by its labels."""
    crossed = frame["attributes"].str.contains(CROSS, regex=False)
    order = frame.assign(_crossed=crossed).sort_values(["_crossed", "attributes", *keys],
                                                      key=lambda s: s.astype(str) if s.dtype == object else s)
    return order.drop(columns="_crossed")


def _side_by_side(frame: pd.DataFrame, keys: list[str], cell_text, first: dict) -> pd.DataFrame:
    """One row per (attribute table, keys), one column per scored output holding `cell_text(row)`."""
    models = model_order(frame["scored_output"])
    rows = []
    for (name, *values), block in _ordered(frame, keys).groupby(["attributes", *keys], sort=False):
        by_model = {r.scored_output: cell_text(r) for r in block.itertuples()}
        head = block.iloc[0]
        rows.append({"table": _table_title(name), **{title: f(head) for title, f in first.items()},
                     **{m: by_model.get(m, "") for m in models}})
    return pd.DataFrame(rows)


def _comparison_text(row) -> str:
    if pd.isna(row.effect):
        return "not estimable"
    holm = getattr(row, "p_holm", np.nan)
    p = f"; Holm p {p_text(holm)}" if pd.notna(holm) else ""
    return f"{ci_text(row.effect, row.effect_ci_low, row.effect_ci_high, signed=True)} · {row.verdict}{p}"


def _nearest_cutoff(groups: pd.DataFrame) -> float:
    cutoffs = np.unique(groups["cutoff"].to_numpy(dtype=np.float64))
    return float(cutoffs[np.argmin(np.abs(cutoffs - PRIMARY_CUTOFF))])


def _partial_auc(groups: pd.DataFrame, pairs: pd.DataFrame) -> tuple[list, pd.DataFrame]:
    cutoff = _nearest_cutoff(groups)
    cells = groups[(groups["cutoff"] == cutoff) & ~groups["is_overall"].astype(bool)]
    estimates = _side_by_side(
        cells, ["label"],
        lambda r: ci_text(r.auc_normalized, r.ci_low / r.cutoff, r.ci_high / r.cutoff),
        {"cell": lambda h: h["label"], "items": lambda h: "n/a" if pd.isna(h["items"]) else f"{int(h['items']):,}"})
    blocks = [Table(estimates, f"normalized partial AUC I({cutoff:g})/{cutoff:g} [95% CI] of each group or cell")]
    compared = pairs[pairs["cutoff"] == cutoff] if not pairs.empty else pairs
    if not compared.empty:
        blocks.append(Table(_side_by_side(compared, ["label_a", "label_b"], _comparison_text,
                                          {"comparison": lambda h: f"{h['label_a']} − {h['label_b']}"}),
                            f"partial AUC differences (I_a − I_b)/{cutoff:g} [95% CI] · verdict; Holm p"))
    return blocks, compared


def _comparisons(frame: pd.DataFrame, caption: str) -> list:
    if frame.empty:
        return []
    return [Table(_side_by_side(frame, ["label_a", "label_b"], _comparison_text,
                                {"comparison": lambda h: f"{h['label_a']} vs {h['label_b']}"}), caption)]


def _not_estimable(groups: pd.DataFrame) -> tuple[Text, list[str]]:
    """The cells not estimable for some output or cutoff, each with its first reason."""
    bad = groups[~groups["estimable"].astype(bool) & ~groups["is_overall"].astype(bool)]
    listed = []
    for (name, label), rows in _ordered(bad, ["label"]).groupby(["attributes", "label"], sort=False):
        outputs = sorted(rows["scored_output"].unique())
        everywhere = len(outputs) == groups["scored_output"].nunique() and rows["cutoff"].nunique() == \
            groups["cutoff"].nunique()
        where = "" if everywhere else f" (for {', '.join(outputs)} at FPR {', '.join(f'{c:g}' for c in sorted(rows['cutoff'].unique()))})"
        listed.append(f"{label} [{_table_title(name)}]{where}: {rows['note'].dropna().iloc[0] if rows['note'].notna().any() else 'not estimable'}")
    if not listed:
        return Text("Every group and cell was estimable for every output and cutoff."), []
    return Text("Not estimable (kept in the tables, never read as fair): " + "; ".join(listed) + "."), listed


def _findings(frames: dict[str, pd.DataFrame], listed: list[str]) -> list[Finding]:
    findings = []
    total, larger = 0, []
    for metric, frame in frames.items():
        for row in frame.itertuples():
            total += 1
            if verdict_kind(row.verdict) == LARGER:
                larger.append(f"{row.scored_output}, {metric}, {row.label_a} vs {row.label_b} "
                              f"({_table_title(row.attributes)}): {_comparison_text(row)}")
    findings.append(Finding(
        f"by protected attribute and crossed cells: {len(larger)} of {total} comparisons show a gap larger than δ"
        + (f" (e.g. {larger[0]})" if larger else ""), "gap larger than δ" if larger else "info"))
    findings += [Finding(text, "gap larger than δ", headline=False, verdict=LARGER) for text in larger]
    if listed:
        findings.append(Finding(f"by protected attribute: {len(listed)} cells not estimable: " + "; ".join(listed),
                                "not estimable"))
    return findings


def audit_by_cells(inputs: ReportInputs) -> SectionContent:
    groups = _rows(inputs, GROUPS)  # StageMissing when the audit never ran
    source = ", ".join(".".join(t) for t in (GROUPS, PAIRS, XAUC_DELTAS, PAIRWISE))
    if groups.empty:
        return SectionContent(blocks=[Text(
            "Not configured: the audit groups by the logged group_id only. To audit by protected attributes of the "
            "items table and their crossing, set $FAIR_PIPELINE_GROUP_COLUMNS (e.g. gender,age_band) and "
            "materialize the audit (docs/own_logs.md).")], source=source)
    pairs, deltas, pairwise = (_rows(inputs, t) for t in (PAIRS, XAUC_DELTAS, PAIRWISE))
    estimand = ESTIMANDS.get(groups["variance_estimand"].iloc[0], groups["variance_estimand"].iloc[0])
    intro = Text(
        "By protected attribute (items-table columns $FAIR_PIPELINE_GROUP_COLUMNS): every scored output audited on "
        "the same held-out rows, grouped by each attribute on its own (marginal) and by their crossing (crossed), "
        "side by side; one column per output. A cell is keyed by its values (label: attribute=value · ...). A cell "
        "held by fewer items than the audit's minimum number of clusters is not estimable, as is a cell without "
        f"enough positives, negatives or clusters of each; Holm within each attribute table. CIs: {estimand}.")
    auc_blocks, auc_pairs = _partial_auc(groups, pairs)
    xauc = deltas[deltas["kind"] == "xauc"] if not deltas.empty else deltas
    gaps = pairwise[pairwise["kind"] == "gap"] if not pairwise.empty else pairwise
    note, listed = _not_estimable(groups)
    blocks = [intro, note, *auc_blocks,
              *_comparisons(xauc, "Δ xAUC = xAUC(a, b) − xAUC(b, a) [95% CI] · verdict; Holm p"),
              *_comparisons(gaps, "within-query pairwise accuracy gap A_{a>b} − A_{b>a} [95% CI] · verdict; Holm p")]
    findings = _findings({"partial AUC": auc_pairs, "Δ xAUC": xauc, "pairwise gap": gaps}, listed)
    return SectionContent(blocks=blocks, findings=findings, source=source)

