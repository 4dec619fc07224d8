"""The report's λ frontier: per penalty weight λ, the metric the penalty targets (the conditional mutual-information
proxy Î on the training rows), the held-out utility, and the gaps the audit measures on the same rankers (the
normalized partial-AUC gap and ΔxAUC, with their CIs), with a sentence saying which of them the penalty moved.

A gap "moved" when its 95% CIs at the smallest and the largest λ do not overlap; Î has no CI (a training-set
value), so it moved when it fell by more than half. The audited gaps come from the audit's own tables (the
rankers are scored outputs `ranker_<window>_<score>_lam_<λ>`), through the same functions as their sections.
"""
from __future__ import annotations

import re

import pandas as pd

from fair_pipeline.reporting import figures
from fair_pipeline.reporting.audit_sections import PAUC_COLUMNS, XAUC_COLUMNS, group_comparisons, xauc_pairs
from fair_pipeline.reporting.formatting import ci_text, p_text, with_ci
from fair_pipeline.reporting.model import Figure, Finding, ReportInputs, SectionContent, StageMissing, Table, Text

_LAMBDA = re.compile(r"^ranker_.*_lam_([0-9.eE+-]+)$")
TARGET = "Î (penalty target, training rows)"
UTILITY = "utility (held-out AUC)"


def ranker_lambda(model: str) -> float | None:
    """λ of an audited ranker output ('ranker_2026-01-01_probability_lam_0.3' -> 0.3), None for other outputs."""
    found = _LAMBDA.match(str(model))
    try:
        return float(found.group(1)) if found else None
    except ValueError:
        return None


def audited_gaps(inputs: ReportInputs, cutoff: float) -> pd.DataFrame:
    """Long rows (lambda, metric, value, low, high) of the audited rankers: the partial-AUC gap I(cutoff) of each
    group vs the reference and ΔxAUC of each group pair, signed as in their sections; empty without an audit."""
    rows = []
    try:
        pauc = inputs.stored_table("partial_auc", PAUC_COLUMNS)
        comparisons = group_comparisons(pauc)
        if "fpr_high" in comparisons.columns:
            comparisons = comparisons[(comparisons["fpr_high"] - cutoff).abs() < 1e-9]
        for r in comparisons.itertuples():
            rows.append({"model": r.model, "metric": f"{r.cutoff} gap, group {r.group} − {r.reference}",
                         "value": r.diff, "low": r.diff_ci_low, "high": r.diff_ci_high})
        for r in xauc_pairs(inputs.stored_table("xauc", XAUC_COLUMNS)).itertuples():
            rows.append({"model": r.model, "metric": f"ΔxAUC({r.a}, {r.b})", "value": r.delta, "low": r.delta_ci_low,
                         "high": r.delta_ci_high})
    except StageMissing:
        pass
    frame = pd.DataFrame(rows, columns=["model", "metric", "value", "low", "high"])
    frame["lambda"] = frame["model"].map(ranker_lambda)
    return frame[frame["lambda"].notna()].drop(columns="model").sort_values(["metric", "lambda"], kind="stable")


def moved(part: pd.DataFrame) -> bool | None:
    """Whether a metric moved between the smallest and the largest λ (see the module doc); None if unknown."""
    first, last = part.iloc[0], part.iloc[-1]
    if pd.isna(first["value"]) or pd.isna(last["value"]):
        return None
    if pd.isna(first["low"]) or pd.isna(last["low"]):
        return bool(abs(last["value"]) < 0.5 * abs(first["value"]) or abs(last["value"]) > 2 * abs(first["value"]))
    return bool(last["high"] < first["low"] or last["low"] > first["high"])


def movement_finding(long: pd.DataFrame) -> Finding:
    """One sentence: which metrics the penalty moved from the smallest to the largest λ, and which it did not."""
    lams = sorted(long["lambda"].unique())
    moves, still = [], []
    for metric, part in long.groupby("metric", sort=False):
        part = part.sort_values("lambda")
        if len(part) < 2:
            continue
        first, last = part.iloc[0], part.iloc[-1]
        signed = metric not in (TARGET, UTILITY)
        change = (f"{metric} {ci_text(first['value'], first['low'], first['high'], signed=signed)} → "
                  f"{ci_text(last['value'], last['low'], last['high'], signed=signed)}")
        {True: moves, False: still}.get(moved(part), still).append(change)
    span = f"λ = {lams[0]:g} → {lams[-1]:g}"
    if not moves:
        return Finding(f"{span}: the mitigation moves none of the metrics shown (every CI at the largest λ overlaps "
                       f"the one at the smallest): {'; '.join(still)}", "info")
    text = f"{span}: moves {'; '.join(moves)}"
    return Finding(text + (f"; it does not move {'; '.join(still)} (the CIs overlap)" if still else ""), "info")


def lambda_frontier(inputs: ReportInputs) -> SectionContent:
    cols = ["lambda", "utility", "utility_ci_low", "utility_ci_high", "unfairness", "unfairness_ci_low", "unfairness_ci_high"]
    frame = inputs.stored_table("lambda_frontier", cols)
    # λ sorted as a number (never as text: 0.1, 1, 10, 2) and shown as 0.1, 1, 10 (not 1.0, 10.0)
    frame = frame.assign(**{"lambda": pd.to_numeric(frame["lambda"], errors="coerce")}).sort_values("lambda", kind="stable")
    cutoff = float(frame["cutoff"].iloc[0]) if "cutoff" in frame.columns else 0.1
    table = frame[["lambda"]].copy()
    table["lambda"] = frame["lambda"].map(lambda v: "n/a" if pd.isna(v) else f"{v:g}")
    long = [frame.assign(metric=UTILITY, value=frame["utility"], low=frame["utility_ci_low"],
                         high=frame["utility_ci_high"])]
    if "penalty_target" in frame.columns:
        table[TARGET] = frame["penalty_target"].map(lambda v: "n/a" if pd.isna(v) else f"{v:.4f}")
        long.append(frame.assign(metric=TARGET, value=frame["penalty_target"], low=float("nan"), high=float("nan")))
    table["utility [95% CI]"] = with_ci(frame, "utility", "utility_ci_low", "utility_ci_high")
    # the training stage's own gap: unnormalized |I_a − I_b| on its label source (not the audit's normalized effect)
    table[f"training-stage |I({cutoff:g}) gap|, unnormalized [95% CI]"] = with_ci(
        frame, "unfairness", "unfairness_ci_low", "unfairness_ci_high")
    if "unfairness_p_value" in frame.columns:
        table["p (gap = 0)"] = frame["unfairness_p_value"].map(p_text)
    gaps = audited_gaps(inputs, cutoff)
    for metric, part in gaps.groupby("metric", sort=False):
        cells = part.set_index("lambda").apply(lambda r: ci_text(r["value"], r["low"], r["high"], signed=True), axis=1)
        table[f"audited {metric} [95% CI]"] = frame["lambda"].map(cells).fillna("not audited")
    long = pd.concat([*long, gaps], ignore_index=True)[["lambda", "metric", "value", "low", "high"]]
    long = long[long["lambda"].notna()]
    finding = movement_finding(long)
    labels = f" on {frame['label_source'].iloc[0]} labels" if "label_source" in frame.columns else ""
    blocks = [
        Text(f"Rankers retrained with the fairness penalty λ. The penalty targets Î, the conditional mutual-information "
             f"proxy between score and group on the training rows; utility = held-out AUC{labels}; the audit's gaps "
             f"of the same rankers (normalized partial-AUC gap I({cutoff:g}) and ΔxAUC, as in their sections) are "
             "shown per λ with their 95% CIs, so a reader sees which of them the penalty actually moves."),
        Text(f"**{finding.text}.**"),
        Figure("lambda_frontier", figures.panels(long.assign(x=long["lambda"].rank(method="dense") - 1), "metric",
                                                 lambda panel, part: _draw(panel, part, sorted(long["lambda"].unique())),
                                                 "penalty weight λ", "value with 95% CI", columns=2),
               "Per λ: the penalty's target Î, utility and the audited gaps (95% CI; Î is a training value without a CI)"),
        Table(table, "λ trade-off frontier"),
    ]
    return SectionContent(blocks=blocks, findings=[finding], source=inputs.sources.get("lambda_frontier", ""))


def _draw(panel, part: pd.DataFrame, lams: list[float]) -> None:
    panel.x_labels = [f"{v:g}" for v in lams]
    part = part.sort_values("x")
    has_ci = part["low"].notna().any()
    panel.points(part["x"], part["value"], part["low"] if has_ci else None, part["high"] if has_ci else None,
                 connect=True)
    if part["metric"].iloc[0].startswith(("I(", "ΔxAUC")) or " gap" in part["metric"].iloc[0]:
        panel.hline(0.0, colour="#808080", style="solid", width=0.8)
