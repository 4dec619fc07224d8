"""The fairness audit's report sections: ROC / partial AUC, xROC / xAUC (pairwise accuracies: `pairwise`), and the
production-vs-transform comparison the CDF-transform section shows.

They read the report tables made from the audit's store tables (contracts in `fair_pipeline.reporting.sections`). A model is one scored
output (production scores, an EO transform, a ranker candidate); partial AUCs are normalized, I(α)/α.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.clustered import ESTIMANDS
from fair_pipeline.audit.stats.equivalence import EQUIVALENT, LARGER, NOT_ESTIMABLE, WITHIN, verdict_kind
from fair_pipeline.reporting import figures
from fair_pipeline.reporting.formatting import (
    ci_text,
    count_text,
    model_list,
    model_order,
    p_bound,
    p_phrase,
    p_text,
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

PAUC_COLUMNS = ["model", "group", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"]
XAUC_COLUMNS = ["model", "direction", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"]
VERDICT_NOTE = (
    "Each gap is judged against a practical margin δ (default 0.02 on the 0..1 scale, set per metric in the audit's "
    "`margins`): **gap larger than δ (significant)** when the 95% CI lies entirely beyond +δ or −δ (and the Holm "
    "p < 0.05 where it applies); **gap significant but within ±δ** when p < 0.05 and the 95% CI lies inside ±δ (real "
    "but too small to matter); **equivalent within ±δ (TOST)** when not significant and the 95% CI lies inside ±δ; "
    "**inconclusive** otherwise (the interval reaches across ±δ). Clustered CIs use Student t with the effective "
    "number of clusters.")
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
    reference) with its CI where the audit logged it, p (Holm p when logged), the decisive p, and the verdict
    against the margin δ (`margin`, `p_tost`, `verdict`: as logged, else from the difference and its CI)."""
    frame = sort_by_model(pauc)
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
    rows = with_verdicts(rows, "partial_auc_normalized", "diff", "diff_ci_low", "diff_ci_high", "p_decisive")
    rows.loc[unestimable, "verdict"] = NOT_ESTIMABLE
    rows["verdict"] = rows["verdict"].map(verdict_kind)
    rows["status"] = rows["verdict"].map(verdict_status)
    return rows


def margin_detail(row: pd.Series) -> str:
    """', δ = 0.02, TOST p = 0.83'."""
    return f", δ = {row['margin']:g}, TOST {p_phrase(row['p_tost'])}" if pd.notna(row.get("margin")) else ""


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
    return (f"{a} = {estimate_text(row, a_col)} vs {b} = {estimate_text(row, b_col)}, {d} {estimate_text(row, d_col, signed=True)}, "
            f"{p} ({counts})")


def estimate_text(row: pd.Series, column: str, signed: bool = False) -> str:
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
                                                ("difference", "diff"), _p_detail(row) + margin_detail(row),
                                                _counts(row)) + f": {row['verdict']}"


def p_status(verdict: str) -> str:
    """How p_bound summarises the p-values of one verdict: the largest p where the gaps are significant."""
    return "significant" if verdict in (LARGER, WITHIN) else "not significant"


def delta_text(rows: pd.DataFrame) -> str:
    margins = rows["margin"].dropna().unique()
    return f"{margins[0]:g}" if len(margins) == 1 else "δ"


def comparison_headline(rows: pd.DataFrame) -> Finding:
    """One finding for every model whose groups compare the same way at the same cutoffs (the same verdict against
    the margin δ, and for gaps larger than δ the same direction): the first model at the cutoff nearest I(0.1) in
    full, the range of that difference over the models, and the other cutoffs."""
    status, verdict, models = rows["status"].iloc[0], rows["verdict"].iloc[0], list(dict.fromkeys(rows["model"]))
    first = rows[rows["model"] == models[0]]
    quoted = first.iloc[(first["fpr_high"] - PRIMARY_CUTOFF).abs().argmin()] if "fpr_high" in first else first.iloc[0]
    group, ref, cutoffs = quoted["group"], quoted["reference"], ", ".join(dict.fromkeys(rows["cutoff"]))
    who = f"model {models[0]}" if len(models) == 1 else f"{len(models)} models ({model_list(models)})"
    if verdict == NOT_ESTIMABLE:
        return Finding(f"{who}: partial AUC of group {group} vs group {ref} not estimable at {cutoffs} ({_counts(quoted)})",
                       status, verdict=verdict)
    delta = delta_text(rows)
    if verdict == LARGER:
        direction = "above" if quoted["diff"] > 0 else "below"
        text = f"partial AUC of group {group} {direction} group {ref} by more than δ = {delta} at {cutoffs}"
    elif verdict == WITHIN:
        text = (f"partial AUC of group {group} vs group {ref}: significant but within ±{delta} at {cutoffs} (not a "
                f"practically relevant gap)")
    elif verdict == EQUIVALENT:
        text = f"partial AUC of group {group} and group {ref} equivalent within ±{delta} (TOST) at {cutoffs}"
    else:
        text = (f"partial AUC of group {group} vs group {ref} inconclusive at {cutoffs}: the data cannot tell "
                f"whether the gap exceeds {delta}")
    spread = rows[rows["cutoff"] == quoted["cutoff"]]["diff"]
    across = f"; over these models the {quoted['cutoff']} difference ranges {spread.min():+.3f} … {spread.max():+.3f}" if len(models) > 1 else ""
    return Finding(f"{who}: {text} ({p_bound(rows['p_decisive'], p_status(verdict))}). {models[0]}, "
                   f"{comparison_text(quoted)}{across}", status, verdict=verdict)


def pauc_findings(comparisons: pd.DataFrame) -> list[Finding]:
    """Every comparison as a detailed finding, plus one headline per way the models compare (see comparison_headline)."""
    findings = [Finding(f"model {r['model']}, {comparison_text(r)}", r["status"], headline=False, verdict=r["verdict"])
                for _, r in comparisons.iterrows()]
    direction = np.sign(comparisons["diff"]).where(comparisons["verdict"] == LARGER, 0)
    for _, rows in comparisons.assign(direction=direction).groupby(["group", "verdict", "direction"], sort=False):
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
        table[f"δ ({group} vs {ref})"] = cells["margin"].map(lambda d: "n/a" if pd.isna(d) else f"{d:g}")
        table[f"verdict ({group} vs {ref})"] = cells["verdict"]
    order = {m: i for i, m in enumerate(model_order(table.index.get_level_values("model")))}
    table = table.iloc[np.argsort([order[str(m)] for m in table.index.get_level_values("model")], kind="stable")]
    # verdict and effect first: the columns a reader decides on before scrolling right
    first = [c for c in table.columns if c.startswith("verdict (")]
    first = [c for v in first for c in (v, *[d for d in table.columns if d.endswith(" [95% CI]")
                                             and d.startswith(v[len("verdict ("):-1].split(" vs ")[0] + " − ")])]
    table = table[first + [c for c in table.columns if c not in first]]
    return table.reset_index().rename(columns={"cutoff": "FPR cutoff"})


def sample_sizes(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame[keys + ["n_pos", "n_neg"]].drop_duplicates().reset_index(drop=True)


def estimand_note(frame: pd.DataFrame) -> str:
    """Which uncertainty the section's intervals are for (tables logged before the column existed: conditional)."""
    names = frame["variance_estimand"].dropna().unique().tolist() if "variance_estimand" in frame else []
    names = names or ["conditional"]
    return " ".join(f"SEs and CIs: {ESTIMANDS.get(name, name)}." for name in names) + " "


def roc_audit(inputs: ReportInputs) -> SectionContent:
    pauc = inputs.stored_table("partial_auc", PAUC_COLUMNS)
    blocks = [Text(
        "Per protected group, the ROC curve of each scored output with a pointwise 95% band, and the normalized "
        "truncated AUC I(α)/α = the area under the ROC over false-positive rates 0..α divided by α (Nandy et al., "
        "Lemma 3 influence values). I(1) is the ordinary AUC. " + estimand_note(pauc) + "Each group is compared with "
        "the reference group at each cutoff separately (p-values are not corrected across cutoffs; Holm p where the "
        "audit corrects across groups). " + VERDICT_NOTE)]
    try:
        curves = inputs.stored_table("roc_curves", ["model", "group", "fpr", "tpr", "tpr_ci_low", "tpr_ci_high"])
        blocks.append(Figure("roc", figures.panels(
            curves, "model", lambda panel, part: figures.draw_curves(panel, part, "fpr", "tpr", "tpr_ci_low", "tpr_ci_high",
                                                                     "group", diagonal=True),
            "false positive rate", "true positive rate", legend_title="group"), "ROC per group with pointwise 95% bands, one panel per model"))
    except StageMissing as missing:
        blocks.append(Text(f"ROC curves missing: {missing}"))
    comparisons = group_comparisons(pauc)
    blocks += [Table(pauc_table(pauc, comparisons), "Normalized partial AUC I(α)/α [95% CI] by group, and group differences"),
               Table(sample_sizes(pauc, ["model", "group"] + (["training_window"] if "training_window" in pauc else [])).rename(
                   columns={"training_window": "trained on"}),
                   "Sample sizes (positives and negatives per group) and each model's training window (the evaluation "
                   "window is in the source line)")]
    gaps = gap_rows(comparisons["model"], comparisons["cutoff"] + ", group " + comparisons["group"].astype(str) + " − "
                    + comparisons["reference"].astype(str), comparisons["diff"], comparisons["diff_ci_low"],
                    comparisons["diff_ci_high"], comparisons["margin"], comparisons["verdict"])
    return SectionContent(blocks=blocks, findings=pauc_findings(comparisons), source=inputs.sources.get("partial_auc", ""),
                          verdicts=comparisons["verdict"].tolist(), gaps=gaps)


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
    estimable = pairs["estimate"].notna() & pairs["estimate_back"].notna()
    pairs["p_holm"] = pairs["p_holm"] if "p_holm" in pairs.columns else float("nan")
    pairs["p_decisive"] = pairs["p_holm"].fillna(pairs["p_value"]).where(estimable)
    pairs = with_verdicts(pairs, "xauc", "delta", "delta_ci_low", "delta_ci_high", "p_decisive")
    pairs.loc[~estimable, "verdict"] = NOT_ESTIMABLE
    pairs["verdict"] = pairs["verdict"].map(verdict_kind)
    pairs["status"] = pairs["verdict"].map(verdict_status)
    return sort_by_model(pairs)


def xauc_text(row: pd.Series) -> str:
    """'xAUC(0>1) = 0.339 [...] vs xAUC(1>0) = 0.995 [...], ΔxAUC = -0.656 [...], p < 0.001 (n_pos = ..., n_neg = ...)'."""
    a, b = row["a"], row["b"]
    counts = (f"n_pos = {int(row['n_pos']):,} (group {a}) / {int(row['n_pos_back']):,} (group {b}), "
              f"n_neg = {int(row['n_neg_back']):,} (group {a}) / {int(row['n_neg']):,} (group {b})")
    if row["status"] == "not estimable":
        return f"xAUC between groups {a} and {b} not estimable ({counts})"
    holm = "" if pd.isna(row["p_holm"]) else f", Holm {p_phrase(row['p_holm'])}"
    return contrast_text(row, (f"xAUC({a}>{b})", "estimate"), (f"xAUC({b}>{a})", "estimate_back"), ("ΔxAUC =", "delta"),
                         p_phrase(row["p_value"]) + holm + margin_detail(row), counts) + f": {row['verdict']}"


def gap_verdict_text(verdict: str, a, b, a_lower: bool, delta: str, *, larger, within: str, balanced: str,
                     inconclusive: str, symbol: str) -> str:
    """The headline phrase of a group gap by verdict (`larger(lower, higher)` words the gap beyond δ)."""
    if verdict == LARGER:
        return larger(*((a, b) if a_lower else (b, a)))
    if verdict == WITHIN:
        return within
    if verdict == EQUIVALENT:
        return f"{balanced} between groups {a} and {b}: equivalent within ±{delta} (TOST)"
    return f"{inconclusive} inconclusive: the data cannot tell |{symbol}| > {delta} from none"


def xauc_headline(rows: pd.DataFrame) -> Finding:
    """One finding for the models with the same verdict on a group pair (and the same sign of ΔxAUC)."""
    first, models = rows.iloc[0], list(dict.fromkeys(rows["model"]))
    who = f"model {models[0]}" if len(models) == 1 else f"{len(models)} models ({model_list(models)})"
    a, b, status, verdict = first["a"], first["b"], first["status"], first["verdict"]
    if verdict == NOT_ESTIMABLE:
        return Finding(f"{who}: {xauc_text(first)}", status, verdict=verdict)
    delta = delta_text(rows)
    text = gap_verdict_text(
        verdict, a, b, first["delta"] < 0, delta,
        larger=lambda lower, higher: (f"cross-group ranking unbalanced against group {lower} by more than δ = {delta} "
                                      f"(its relevant items fall below group {higher}'s irrelevant ones more often "
                                      "than the reverse)"),
        within=f"ΔxAUC between groups {a} and {b} significant but within ±{delta} (not a practically relevant imbalance)",
        balanced="xAUC balanced", inconclusive=f"xAUC balance between groups {a} and {b}", symbol="ΔxAUC")
    across = f"; over these models ΔxAUC ranges {rows['delta'].min():+.3f} … {rows['delta'].max():+.3f}" if len(models) > 1 else ""
    return Finding(f"{who}: {text}; {p_bound(rows['p_decisive'], p_status(verdict))}. {models[0]}: {xauc_text(first)}{across}",
                   status, verdict=verdict)


def xauc_findings(pairs: pd.DataFrame) -> list[Finding]:
    findings = [Finding(f"model {r['model']}: {xauc_text(r)}", r["status"], headline=False, verdict=r["verdict"])
                for _, r in pairs.iterrows()]
    sign = np.sign(pairs["delta"]).where(pairs["verdict"] == LARGER, 0)
    for _, rows in pairs.groupby(["a", "b", pairs["verdict"], sign], sort=False):
        findings.append(xauc_headline(rows))
    return findings


def xauc_audit(inputs: ReportInputs) -> SectionContent:
    frame = inputs.stored_table("xauc", XAUC_COLUMNS)
    blocks = [Text(
        "xAUC(a>b) = P(a relevant item of group a is scored above an irrelevant item of group b) (Kallus & Zhou). "
        "If xAUC(a>b) is far below xAUC(b>a), group a's relevant items are ranked under group b's irrelevant ones "
        "more often than the reverse; ΔxAUC = xAUC(a>b) − xAUC(b>a) is tested against 0. " + estimand_note(frame)
        + VERDICT_NOTE)]
    try:
        curves = inputs.stored_table("xroc_curves", ["model", "direction", "fpr", "tpr"])
        blocks.append(Figure("xroc", figures.panels(
            curves, "model", lambda panel, part: figures.draw_curves(panel, part, "fpr", "tpr", None, None, "direction", diagonal=True),
            "FPR (negatives of the second group)", "TPR (positives of the first group)", legend_title="direction"),
            "xROC curves, one panel per model"))
    except StageMissing:
        pass
    pairs = xauc_pairs(frame)
    table = pd.DataFrame({
        "model": pairs["model"], "groups (a, b)": pairs["a"] + ", " + pairs["b"],
        "verdict": pairs["verdict"],
        "ΔxAUC [95% CI]": pairs.apply(lambda r: ci_text(r["delta"], r["delta_ci_low"], r["delta_ci_high"], signed=True), axis=1),
        "δ": pairs["margin"].map(lambda d: "n/a" if pd.isna(d) else f"{d:g}"),
        "xAUC(a>b) [95% CI]": with_ci(pairs, "estimate", "ci_low", "ci_high"),
        "xAUC(b>a) [95% CI]": with_ci(pairs, "estimate_back", "ci_low_back", "ci_high_back"),
        "p": pairs["p_value"].map(p_text),
        **({"Holm p": pairs["p_holm"].map(p_text)} if pairs["p_holm"].notna().any() else {}),
        "TOST p": pairs["p_tost"].map(p_text),
        "positives a / b": _count_pair(pairs["n_pos"], pairs["n_pos_back"]),
        "negatives b / a": _count_pair(pairs["n_neg"], pairs["n_neg_back"]),
    })
    blocks.append(Table(table, "Cross-group AUC (xAUC) both ways, their difference and its verdict against δ"))
    gaps = gap_rows(pairs["model"], "ΔxAUC(" + pairs["a"] + ", " + pairs["b"] + ")", pairs["delta"], pairs["delta_ci_low"],
                    pairs["delta_ci_high"], pairs["margin"], pairs["verdict"])
    return SectionContent(blocks=blocks, findings=xauc_findings(pairs), source=inputs.sources.get("xauc", ""),
                          verdicts=pairs["verdict"].tolist(), gaps=gaps)


def _count_pair(first: pd.Series, second: pd.Series) -> pd.Series:
    return first.map(count_text) + " / " + second.map(count_text)


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
        # below UNCHANGED the change is the engines' rounding (their sums' order differs): not printed as a figure
        within = (f"within-group AUCs unchanged (largest change below {UNCHANGED:.0e})" if change < UNCHANGED else
                  f"within-group AUCs changed by up to {change:.3g} (ties where the transform is flat)")
        moves = [f"xAUC({d}) {estimate_text(x.loc[(baseline, d)], 'estimate')} → {estimate_text(x.loc[(model, d)], 'estimate')}"
                 for (m, d) in x.index if m == baseline and (model, d) in x.index]
        findings.append(Finding(f"{model} vs {baseline}: {within}; " + "; ".join(moves), "info"))
    return findings
