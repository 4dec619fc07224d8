"""The report's sections. Each reads one stage's output and turns it into tables, figures and findings.

Every section reads the warehouse: the marts by SQL, and each stage's store tables of the report's partition
as the report tables below (`ReportInputs.stored_table`; `reporting.stored` says which store tables make which).
The table contracts (name: required columns; optional columns in brackets) are:

    position_bias_curve: position, estimate, ci_low, ci_high [method, n_impressions, chosen, truncated]
    eo_transform_cdf:    group, score, cdf [cdf_ci_low, cdf_ci_high]
    exposure_merit:      ranking ("before"/"after"), group, exposure, exposure_ci_low, exposure_ci_high,
                         merit, merit_ci_low, merit_ci_high, n [p_value, exposure_over_merit(_se), simulation]
    eo_evaluation_summary: method, exposure_over_merit_ratio, exposure_over_merit_ratio_se  (optional companion)
    roc_curves:          model, group, fpr, tpr, tpr_ci_low, tpr_ci_high
    partial_auc:         model, group, estimate, ci_low, ci_high, n_pos, n_neg, p_value [fpr_low, fpr_high,
                         reference, diff, diff_ci_low, diff_ci_high, p_holm, margin, p_tost, verdict, training_window]
    xauc:                model, direction ("a>b"), estimate, ci_low, ci_high, n_pos, n_neg, p_value
                         [delta, delta_ci_low, delta_ci_high, p_holm, margin, p_tost, verdict]

(`verdict`: a gap against its practical margin δ, `audit.stats.equivalence.VERDICTS`; a table without it gets
its verdict from diff / delta, their CI and p with the default δ.)
    xroc_curves:         model, direction, fpr, tpr                      (optional companion of xauc)
    pairwise_accuracy:   model, group_a, group_b, estimate, ci_low, ci_high, n_pairs [p_value, n_items, n_queries, df,
                         variance_estimand]
    pairwise_gaps:       model, group_a, group_b, estimate (A(a>b) − A(b>a)), ci_low, ci_high, p_value
                         [p_holm, margin, p_tost, verdict, n_pairs, n_items, n_queries, df, variance_estimand]
                         (optional companion of pairwise_accuracy)
    lambda_frontier:     lambda, utility, utility_ci_low, utility_ci_high, unfairness, unfairness_ci_low,
                         unfairness_ci_high [unfairness_p_value, cutoff, label_source, penalty_target]
    model_ranking:       rank, model [cost, ci_low, ci_high: shown as cost with CI; diff_vs_winner, diff_ci_low,
                         diff_ci_high, diff_p, diff_df, diff_disagreeing, paired_clusters, paired_rows: the paired difference vs the winner
                         (empty with exposure_weight > 0: the note says why);
                         tpr[g], tnr[g], error_part, violation_part, min_group_count, champion_version (of
                         registered_model), reason;
                         other columns without cost]
    elicited_metric:     oracle, parameter, elicited [truth, n_queries]   (optional companion of model_ranking)

A not-estimable figure is NaN (never 0); p_value is NaN where no test applies (e.g. the reference
group). A stage owner who needs a different presentation replaces the builder: `SECTIONS` is a list of
`SectionSpec(key, title, stage, build)` with `build(inputs: ReportInputs) -> SectionContent`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.reporting import audit_sections, cell_sections, figures, frontier, pairwise, selection, trend
from fair_pipeline.reporting.eo_sections import eo_transform, exposure_merit
from fair_pipeline.reporting.exposure_section import logged_exposure
from fair_pipeline.reporting.formatting import (
    ci_text,
    count_text,
    p_phrase,
    with_ci,
)
from fair_pipeline.reporting.model import (
    ALPHA,
    Figure,
    Finding,
    ReportInputs,
    SectionContent,
    SectionSpec,
    StageMissing,
    Table,
    Text,
)
from fair_pipeline.reporting.proportions import two_proportion_test, wilson_interval
from fair_pipeline.reporting.window_days import days_read, window_days_section


# ---------------------------------------------------------------- report-level notes (the lead wires them in)
GROUP_COLUMN_NOTE = (
    "Groups are the values of the protected-attribute column `group_id` of the item catalogue (`landing/items/date=D/*.parquet`, the delivery that holds on the report's day; in simulated "
    "logs the simulator's C, with P(C = 1) = p_group; for Open Bandit a binarized item feature). Name them with "
    "$FAIR_PIPELINE_GROUP_LABELS, e.g. `0=group A,1=group B`.")


def group_note(labels: dict[str, str]) -> Text:
    """What the group values in every table and figure mean: the configured labels (settings.group_labels()),
    else what the group column is."""
    if not labels:
        return Text(GROUP_COLUMN_NOTE)
    named = "; ".join(f"`{value}` = {label}" for value, label in labels.items())
    return Text(f"Groups (column `group_id` of the items landing file): {named}.")


# ---------------------------------------------------------------- stages with DuckDB marts (built today)
def data_volume(inputs: ReportInputs) -> SectionContent:
    where, params, window = days_read(inputs)
    volume = inputs.mart_sql(
        "SELECT CAST(partition_date AS VARCHAR) AS partition, source, accepted_rows, clicks, rejected_rows "
        f"FROM marts.daily_volume{where} ORDER BY partition_date, source",
        [("marts", "daily_volume")], params,
    )
    if volume.empty:
        raise StageMissing(f"marts.daily_volume has no rows for {window}: no partition has been ingested")
    by_partition = inputs.mart_sql(
        "SELECT CAST(partition_date AS VARCHAR) AS partition, source, reason, CAST(sum(rejected_rows) AS BIGINT) AS rejected_rows "
        f"FROM staging.stg_quarantine{where} GROUP BY ALL ORDER BY partition, source, reason",
        [("staging", "stg_quarantine")], params,
    )
    reasons = (by_partition.groupby(["source", "reason"], as_index=False)
               .agg(rejected_rows=("rejected_rows", "sum"), partitions=("partition", "nunique"))
               .sort_values("rejected_rows", ascending=False, kind="stable"))
    per_day = volume.pivot_table(index="partition", columns="source", values=["accepted_rows", "rejected_rows"], aggfunc="sum")
    per_day.columns = [f"{source} {what.replace('_rows', '')}" for what, source in per_day.columns]
    per_day = per_day.reset_index()
    accepted, rejected = int(volume["accepted_rows"].sum()), int(volume["rejected_rows"].sum())
    share = rejected / (accepted + rejected) if accepted + rejected else float("nan")
    findings = [
        Finding(
            f"{accepted:,} impressions accepted over {volume['partition'].nunique()} partition(s); "
            f"{rejected:,} rows ({share:.3%}) quarantined ({window})",
            "info",
        )
    ]
    if len(reasons):
        top = reasons.iloc[0]
        findings.append(Finding(f"most quarantined rows: {top['reason']} ({int(top['rejected_rows']):,} rows, {top['source']})", "info"))
    blocks = [
        Table(per_day, "Accepted and quarantined rows per partition and source"),
        Figure(
            "data_volume",
            figures.stacked_bars(per_day, "partition", [c for c in per_day.columns if c != "partition"], "rows"),
            "Rows per partition (accepted and quarantined, by source)",
        ),
    ]
    if len(reasons):
        per_reason = by_partition.pivot_table(index="partition", columns=["source", "reason"], values="rejected_rows",
                                              aggfunc="sum", fill_value=0)
        per_reason.columns = [f"{source}: {reason}" for source, reason in per_reason.columns]
        blocks += [Table(reasons, f"Quarantine reasons ({window})"),
                   Table(per_reason.reset_index(), "Quarantined rows by partition and reason (partitions with none are left out)")]
    else:
        blocks.append(Text("No row has been quarantined."))
    return SectionContent(
        blocks=blocks,
        findings=findings,
        metrics={"accepted_rows": accepted, "rejected_rows": rejected, "rejected_share": share},
        source=f"marts.daily_volume, staging.stg_quarantine ({window})",
    )


def ctr_by_position(inputs: ReportInputs) -> SectionContent:
    where, params, window = days_read(inputs)
    frame = inputs.mart_sql(
        "SELECT policy, position, CAST(sum(impressions) AS BIGINT) AS impressions, CAST(sum(clicks) AS BIGINT) AS clicks "
        f"FROM marts.daily_ctr_by_position{where} GROUP BY ALL ORDER BY policy, position",
        [("marts", "daily_ctr_by_position")], params,
    )
    if frame.empty:
        raise StageMissing("marts.daily_ctr_by_position is empty")
    frame["ctr"] = frame["clicks"] / frame["impressions"]
    frame["ci_low"], frame["ci_high"] = wilson_interval(frame["clicks"], frame["impressions"])
    frame["cell"] = with_ci(frame, "ctr", "ci_low", "ci_high", 4) + frame["impressions"].map(" (n = {:,})".format)
    table = frame.pivot(index="position", columns="policy", values="cell").fillna("no impressions").reset_index()
    table.columns.name = None
    findings = []
    shuffle = frame[frame["policy"] == "shuffle"].sort_values("position")
    if len(shuffle) >= 2:
        top, bottom = shuffle.iloc[0], shuffle.iloc[-1]
        diff, p = two_proportion_test(top["clicks"], top["impressions"], bottom["clicks"], bottom["impressions"])
        label = (
            f"under shuffled (randomized) traffic, CTR at position {int(top['position'])} minus position "
            f"{int(bottom['position'])} = {diff:+.4f} (n = {int(top['impressions']):,} / {int(bottom['impressions']):,})"
        )
        if np.isnan(p):
            findings.append(Finding(f"{label}: not estimable", "not estimable"))
        else:
            status = "significant" if p < ALPHA else "not significant"
            findings.append(Finding(f"{label}; position effect {p_phrase(p)}", status))
    return SectionContent(
        blocks=[
            Text("Click-through rate by displayed position with Wilson 95% intervals. Under `shuffle` traffic the "
                 "position is randomized, so the CTR curve's shape reflects position bias alone."),
            Figure("ctr_by_position", figures.points_with_errors(frame, "position", "ctr", "ci_low", "ci_high", "policy",
                                                                  "position", "CTR"), "CTR by position and policy (95% CI)"),
            Table(table, f"CTR [95% CI] (impressions) by position and policy, {window}"),
        ],
        findings=findings,
        metrics={f"ctr_{r.policy}_pos{int(r.position)}": float(r.ctr) for r in frame.itertuples() if r.position == 1},
        source="marts.daily_ctr_by_position",
    )


# ---------------------------------------------------------------- stages with store tables
def truth_comparison(curve: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Per method, over the estimable positions it does not truncate: CI coverage of the simulated w_j and the
    largest error (beyond the truncation T a chained estimator assumes w_j = w_T: a model choice, not an error)."""
    rows = []
    for method, part in curve.merge(truth, on="position").groupby("method", sort=False):
        part = part[part["estimate"].notna() & ~part.get("truncated", pd.Series(False, index=part.index)).astype(bool)]
        error = (part["estimate"] - part["weight"]).abs()
        covered = (part["ci_low"] <= part["weight"]) & (part["weight"] <= part["ci_high"])
        rows.append({"method": method, "positions compared": len(part), "CI covers truth": int(covered.sum()),
                     "max |ŵ − w|": float(error.max()) if len(part) else float("nan"),
                     "at position": int(part.loc[error.idxmax(), "position"]) if len(part) else None})
    return pd.DataFrame(rows)


# Positions whose chosen weight is a key figure (Dagster metadata, the report's MLflow run), with the last one;
# the full curve is in the section's table.
KEY_POSITIONS = (1, 2, 5, 10, 20)


def chosen_method(curve: pd.DataFrame) -> str:
    """The curve later stages use (flag `chosen`), else the first method logged."""
    flagged = curve.loc[curve["chosen"].astype(bool), "method"] if "chosen" in curve.columns else pd.Series([], dtype=str)
    return str(flagged.iloc[0] if len(flagged) else curve["method"].iloc[0])


def extrapolated(curve: pd.DataFrame) -> pd.Series:
    """Rows beyond the estimable range: positions past the truncation T, where a chained estimator carries w_T on
    (an assumption, not an estimate)."""
    if "truncated" not in curve.columns:
        return pd.Series(False, index=curve.index)
    return curve["truncated"].astype("boolean").fillna(False).astype(bool)


def position_bias(inputs: ReportInputs) -> SectionContent:
    curve = inputs.stored_table("position_bias_curve", ["position", "estimate", "ci_low", "ci_high"])
    if "method" not in curve.columns:
        curve = curve.assign(method="estimate")
    beyond = extrapolated(curve)
    chosen = chosen_method(curve)
    chosen_curve = curve[(curve["method"] == chosen) & ~beyond].sort_values("position")
    truth = inputs.truth("bias_curve")
    shown = curve[curve["method"].isin([chosen, "randomized", "naive"]) & ~beyond]
    cells = with_ci(curve, "estimate", "ci_low", "ci_high").where(~beyond, "extrapolated (w_T carried on)")
    table = curve.assign(cell=cells).pivot(index="position", columns="method", values="cell")
    table = table[[chosen, *[m for m in table.columns if m != chosen]]].rename(columns={chosen: f"{chosen} (chosen)"}).reset_index()
    table.columns.name = None
    if "n_impressions" in curve.columns:
        counts = curve[curve["method"] == chosen].set_index("position")["n_impressions"]
        table["impressions (chosen)"] = table["position"].map(counts).map(count_text)
    cut = curve.loc[beyond & (curve["method"] == chosen), "position"]
    limit = (f" Beyond position {int(cut.min()) - 1} the `{chosen}` curve is not estimated (too few clicks to chain "
             "further): those positions carry the last estimate on, are marked extrapolated in the table and are not "
             "drawn." if len(cut) else "")
    blocks = [
        Text(f"Examination probability w_j = P(click at position j | relevant) relative to the top slot, with 95% CIs. "
             f"Later stages (EO transform weights 1/ŵ, ranker training) use the `{chosen}` curve; the others are shown "
             "for comparison (`randomized` uses shuffled traffic; `naive` ignores that better items sit higher)." + limit),
        Figure("position_bias", figures.curves_with_bands(shown, "position", "estimate", "ci_low", "ci_high", "method",
                                                          "position", "examination weight w",
                                                          truth.rename(columns={"weight": "estimate"}) if truth is not None else None),
               "Position-bias curves with 95% CI over the estimated positions"
               + (" and the simulator's truth (dashed)" if truth is not None else "")),
    ]
    findings = []
    if truth is not None:
        table["true w (simulated)"] = table["position"].map(truth.set_index("position")["weight"]).round(4)
        comparison = truth_comparison(curve, truth)
        blocks.append(Table(comparison.round(4), "Estimates vs the simulator's truth (evaluation only; no estimator reads it)"))
        for row in comparison.itertuples(index=False):
            findings.append(Finding(
                f"{row.method}{' (chosen)' if row.method == chosen else ''}: simulated truth inside the 95% CI at "
                f"{row[2]} of {row[1]} estimated positions; max |ŵ − w| = {row[3]:.4f} at position {row[4]}",
                "info", headline=row.method in (chosen, "randomized")))
    blocks.append(Table(table, "ŵ_j [95% CI] by position and method"))
    if chosen_curve.empty:
        findings.append(Finding(f"examination weights of the {chosen} curve: not estimable at any position", "not estimable"))
        last = None
    else:
        last = chosen_curve.iloc[-1]
        findings.append(last_position_finding(last, chosen))
    return SectionContent(
        blocks=blocks,
        findings=findings,
        metrics={f"w_pos{int(r.position)}": float(r.estimate) for r in chosen_curve.itertuples()
                 if not pd.isna(r.estimate) and (r.position in KEY_POSITIONS or r.position == last["position"])},
        source=inputs.sources.get("position_bias_curve", ""),
    )


def last_position_finding(last: pd.Series, chosen: str) -> Finding:
    """The headline: the weight at the last position the curve estimates (never an extrapolated one)."""
    where = f"position {int(last['position'])} ({chosen}, the last estimated position)"
    if pd.isna(last["estimate"]):
        return Finding(f"examination weight at {where}: not estimable", "not estimable")
    counts = f"; n = {count_text(last['n_impressions'])} impressions" if "n_impressions" in last else ""
    status = "significant" if last["ci_high"] < 1 else "not significant"
    return Finding(f"examination weight at {where} = {ci_text(last['estimate'], last['ci_low'], last['ci_high'])} "
                   f"relative to the top slot ({'the CI excludes 1' if status == 'significant' else 'the CI includes 1'}{counts})",
                   status)


SECTIONS: list[SectionSpec] = [
    SectionSpec("window_days", "Days this partition read", "ingestion", window_days_section),
    SectionSpec("data_volume", "Data volume and quarantine", "ingestion", data_volume),
    SectionSpec("ctr_by_position", "Click-through rate by position", "staging", ctr_by_position),
    SectionSpec("position_bias", "Position-bias curve", "position_bias", position_bias),
    SectionSpec("eo_transform", "Per-group CDF transforms", "eo_transform", eo_transform),
    SectionSpec("exposure_merit", "Exposure and merit, before and after", "eo_transform", exposure_merit),
    SectionSpec("logged_exposure", "Exposure parity of the logged ranking (from the logs)", "audit", logged_exposure),
    SectionSpec("roc", "ROC curves and partial AUC by group", "audit", audit_sections.roc_audit),
    SectionSpec("xauc", "xROC / xAUC", "audit", audit_sections.xauc_audit),
    SectionSpec("pairwise", "Pairwise accuracy matrices", "audit", pairwise.pairwise_accuracy),
    SectionSpec("audit_by_cells", "Partial AUC, xAUC and pairwise accuracy by protected attribute and crossed cells",
                "audit", cell_sections.audit_by_cells),
    SectionSpec("audit_trend", "Audit trend over daily partitions", "audit", trend.audit_trend),
    SectionSpec("lambda_frontier", "λ trade-off frontier", "training", frontier.lambda_frontier),
    SectionSpec("model_selection", "Model selection", "selection", selection.model_selection),
]


def register_section(spec: SectionSpec, after: str | None = None) -> None:
    """Replace the section with the same key, or add it (after section `after`, else at the end).

    For a stage owner whose output needs a presentation the default builder cannot give:
        register_section(SectionSpec("position_bias", "Position-bias curve", "position_bias", my_builder))
    """
    keys = [s.key for s in SECTIONS]
    if spec.key in keys:
        SECTIONS[keys.index(spec.key)] = spec
    elif after is not None:
        if after not in keys:
            raise ValueError(f"no report section {after!r} to insert after; sections are {keys}")
        SECTIONS.insert(keys.index(after) + 1, spec)
    else:
        SECTIONS.append(spec)
