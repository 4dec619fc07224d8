"""The fairness audit's report sections: ROC / partial AUC, xROC / xAUC, pairwise accuracies, and the
production-vs-transform comparison the CDF-transform section shows.

They read the audit's MLflow tables (contracts in `fair_pipeline.reporting.sections`). A model is one scored
output (production scores, an EO transform, a ranker candidate); partial AUCs are normalized, I(α)/α.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.reporting import figures
from fair_pipeline.reporting.formatting import (
    ci_text,
    model_list,
    p_bound,
    p_phrase,
    p_text,
    significance_findings,
    status_of,
    with_ci,
)
from fair_pipeline.reporting.model import Figure, Finding, ReportInputs, SectionContent, StageMissing, Table, Text

PAUC_COLUMNS = ["model", "group", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"]
XAUC_COLUMNS = ["model", "direction", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"]
# The cutoff a headline quotes when a model differs at several: the low-FPR region the papers focus on.
PRIMARY_CUTOFF = 0.1
# A within-group AUC that moves less than this under a per-group monotone transform is reported as unchanged.
UNCHANGED = 1e-9


# ---------------------------------------------------------------- partial AUC
def cutoff_label(row: pd.Series) -> str:
    """'I(0.1)' for the FPR range [0, 0.1] (the normalized truncated AUC I(0.1)/0.1); 'partial AUC' if unknown."""
    if pd.isna(row.get("fpr_high", float("nan"))):
        return "partial AUC"
    low = row.get("fpr_low", 0.0)
    return f"I({row['fpr_high']:g})" if pd.isna(low) or low == 0 else f"pAUC({low:g}–{row['fpr_high']:g})"


def group_comparisons(pauc: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, cutoff, non-reference group): both groups' estimates, the difference (group −
    reference) with its CI where the audit logged it, p (Holm p when logged) and the decisive p."""
    frame = pauc.copy()
    frame["cutoff"] = frame.apply(cutoff_label, axis=1)
    keys = ["model", "cutoff"]
    if "reference" not in frame.columns:  # the contract's reference group is the first one listed
        frame["reference"] = frame.groupby(keys, sort=False)["group"].transform("first")
    frame["is_reference"] = frame["group"].astype(str) == frame["reference"].astype(str)
    ref = frame[frame["is_reference"]][keys + ["estimate", "ci_low", "ci_high", "n_pos", "n_neg"]]
    rows = frame[~frame["is_reference"]].merge(ref, on=keys, suffixes=("", "_ref"))
    if "diff" not in rows.columns:
        rows["diff"], rows["diff_ci_low"], rows["diff_ci_high"] = rows["estimate"] - rows["estimate_ref"], float("nan"), float("nan")
    rows["p_holm"] = rows["p_holm"] if "p_holm" in rows.columns else float("nan")
    rows["p_decisive"] = rows["p_holm"].fillna(rows["p_value"])
    unestimable = rows["estimate"].isna() | rows["estimate_ref"].isna()
    rows.loc[unestimable, "p_decisive"] = float("nan")
    rows["status"] = rows["p_decisive"].map(status_of)
    return rows


def _p_detail(row: pd.Series) -> str:
    holm = "" if pd.isna(row["p_holm"]) else f", Holm {p_phrase(row['p_holm'])}"
    return p_phrase(row["p_value"]) + holm


def _counts(row: pd.Series) -> str:
    return (f"n_pos = {int(row['n_pos']):,} / {int(row['n_pos_ref']):,}, "
            f"n_neg = {int(row['n_neg']):,} / {int(row['n_neg_ref']):,}")


def contrast_text(row: pd.Series, first: tuple[str, str], second: tuple[str, str], difference: tuple[str, str],
                  p: str, counts: str) -> str:
    """'<label> = est [CI] vs <label> = est [CI], <label> ±est [CI], <p> (<counts>)'; each pair is (label,
    column prefix) and the row holds `<prefix>`, `<prefix>_ci_low`, `<prefix>_ci_high` (see `_estimate`)."""
    (a, a_col), (b, b_col), (d, d_col) = first, second, difference
    return (f"{a} = {_estimate(row, a_col)} vs {b} = {_estimate(row, b_col)}, {d} {_estimate(row, d_col, signed=True)}, "
            f"{p} ({counts})")


def _estimate(row: pd.Series, column: str, signed: bool = False) -> str:
    """The estimate in `column` with its CI: columns ci_low/ci_high for `estimate`, `<x>_ci_low`/`<x>_ci_high` for
    `<x>`, and `ci_low<s>`/`ci_high<s>` for `estimate<s>` (a suffixed copy from a merge, e.g. `estimate_ref`)."""
    if column.startswith("estimate"):
        suffix = column[len("estimate"):]
        return ci_text(row[column], row[f"ci_low{suffix}"], row[f"ci_high{suffix}"], signed=signed)
    return ci_text(row[column], row[f"{column}_ci_low"], row[f"{column}_ci_high"], signed=signed)


def comparison_text(row: pd.Series) -> str:
    """'I(0.1): group 1 = 0.272 [0.270, 0.274] vs group 0 = 0.506 [...], difference -0.234 [...], p < 0.001 (n ...)'."""
    if row["status"] == "not estimable":
        return f"{row['cutoff']}: group {row['group']} vs group {row['reference']} not estimable ({_counts(row)})"
    return f"{row['cutoff']}: " + contrast_text(row, (f"group {row['group']}", "estimate"), (f"group {row['reference']}", "estimate_ref"),
                                                ("difference", "diff"), _p_detail(row), _counts(row))


def comparison_headline(rows: pd.DataFrame) -> Finding:
    """One finding for every model whose groups compare the same way at the same cutoffs (all significant in the
    same direction, all not significant, or all not estimable): the first model at the cutoff nearest I(0.1) in
    full, the range of that difference over the models, and the other cutoffs."""
    status, models = rows["status"].iloc[0], list(dict.fromkeys(rows["model"]))
    first = rows[rows["model"] == models[0]]
    quoted = first.iloc[(first["fpr_high"] - PRIMARY_CUTOFF).abs().argmin()] if "fpr_high" in first else first.iloc[0]
    group, ref, cutoffs = quoted["group"], quoted["reference"], ", ".join(dict.fromkeys(rows["cutoff"]))
    who = f"model {models[0]}" if len(models) == 1 else f"{len(models)} models ({model_list(models)})"
    if status == "not estimable":
        return Finding(f"{who}: partial AUC of group {group} vs group {ref} not estimable at {cutoffs} ({_counts(quoted)})", status)
    if status == "significant":
        direction = "above" if quoted["diff"] > 0 else "below"
        verdict = f"partial AUC of group {group} significantly {direction} group {ref} at {cutoffs}"
    else:
        verdict = f"no significant partial-AUC difference between group {group} and group {ref} at {cutoffs}"
    spread = rows[rows["cutoff"] == quoted["cutoff"]]["diff"]
    across = f"; over these models the {quoted['cutoff']} difference ranges {spread.min():+.3f} … {spread.max():+.3f}" if len(models) > 1 else ""
    return Finding(f"{who}: {verdict} ({p_bound(rows['p_decisive'], status)}). {models[0]}, {comparison_text(quoted)}{across}",
                   status)


def pauc_findings(comparisons: pd.DataFrame) -> list[Finding]:
    """Every comparison as a detailed finding, plus one headline per way the models compare (see comparison_headline)."""
    findings = [Finding(f"model {r['model']}, {comparison_text(r)}", r["status"], headline=False) for _, r in comparisons.iterrows()]
    direction = np.sign(comparisons["diff"]).where(comparisons["status"] == "significant", 0)
    for _, rows in comparisons.assign(direction=direction).groupby(["group", "status", "direction"], sort=False):
        families: dict[tuple, list[str]] = {}  # models with the same verdict at the same cutoffs share a headline
        for model, verdicts in rows.groupby("model", sort=False):
            families.setdefault(tuple(zip(verdicts["cutoff"], verdicts["direction"])), []).append(model)
        findings += [comparison_headline(rows[rows["model"].isin(models)]) for models in families.values()]
    return findings


def pauc_table(pauc: pd.DataFrame, comparisons: pd.DataFrame) -> pd.DataFrame:
    """One row per model x cutoff: every group's I(α)/α [CI], each difference from the reference [CI] and p."""
    frame = pauc.assign(cutoff=pauc.apply(cutoff_label, axis=1), cell=with_ci(pauc, "estimate", "ci_low", "ci_high"))
    table = frame.pivot_table(index=["model", "cutoff"], columns="group", values="cell", aggfunc="first", sort=False)
    table.columns = [f"group {g}" for g in table.columns]
    for group, rows in comparisons.groupby("group", sort=False):
        ref = rows["reference"].iloc[0]
        cells = rows.set_index(["model", "cutoff"])
        table[f"{group} − {ref} [95% CI]"] = cells.apply(lambda r: ci_text(r["diff"], r["diff_ci_low"], r["diff_ci_high"], signed=True), axis=1)
        table[f"p ({group} vs {ref})"] = cells["p_value"].map(p_text)
        if cells["p_holm"].notna().any():
            table[f"Holm p ({group} vs {ref})"] = cells["p_holm"].map(p_text)
    return table.reset_index().rename(columns={"cutoff": "FPR cutoff"})


def sample_sizes(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame[keys + ["n_pos", "n_neg"]].drop_duplicates().reset_index(drop=True)


def roc_audit(inputs: ReportInputs) -> SectionContent:
    pauc = inputs.stage_table("partial_auc", "audit", PAUC_COLUMNS)
    blocks = [Text(
        "Per protected group, the ROC curve of each scored output with a pointwise 95% band, and the normalized "
        "truncated AUC I(α)/α = the area under the ROC over false-positive rates 0..α divided by α (Nandy et al., "
        "Lemma 3 variances). I(1) is the ordinary AUC. Each group is compared with the reference group at each "
        "cutoff separately (p-values are not corrected across cutoffs; Holm p where the audit corrects across groups).")]
    try:
        curves = inputs.stage_table("roc_curves", "audit", ["model", "group", "fpr", "tpr", "tpr_ci_low", "tpr_ci_high"])
        blocks.append(Figure("roc", figures.panels(
            curves, "model", lambda ax, part: figures.draw_curves(ax, part, "fpr", "tpr", "tpr_ci_low", "tpr_ci_high", "group",
                                                                  diagonal=True),
            "false positive rate", "true positive rate"), "ROC per group with pointwise 95% bands, one panel per model"))
    except StageMissing as missing:
        blocks.append(Text(f"ROC curves missing: {missing}"))
    comparisons = group_comparisons(pauc)
    blocks += [Table(pauc_table(pauc, comparisons), "Normalized partial AUC I(α)/α [95% CI] by group, and group differences"),
               Table(sample_sizes(pauc, ["model", "group"] + (["training_window"] if "training_window" in pauc else [])).rename(
                   columns={"training_window": "trained on"}),
                   "Sample sizes (positives and negatives per group) and each model's training window (the evaluation "
                   "window is in the source line)")]
    return SectionContent(blocks=blocks, findings=pauc_findings(comparisons), source=inputs.sources.get("partial_auc", ""))


# ---------------------------------------------------------------- xAUC
def xauc_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per model and unordered group pair: xAUC both ways, ΔxAUC = xAUC(a>b) − xAUC(b>a) with its CI
    (where the audit logged it) and p."""
    split = frame["direction"].str.split(">", n=1, expand=True)
    frame = frame.assign(a=split[0], b=split[1])
    forward = frame[frame["a"] < frame["b"]]
    backward = frame[frame["a"] > frame["b"]].rename(columns={"a": "b", "b": "a"})
    pairs = forward.merge(backward, on=["model", "a", "b"], suffixes=("", "_back"))
    if "delta" not in pairs.columns:
        pairs["delta"], pairs["delta_ci_low"], pairs["delta_ci_high"] = pairs["estimate"] - pairs["estimate_back"], float("nan"), float("nan")
    pairs["status"] = pairs["p_value"].where(pairs["estimate"].notna() & pairs["estimate_back"].notna()).map(status_of)
    return pairs


def xauc_text(row: pd.Series) -> str:
    """'xAUC(0>1) = 0.339 [...] vs xAUC(1>0) = 0.995 [...], ΔxAUC = -0.656 [...], p < 0.001 (n_pos = ..., n_neg = ...)'."""
    a, b = row["a"], row["b"]
    counts = (f"n_pos = {int(row['n_pos']):,} (group {a}) / {int(row['n_pos_back']):,} (group {b}), "
              f"n_neg = {int(row['n_neg_back']):,} (group {a}) / {int(row['n_neg']):,} (group {b})")
    if row["status"] == "not estimable":
        return f"xAUC between groups {a} and {b} not estimable ({counts})"
    return contrast_text(row, (f"xAUC({a}>{b})", "estimate"), (f"xAUC({b}>{a})", "estimate_back"), ("ΔxAUC =", "delta"),
                         p_phrase(row["p_value"]), counts)


def xauc_headline(rows: pd.DataFrame) -> Finding:
    """One finding for the models with the same verdict on a group pair (and the same sign of ΔxAUC)."""
    first, models = rows.iloc[0], list(dict.fromkeys(rows["model"]))
    who = f"model {models[0]}" if len(models) == 1 else f"{len(models)} models ({model_list(models)})"
    a, b, status = first["a"], first["b"], first["status"]
    if status == "not estimable":
        return Finding(f"{who}: {xauc_text(first)}", status)
    if status == "significant":
        lower, higher = (a, b) if first["delta"] < 0 else (b, a)
        verdict = (f"cross-group ranking significantly unbalanced against group {lower} (its relevant items fall below "
                   f"group {higher}'s irrelevant ones more often than the reverse)")
    else:
        verdict = f"no significant xAUC imbalance between groups {a} and {b}"
    across = f"; over these models ΔxAUC ranges {rows['delta'].min():+.3f} … {rows['delta'].max():+.3f}" if len(models) > 1 else ""
    return Finding(f"{who}: {verdict}; {p_bound(rows['p_value'], status)}. {models[0]}: {xauc_text(first)}{across}", status)


def xauc_findings(pairs: pd.DataFrame) -> list[Finding]:
    findings = [Finding(f"model {r['model']}: {xauc_text(r)}", r["status"], headline=False) for _, r in pairs.iterrows()]
    sign = np.sign(pairs["delta"]).where(pairs["status"] == "significant", 0)
    for _, rows in pairs.groupby(["a", "b", pairs["status"], sign], sort=False):
        findings.append(xauc_headline(rows))
    return findings


def xauc_audit(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stage_table("xauc", "audit", XAUC_COLUMNS)
    blocks = [Text(
        "xAUC(a>b) = P(a relevant item of group a is scored above an irrelevant item of group b) (Kallus & Zhou). "
        "If xAUC(a>b) is far below xAUC(b>a), group a's relevant items are ranked under group b's irrelevant ones "
        "more often than the reverse; ΔxAUC = xAUC(a>b) − xAUC(b>a) is tested against 0 (DeLong variances).")]
    try:
        curves = inputs.stage_table("xroc_curves", "audit", ["model", "direction", "fpr", "tpr"])
        blocks.append(Figure("xroc", figures.panels(
            curves, "model", lambda ax, part: figures.draw_curves(ax, part, "fpr", "tpr", None, None, "direction", diagonal=True),
            "FPR (negatives of the second group)", "TPR (positives of the first group)"), "xROC curves, one panel per model"))
    except StageMissing:
        pass
    pairs = xauc_pairs(frame)
    table = pd.DataFrame({
        "model": pairs["model"], "groups (a, b)": pairs["a"] + ", " + pairs["b"],
        "xAUC(a>b) [95% CI]": with_ci(pairs, "estimate", "ci_low", "ci_high"),
        "xAUC(b>a) [95% CI]": with_ci(pairs, "estimate_back", "ci_low_back", "ci_high_back"),
        "ΔxAUC [95% CI]": pairs.apply(lambda r: ci_text(r["delta"], r["delta_ci_low"], r["delta_ci_high"], signed=True), axis=1),
        "p": pairs["p_value"].map(p_text),
        "positives a / b": pairs["n_pos"].map("{:,}".format) + " / " + pairs["n_pos_back"].map("{:,}".format),
        "negatives b / a": pairs["n_neg"].map("{:,}".format) + " / " + pairs["n_neg_back"].map("{:,}".format),
    })
    blocks.append(Table(table, "Cross-group AUC (xAUC) both ways and their difference"))
    return SectionContent(blocks=blocks, findings=xauc_findings(pairs),
                          source=inputs.sources.get("xauc", ""))


# ---------------------------------------------------------------- pairwise accuracy
def pairwise_accuracy(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stage_table("pairwise_accuracy", "audit",
                               ["model", "group_a", "group_b", "estimate", "ci_low", "ci_high", "n_pairs"])
    frame = frame.assign(group_a=frame["group_a"].astype(str), group_b=frame["group_b"].astype(str))

    def draw(ax, part: pd.DataFrame) -> None:
        figures.draw_heatmap(ax, part.pivot(index="group_a", columns="group_b", values="estimate"))

    cells = frame.assign(cell=with_ci(frame, "estimate", "ci_low", "ci_high") + frame["n_pairs"].map(" (pairs = {:,.0f})".format))
    table = cells.pivot_table(index=["model", "group_a"], columns="group_b", values="cell", aggfunc="first", sort=False)
    table.columns = [f"worse item in group {g}" for g in table.columns]
    table = table.reset_index().rename(columns={"group_a": "better item in group"})
    findings = []
    if "p_value" in frame.columns:
        findings = significance_findings(frame, lambda r: f"model {r['model']}: pairwise accuracy {r['group_a']}>{r['group_b']}",
                                         "vs parity")
    return SectionContent(
        blocks=[Text("Within-query pairwise accuracy A(a>b) = the share of pairs (more relevant item of group a, less "
                     "relevant item of group b) in the same query that the model orders correctly (Narasimhan et al.), "
                     "with query-clustered 95% CIs. Off-diagonal cells far apart mean one group's better items lose to "
                     "the other group's worse items more often."),
                Figure("pairwise", figures.panels(frame, "model", draw, "worse item's group", "better item's group"),
                       "Pairwise accuracy matrices, one panel per model"),
                Table(table, "Pairwise accuracy [95% CI] (pairs)")],
        findings=findings,
        source=inputs.sources.get("pairwise_accuracy", ""),
    )


# ---------------------------------------------------------------- what a per-group CDF transform changes
def transform_comparison(pauc: pd.DataFrame, xauc: pd.DataFrame, baseline: str, transformed: list[str]) -> pd.DataFrame:
    """Within-group AUCs (I(1)) and xAUCs with CIs, one column per model: baseline first, then the transforms."""
    full = pauc[pauc["fpr_high"] == 1.0] if "fpr_high" in pauc.columns else pauc.iloc[0:0]
    rows = [full.assign(statistic="AUC within group " + full["group"].astype(str)),
            xauc.assign(statistic="xAUC(" + xauc["direction"].astype(str) + ")")]
    long = pd.concat(rows, ignore_index=True)
    long = long[long["model"].isin([baseline, *transformed])]
    long["cell"] = with_ci(long, "estimate", "ci_low", "ci_high")
    table = long.pivot_table(index="statistic", columns="model", values="cell", aggfunc="first", sort=False)
    return table[[m for m in [baseline, *transformed] if m in table.columns]].reset_index()


def transform_findings(pauc: pd.DataFrame, xauc: pd.DataFrame, baseline: str, transformed: list[str]) -> list[Finding]:
    """Per transform: the largest change of a within-group AUC (≈ 0) and how each xAUC moved."""
    full = pauc[pauc["fpr_high"] == 1.0].set_index(["model", "group"])["estimate"]
    x = xauc.set_index(["model", "direction"])
    findings = []
    for model in transformed:
        groups = [g for (m, g) in full.index if m == baseline and (model, g) in full.index]
        if not groups:
            continue
        change = max(abs(full[(model, g)] - full[(baseline, g)]) for g in groups)
        # Exactly equal up to rounding for a strictly increasing map; ties where the map is flat can move it a little.
        within = (f"within-group AUCs unchanged (largest change {change:.2g})" if change < UNCHANGED else
                  f"within-group AUCs changed by up to {change:.3g} (ties where the transform is flat)")
        moves = [f"xAUC({d}) {_estimate(x.loc[(baseline, d)], 'estimate')} → {_estimate(x.loc[(model, d)], 'estimate')}"
                 for (m, d) in x.index if m == baseline and (model, d) in x.index]
        findings.append(Finding(f"{model} vs {baseline}: {within}; " + "; ".join(moves), "info"))
    return findings
