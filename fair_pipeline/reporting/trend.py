"""The report's trend section: each audited group gap per daily partition with its CI, so a reader sees whether a
gap is widening.

The fairness audit stores one row set per partition D (day D evaluated with the models of partition D), so the
trend reads the audit tables of the newest `TREND_PARTITIONS` partitions on or before the report's partition.
Each point is that day's estimate with its own (item-clustered by default) CI; days are separate samples of
traffic, but items recur across days, so neighbouring points are not independent and no slope test is made.
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.reporting import figures
from fair_pipeline.reporting.formatting import ci_text, sort_by_model
from fair_pipeline.reporting.model import Figure, Finding, ReportInputs, SectionContent, StageMissing, Table, Text

TREND_PARTITIONS = 14
# The outputs drawn (the production ranker and the EO transform); the table lists every audited output.
DRAWN_OUTPUTS = ("production", "eo_weighted")
PAIRS = ("marts", "fairness_audit_pairs")
XAUC_DELTAS = ("marts", "fairness_audit_xauc_deltas")


def _day_clause(inputs: ReportInputs) -> tuple[str, dict]:
    if inputs.partition is None:
        return "", {}
    return " AND partition_date <= $day", {"day": inputs.partition}


def _newest(inputs: ReportInputs) -> tuple[str, dict]:
    day, params = _day_clause(inputs)
    return ("partition_date IN (SELECT DISTINCT partition_date FROM marts.fairness_audit_pairs WHERE "
            f"partition_date IS NOT NULL{day} ORDER BY partition_date DESC LIMIT $limit)"), {**params, "limit": TREND_PARTITIONS}


def trend_cutoff(inputs: ReportInputs) -> tuple[float | None, list[float]]:
    """(the smallest audited FPR cutoff with an estimable partial-AUC gap in the trend's partitions, or None;
    the smaller audited cutoffs, estimable on none of them). A small cutoff needs many negative clusters
    (alpha x negative clusters), so on small days the smallest audited cutoff may be estimable nowhere."""
    newest, params = _newest(inputs)
    cutoffs = inputs.sql(f"SELECT cutoff, bool_or(estimable) AS estimable FROM marts.fairness_audit_pairs "
                         f"WHERE {newest} GROUP BY cutoff ORDER BY cutoff", [PAIRS], params)
    usable = cutoffs.loc[cutoffs["estimable"].astype(bool), "cutoff"]
    if usable.empty:
        return None, [float(c) for c in cutoffs["cutoff"]]
    chosen = float(usable.iloc[0])
    return chosen, [float(c) for c in cutoffs["cutoff"] if c < chosen]


def trend_rows(inputs: ReportInputs) -> pd.DataFrame:
    """Long rows (partition_date, scored_output, metric, pair, gap, ci_low, ci_high, margin, verdict) of the newest
    partitions: the normalized partial-AUC gap I(α)/α at the smallest FPR cutoff estimable in them (`trend_cutoff`)
    and ΔxAUC of every group pair, each with the sign and scale its own section shows (partial AUC: the later
    group minus the first, as the ROC section's "group − reference"; ΔxAUC = xAUC(a>b) − xAUC(b>a) with a < b,
    as the xAUC section), so a trend row and its section never disagree."""
    newest, params = _newest(inputs)
    cutoff, _ = trend_cutoff(inputs)
    pauc = inputs.sql(
        "SELECT partition_date, scored_output, 'partial AUC gap I(α)/α at α = ' || cutoff AS metric, group_a, group_b, "
        "coalesce(effect, diff_normalized, diff / cutoff) AS gap, coalesce(effect_ci_low, ci_low / cutoff) AS ci_low, "
        "coalesce(effect_ci_high, ci_high / cutoff) AS ci_high, margin, verdict "
        f"FROM marts.fairness_audit_pairs WHERE estimable AND {newest} AND cutoff = $cutoff",
        [PAIRS], {**params, "cutoff": cutoff})
    try:
        xauc = inputs.sql(
            "SELECT partition_date, scored_output, 'ΔxAUC' AS metric, group_a, group_b, coalesce(effect, delta) AS gap, "
            "coalesce(effect_ci_low, ci_low) AS ci_low, coalesce(effect_ci_high, ci_high) AS ci_high, margin, verdict FROM marts.fairness_audit_xauc_deltas "
            f"WHERE kind = 'xauc' AND estimable AND {newest}", [PAIRS, XAUC_DELTAS], params)
    except StageMissing:
        xauc = pauc.iloc[:0]
    pauc = oriented(pauc, later_first=True)
    xauc = oriented(xauc, later_first=False)
    frame = pd.concat([pauc, xauc], ignore_index=True).drop(columns=["group_a", "group_b"])
    frame["partition_date"] = pd.to_datetime(frame["partition_date"])
    frame = frame.sort_values(["metric", "pair", "partition_date"], kind="stable")
    return sort_by_model(frame, "scored_output").reset_index(drop=True)


def oriented(rows: pd.DataFrame, later_first: bool) -> pd.DataFrame:
    """Each gap between the groups in label order (a < b): 'b − a' with the sign flipped where the audit stored
    a − b (`later_first`, the partial-AUC sections' group − reference), else 'a, b' as stored for a > b swapped."""
    rows = rows.copy()
    a, b = rows["group_a"].astype(str), rows["group_b"].astype(str)
    swap = (a < b) if later_first else (a > b)
    low, high = rows["ci_low"].copy(), rows["ci_high"].copy()
    rows.loc[swap, "gap"] = -rows.loc[swap, "gap"]
    rows.loc[swap, "ci_low"], rows.loc[swap, "ci_high"] = -high[swap], -low[swap]
    first, second = a.where(a < b, b), b.where(a < b, a)
    rows["pair"] = (second + " − " + first) if later_first else (first + ", " + second)
    return rows


def _cutoff_text(cutoff: float | None, smaller: list[float]) -> str:
    listed = ", ".join(f"{c:g}" for c in smaller)
    if cutoff is None:
        return (f" No partial-AUC gap is shown: no audited FPR cutoff ({listed}) is estimable in these partitions "
                "(too few positive or negative clusters per group).")
    text = f" Partial-AUC gaps are at FPR {cutoff:g}, the smallest audited cutoff estimable in these partitions"
    if smaller:
        text += f"; smaller cutoffs ({listed}) are estimable in none of them (too few negative or positive clusters)"
    return text + "."


def _findings(frame: pd.DataFrame) -> list[Finding]:
    """Per drawn output and metric: the newest day's gap against the range seen over the window."""
    out = []
    for (metric, output, pair), part in frame.groupby(["metric", "scored_output", "pair"], sort=False):
        if output not in DRAWN_OUTPUTS or len(part) < 2:
            continue
        last, first = part.iloc[-1], part.iloc[0]
        out.append(Finding(
            f"{output}, {metric} ({pair}): {ci_text(last['gap'], last['ci_low'], last['ci_high'], signed=True)} on "
            f"{last['partition_date'].date()}, {ci_text(first['gap'], first['ci_low'], first['ci_high'], signed=True)} "
            f"on {first['partition_date'].date()} ({len(part)} audited partitions; each CI is that day's own)",
            "info", headline=False))
    return out


def _draw_daily_gaps(panel, part: pd.DataFrame) -> None:
    """One line per output and pair with its CI band, dated ticks (at most ~7) and the zero line."""
    panel.x_dates = True
    figures.draw_curves(panel, part, "partition_date", "gap", "ci_low", "ci_high", "line")
    panel.hline(0.0, colour="#808080", style="solid", width=0.8)


def audit_trend(inputs: ReportInputs) -> SectionContent:
    frame = trend_rows(inputs)
    if frame.empty:
        raise StageMissing("no audited partition yet: materialize the fairness audit for some days")
    days = sorted(frame["partition_date"].dt.date.unique())
    blocks: list = [Text(
        f"Group gaps of each audited daily partition ({len(days)}: {days[0]}..{days[-1]}; at most "
        f"{TREND_PARTITIONS}), each with its own 95% CI. Partition D evaluates day D with the models trained "
        "before D. Days share items, so neighbouring points are correlated; read the bands, not a slope."
        + _cutoff_text(*trend_cutoff(inputs)))]
    if len(days) < 2:
        blocks.append(Text("Only one partition is audited so far: backfill earlier days "
                           "(`fair-pipeline backfill --start ... --end ...`) to see a trend."))
    drawn = frame[frame["scored_output"].isin(DRAWN_OUTPUTS)]
    if len(days) >= 2 and not drawn.empty:
        drawn = drawn.assign(line=drawn["scored_output"] + " " + drawn["pair"])
        svg = figures.panels(drawn, "metric", _draw_daily_gaps, "partition (day evaluated)", "gap with 95% CI",
                             columns=2)
        blocks.append(Figure("audit_trend", svg, "Group gaps per partition with 95% CI bands (production and EO)"))
    table = frame.assign(partition=frame["partition_date"].dt.date.astype(str),
                         gap_ci=[ci_text(g, lo, hi, signed=True) for g, lo, hi in
                                 zip(frame["gap"], frame["ci_low"], frame["ci_high"])],
                         delta=frame["margin"].map(lambda d: "n/a" if pd.isna(d) else f"{d:g}"))
    blocks.append(Table(table[["verdict", "gap_ci", "delta", "metric", "scored_output", "pair", "partition"]].rename(
        columns={"gap_ci": "gap (95% CI)", "delta": "δ", "scored_output": "model"}),
        "Every audited output's gaps per partition (the same effect, sign and verdict as its own section)"))
    return SectionContent(blocks=blocks, findings=_findings(frame), source="marts.fairness_audit_pairs / _xauc_deltas",
                          metrics={"trend_partitions": float(len(days))})
