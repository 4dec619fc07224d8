"""Presenting the fairness audit: its warehouse rows, the fairness report's tables read from them, markdown tables
and figures."""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from fair_pipeline.audit.evaluation import OutputAudit
from fair_pipeline.audit.outputs import PRODUCTION
from fair_pipeline.audit.stats.clustered import ESTIMANDS
from fair_pipeline.audit.store import SCHEMAS, conform
from fair_pipeline.charts import Panel, render

OVERALL = "(all)"
TRANSFORM_NOTE = (
    "A per-group CDF transform (the EO transform) is increasing within each group, so it keeps every group's "
    "ranking of its own items: within-group (truncated) AUCs are unchanged (up to ties where the map is flat). "
    "It moves scores of one group relative to the other, so the cross-group ranking, xAUC(a, b) = "
    "P(positive of a ranked above negative of b), changes."
)


# ----------------------------------------------------------------------------- warehouse rows
def warehouse_tables(audits: list[OutputAudit]) -> dict[str, pd.DataFrame]:
    """{table name: rows} for `audit.store.write_audit`, every frame tagged with its scored_output."""
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in (
        "fairness_audit_groups", "fairness_audit_pairs", "fairness_audit_xauc", "fairness_audit_xauc_deltas",
        "fairness_audit_pairwise", "fairness_audit_curves")}
    for a in audits:
        tag = {"scored_output": a.output.name}
        r = a.report
        parts["fairness_audit_groups"] += [r.groups.assign(is_overall=False, **tag),
                                           r.overall.assign(group=OVERALL, is_overall=True, **tag)]
        parts["fairness_audit_pairs"].append(r.pairs.assign(**tag))
        if r.xauc is not None:
            parts["fairness_audit_xauc"].append(r.xauc.pairs.assign(**tag))
            parts["fairness_audit_xauc_deltas"] += [r.xauc.deltas.assign(kind="xauc", **tag),
                                                    r.xauc.balanced_deltas.assign(**tag)]
            xroc = r.xauc.curves[r.xauc.curves["kind"] == "xroc"]
            parts["fairness_audit_curves"].append(xroc.assign(**tag))
        roc = a.roc_curves.rename(columns={"group": "group_a"}).assign(kind="roc", group_b=a.roc_curves["group"])
        parts["fairness_audit_curves"].append(roc.assign(**tag))
        if a.pairwise is not None:
            parts["fairness_audit_pairwise"].append(pairwise_rows(a).assign(**tag))
    return {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in parts.items()}


def pairwise_rows(a: OutputAudit) -> pd.DataFrame:
    p = a.pairwise
    matrix = p.matrix.rename(columns={"group_better": "group_a", "group_worse": "group_b"})
    matrix["metric"] = "A_{" + matrix["group_a"].astype(str) + ">" + matrix["group_b"].astype(str) + "}"
    matrix["kind"] = "matrix"
    marginals = p.marginals.assign(
        group_a=np.where(p.marginals["role"] == "better", p.marginals["group"], None),
        group_b=np.where(p.marginals["role"] == "worse", p.marginals["group"], None), kind="marginal")
    parity = p.parity.rename(columns={"group_i": "group_a", "group_j": "group_b", "p_i_above_j": "accuracy"})
    parity["metric"] = "parity P(s_a > s_b)"
    parity["kind"] = "parity"
    frames = [matrix, marginals, p.overall.assign(kind="overall"), parity]
    if p.gaps is not None and len(p.gaps):
        gaps = p.gaps.rename(columns={"gap": "accuracy"}).assign(n_pairs=p.gaps["n_pairs_ab"] + p.gaps["n_pairs_ba"])
        gaps["metric"] = "A_{" + gaps["group_a"].astype(str) + ">" + gaps["group_b"].astype(str) + "} - A_{" \
            + gaps["group_b"].astype(str) + ">" + gaps["group_a"].astype(str) + "}"
        gaps["kind"] = "gap"
        frames.append(gaps)
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- the report's tables
def _verdict(row) -> tuple:
    """(margin, p_tost, verdict) of a comparison row (NaN / None for rows of an audit without verdicts)."""
    return getattr(row, "margin", np.nan), getattr(row, "p_tost", np.nan), getattr(row, "verdict", None)


def _of(stored: Mapping[str, pd.DataFrame], name: str, model: str, **where) -> pd.DataFrame:
    frame = stored.get(name, pd.DataFrame())
    if frame.empty:
        return frame
    keep = frame["scored_output"] == model
    for column, value in where.items():
        keep &= frame[column] == value
    return frame[keep]


def _outputs_in_order(stored: Mapping[str, pd.DataFrame]) -> list[str]:
    outputs = stored.get("fairness_audit_outputs", pd.DataFrame())
    audited = outputs[outputs["status"] == "audited"]["scored_output"].tolist() if len(outputs) else []
    groups = stored.get("fairness_audit_groups", pd.DataFrame())
    return list(dict.fromkeys([*audited, *(groups["scored_output"].tolist() if len(groups) else [])]))


def _partial_auc(model: str, g: pd.DataFrame, pairs: pd.DataFrame, output: pd.Series | None) -> pd.DataFrame:
    ref = g["group"].iloc[0]
    vs_ref = {}  # (group, cutoff) -> that group minus the reference: p, Holm p, normalized difference and CI
    for row in pairs.itertuples():
        if ref in (row.group_a, row.group_b) and row.estimable:
            other, sign = (row.group_b, -1.0) if row.group_a == ref else (row.group_a, 1.0)
            bounds = sorted((sign * row.ci_low / row.cutoff, sign * row.ci_high / row.cutoff))
            vs_ref[(other, row.cutoff)] = (row.p_value, getattr(row, "p_holm", np.nan),
                                           sign * row.diff_normalized, *bounds, *_verdict(row))
    tests = pd.DataFrame([vs_ref.get((grp, c), (np.nan,) * 7 + (None,)) for grp, c in zip(g["group"], g["cutoff"])],
                         columns=["p_value", "p_holm", "diff", "diff_ci_low", "diff_ci_high", "margin", "p_tost",
                                  "verdict"], index=g.index)
    return pd.DataFrame({
        "model": model, "group": g["group"], "estimate": g["auc_normalized"],
        "ci_low": g["ci_low"] / g["cutoff"], "ci_high": g["ci_high"] / g["cutoff"],
        "n_pos": g["n_pos"], "n_neg": g["n_neg"], "p_value": tests["p_value"],
        "fpr_low": 0.0, "fpr_high": g["cutoff"], "estimable": g["estimable"], "reference": ref,
        "diff": tests["diff"], "diff_ci_low": tests["diff_ci_low"], "diff_ci_high": tests["diff_ci_high"],
        "p_holm": tests["p_holm"], "margin": tests["margin"], "p_tost": tests["p_tost"], "verdict": tests["verdict"],
        "training_window": None if output is None else output.get("training_window"),
        "held_out": None if output is None else output.get("held_out"),
        "variance_estimand": g["variance_estimand"]})


def _xauc(model: str, pairs: pd.DataFrame, deltas: pd.DataFrame) -> pd.DataFrame:
    delta = {}  # (a, b) -> p, ΔxAUC = xAUC(a, b) - xAUC(b, a) and its CI, for both orders of the pair
    for row in deltas.itertuples():
        more = (getattr(row, "p_holm", np.nan), *_verdict(row))
        delta[(row.group_a, row.group_b)] = (row.p_value, row.delta, row.ci_low, row.ci_high, *more)
        delta[(row.group_b, row.group_a)] = (row.p_value, -row.delta, -row.ci_high, -row.ci_low, *more)
    tests = [delta.get((ga, gb), (np.nan,) * 7 + (None,)) for ga, gb in zip(pairs["group_a"], pairs["group_b"])]
    return pd.DataFrame({
        "model": model, "direction": pairs["group_a"].astype(str) + ">" + pairs["group_b"].astype(str),
        "estimate": pairs["xauc"], "ci_low": pairs["ci_low"], "ci_high": pairs["ci_high"],
        "n_pos": pairs["n_pos_a"], "n_neg": pairs["n_neg_b"], "p_value": [t[0] for t in tests],
        "delta": [t[1] for t in tests], "delta_ci_low": [t[2] for t in tests], "delta_ci_high": [t[3] for t in tests],
        "p_holm": [t[4] for t in tests], "margin": [t[5] for t in tests], "p_tost": [t[6] for t in tests],
        "verdict": [t[7] for t in tests], "variance_estimand": pairs["variance_estimand"]})


def _pairwise(model: str, rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    m = rows[rows["kind"] == "matrix"].sort_values(["group_a", "group_b"])
    matrix = pd.DataFrame({"model": model, "group_a": m["group_a"], "group_b": m["group_b"], "estimate": m["accuracy"],
                           "ci_low": m["ci_low"], "ci_high": m["ci_high"], "n_pairs": m["n_pairs"],
                           "n_queries": m["n_queries"], **_clusters(m)})
    g = rows[rows["kind"] == "gap"].sort_values(["group_a", "group_b"])
    gaps = pd.DataFrame({
        "model": model, "group_a": g["group_a"], "group_b": g["group_b"], "estimate": g["accuracy"],
        "ci_low": g["ci_low"], "ci_high": g["ci_high"], "p_value": g["p_value"], "p_holm": g["p_holm"],
        "margin": g["margin"], "p_tost": g["p_tost"],
        "verdict": g["verdict"].where(g["estimable"].astype(bool), "not estimable"), "n_pairs": g["n_pairs"],
        "n_queries": g["n_queries"], **_clusters(g)})
    return matrix, gaps


def _clusters(rows: pd.DataFrame) -> dict:
    """Which estimand the CIs are for, the items behind them and their effective clusters (tables logged before
    these columns existed were query-clustered)."""
    missing = pd.Series(np.nan, index=rows.index)
    estimand = rows["variance_estimand"] if "variance_estimand" in rows else missing
    return {"variance_estimand": estimand.fillna("query_clustered"),
            "n_items": rows["n_items"] if "n_items" in rows else missing, "df": rows["df"] if "df" in rows else missing}


def report_tables(stored: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The fairness report's audit tables (partial_auc, roc_curves, xauc, xroc_curves, pairwise_accuracy,
    pairwise_gaps; see fair_pipeline.reporting.sections) from one partition's audit tables ({table name: rows},
    as `warehouse_tables` makes and `audit.store.load_audit` reads them). `model` = the scored output (partial_auc
    also says what it was trained on: `training_window`, `held_out`). Not-estimable figures are NaN; partial AUCs
    are normalized (I(a)/a) and their p-value tests the difference from the `reference` (first) group (`diff` =
    group − reference, normalized, with its 95% CI and Holm p); xAUC rows carry `delta` = xAUC(a, b) − xAUC(b, a)
    with its 95% CI, which their p-value tests. Every comparison also carries the practical margin δ (`margin`),
    the TOST p-value (`p_tost`) and the verdict (`audit.stats.equivalence`); the sign of a difference does not
    change them."""
    stored = {name: conform(name, frame) for name, frame in stored.items() if name in SCHEMAS}  # every column
    out: dict[str, list[pd.DataFrame]] = {k: [] for k in ("partial_auc", "roc_curves", "xauc", "xroc_curves",
                                                           "pairwise_accuracy", "pairwise_gaps")}
    outputs = stored.get("fairness_audit_outputs", pd.DataFrame())
    for model in _outputs_in_order(stored):
        g = _of(stored, "fairness_audit_groups", model, is_overall=False).sort_values(["group", "cutoff"])
        if g.empty:
            continue
        g = g.reset_index(drop=True)
        described = outputs[outputs["scored_output"] == model] if len(outputs) else outputs
        output = described.iloc[0] if len(described) else None
        out["partial_auc"].append(_partial_auc(model, g, _of(stored, "fairness_audit_pairs", model), output))
        roc = _of(stored, "fairness_audit_curves", model, kind="roc").sort_values(["group_a", "fpr", "tpr"])
        if len(roc):
            out["roc_curves"].append(roc.rename(columns={"group_a": "group"})[
                ["group", "fpr", "tpr", "tpr_ci_low", "tpr_ci_high"]].assign(model=model))
        pairs = _of(stored, "fairness_audit_xauc", model).sort_values(["group_a", "group_b"])
        if len(pairs):
            out["xauc"].append(_xauc(model, pairs, _of(stored, "fairness_audit_xauc_deltas", model, kind="xauc")))
            c = _of(stored, "fairness_audit_curves", model, kind="xroc").sort_values(["group_a", "group_b", "fpr", "tpr"])
            out["xroc_curves"].append(pd.DataFrame({
                "model": model, "direction": c["group_a"].astype(str) + ">" + c["group_b"].astype(str),
                "fpr": c["fpr"], "tpr": c["tpr"]}))
        pairwise = _of(stored, "fairness_audit_pairwise", model)
        if len(pairwise):
            matrix, gaps = _pairwise(model, pairwise)
            out["pairwise_accuracy"].append(matrix)
            if len(gaps):
                out["pairwise_gaps"].append(gaps)
    return {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in out.items()}


# ----------------------------------------------------------------------------- markdown
def _ci(est, lo, hi, digits: int = 3) -> str:
    if est is None or not math.isfinite(est):
        return "n/a (not estimable)"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _p(p) -> str:
    return "n/a" if p is None or not math.isfinite(p) else (f"{p:.2g}" if p >= 1e-4 else "<1e-4")


def groups_markdown(a: OutputAudit) -> str:
    g = a.report.groups
    rows = [f"| {r.group} | {r.cutoff:g} | {r.n_pos} | {r.n_neg} | "
            f"{_ci(r.auc_normalized, r.ci_low / r.cutoff, r.ci_high / r.cutoff)} | "
            f"{'' if r.estimable else r.note} |" for r in g.itertuples()]
    return "\n".join(["| group | FPR cutoff a | n_pos | n_neg | I(a)/a [95% CI] | note |", "|---|---|---|---|---|---|", *rows])


def pairs_markdown(a: OutputAudit) -> str:
    p = a.report.pairs
    if p.empty:
        return "one group: no comparisons"
    holm = "p_holm" in p.columns
    head = ("| a | b | FPR cutoff | (I_a - I_b)/cutoff [95% CI] | z | p |" + (" Holm p |" if holm else "")
            + " δ | TOST p | verdict |")
    rows = []
    for r in p.itertuples():
        cells = [str(r.group_a), str(r.group_b), f"{r.cutoff:g}",
                 _ci(r.diff_normalized, r.ci_low / r.cutoff, r.ci_high / r.cutoff) if r.estimable else "n/a (not estimable)",
                 f"{r.z:.2f}" if r.estimable else "n/a", _p(r.p_value) if r.estimable else "n/a"]
        if holm:
            cells.append(_p(r.p_holm) if r.estimable else "n/a")
        cells += _verdict_cells(r)
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, "|" + "---|" * (10 if holm else 9), *rows])


def _verdict_cells(r) -> list[str]:
    margin, p_tost, verdict = _verdict(r)
    return ["n/a" if margin is None or not math.isfinite(margin) else f"{margin:g}", _p(p_tost), verdict or "n/a"]


def xauc_markdown(a: OutputAudit) -> str:
    x = a.report.xauc
    if x is None:
        return "one group: no xAUC"
    rows = [f"| {r.group_a} | {r.group_b} | {r.n_pos_a} | {r.n_neg_b} | {_ci(r.xauc, r.ci_low, r.ci_high)} |"
            for r in x.pairs.itertuples()]
    rows += ["", "| a | b | ΔxAUC = xAUC(a,b) - xAUC(b,a) [95% CI] | p | δ | TOST p | verdict |",
             "|---|---|---|---|---|---|---|"]
    rows += [f"| {r.group_a} | {r.group_b} | {_ci(r.delta, r.ci_low, r.ci_high)} | {_p(r.p_value)} | "
             + " | ".join(_verdict_cells(r)) + " |" for r in x.deltas.itertuples()]
    return "\n".join(["| a (positives) | b (negatives) | n_pos(a) | n_neg(b) | xAUC(a, b) [95% CI] |",
                      "|---|---|---|---|---|", *rows])


def _count(row, name: str) -> str:
    value = getattr(row, name, None)
    return "n/a" if value is None or pd.isna(value) else f"{int(value)}"


def _effective(row) -> str:
    df = getattr(row, "df", None)
    return "n/a" if df is None or pd.isna(df) else f"{df:.1f}"


def pairwise_markdown(a: OutputAudit) -> str:
    if a.pairwise is None:
        return f"pairwise accuracies: {a.pairwise_note}"
    rows = [f"| {r.group_better} | {r.group_worse} | {_ci(r.accuracy, r.ci_low, r.ci_high)} | {r.n_pairs:.0f} | "
            f"{_count(r, 'n_items')} | {r.n_queries} | {_effective(r)} |" for r in a.pairwise.matrix.itertuples()]
    o = a.pairwise.overall.iloc[0]
    lines = [f"Within-query pairwise accuracy A_(better>worse), {a.pairwise_note}; "
             f"{ESTIMANDS.get(o.variance_estimand, o.variance_estimand)}:", "",
             "| better item's group | worse item's group | accuracy [95% CI] | pairs | items | queries | effective clusters |",
             "|---|---|---|---|---|---|---|", *rows,
             f"| all | all | {_ci(o.accuracy, o.ci_low, o.ci_high)} | {o.n_pairs:.0f} | {_count(o, 'n_items')} | {o.n_queries} "
             f"| {_effective(o)} |"]
    g = a.pairwise.gaps
    if g is not None and len(g):
        lines += ["", "| a | b | A_(a>b) - A_(b>a) [95% CI] | p | δ | TOST p | verdict |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r.group_a} | {r.group_b} | {_ci(r.gap, r.ci_low, r.ci_high)} | {_p(r.p_value)} | "
                  + " | ".join(_verdict_cells(r)) + " |" for r in g.itertuples()]
    return "\n".join(lines)


def transform_markdown(audits: list[OutputAudit]) -> str | None:
    """Production vs each within-group-monotone output: within-group AUC (same) and xAUC (moves)."""
    base = next((a for a in audits if a.output.name == PRODUCTION), None)
    others = [a for a in audits if a.output.monotone_within_group]
    if base is None or not others:
        return None
    lines = [TRANSFORM_NOTE, "", "| output | statistic | production | transformed | change |", "|---|---|---|---|---|"]
    full = lambda a: a.report.groups[a.report.groups["cutoff"] == 1.0].set_index("group")  # noqa: E731
    for other in others:
        b, o = full(base), full(other)
        for group in b.index.intersection(o.index):
            before, after = b.at[group, "auc"], o.at[group, "auc"]
            lines.append(f"| {other.output.name} | AUC within group {group} | {_ci(before, b.at[group, 'ci_low'], b.at[group, 'ci_high'])} "
                         f"| {_ci(after, o.at[group, 'ci_low'], o.at[group, 'ci_high'])} | {after - before:+.2e} |")
        if base.report.xauc is not None and other.report.xauc is not None:
            bx = base.report.xauc.pairs.set_index(["group_a", "group_b"])
            ox = other.report.xauc.pairs.set_index(["group_a", "group_b"])
            for key in bx.index.intersection(ox.index):
                before, after = bx.at[key, "xauc"], ox.at[key, "xauc"]
                lines.append(f"| {other.output.name} | xAUC({key[0]}, {key[1]}) | {_ci(before, bx.at[key, 'ci_low'], bx.at[key, 'ci_high'])} "
                             f"| {_ci(after, ox.at[key, 'ci_low'], ox.at[key, 'ci_high'])} | {after - before:+.3f} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures
def audit_figure(a: OutputAudit, title: str) -> bytes:
    """Left: ROC per group with its pointwise 95% band; right: xROC curves (SVG)."""
    roc = Panel("ROC per group, pointwise 95% band", "false positive rate", "true positive rate", xlim=(0, 1), ylim=(0, 1))
    for group, curve in a.roc_curves.groupby("group", sort=False):
        series = f"group {group} (n+={curve['n_pos'].iloc[0]}, n-={curve['n_neg'].iloc[0]})"
        roc.band(curve["fpr"], curve["tpr_ci_low"], curve["tpr_ci_high"], series=series)
        roc.line(curve["fpr"], curve["tpr"], series=series, width=1.3)
    xroc = Panel("xROC: TPR of one group's positives vs FPR of the other's negatives", "false positive rate",
                 "true positive rate", xlim=(0, 1), ylim=(0, 1))
    if a.report.xauc is not None:
        curves = a.report.xauc.curves[a.report.xauc.curves["kind"] == "xroc"]
        for (ga, gb), curve in curves.groupby(["group_a", "group_b"], sort=False):
            xroc.line(curve["fpr"], curve["tpr"], series=f"xROC({ga}, {gb}): + of {ga} vs - of {gb}", width=1.3)
    roc.diagonal()
    xroc.diagonal()
    return render([roc, xroc], 2, panel_size=(330.0, 260.0), title=title)


def audit_figures(audits: list[OutputAudit], title: str = "") -> dict[str, bytes]:
    """One figure per scored output ({`curves_<output>`: SVG bytes}: ROC with its band, xROC)."""
    return {f"curves_{a.output.name}": audit_figure(a, f"{a.output.name}{', ' + title if title else ''}") for a in audits}


def _cell(label) -> str:
    return str(label).replace("|", "\\|")


def exposure_markdown(tables: dict, note: str = "") -> str:
    """Per ranking (the logged one, then each candidate re-ranking the logged requests): exposure / merit per group
    and each group's ratio to the reference with its verdict; `note` names what was not computed."""
    groups, pairs = tables.get("fairness_audit_exposure_groups"), tables.get("fairness_audit_exposure_pairs")
    if groups is None or groups.empty:
        return note or "exposure parity not computed"
    lines = []
    for ranking, rows in groups.groupby("ranking", sort=False):
        lines += [f"**{rows['ranking'].iloc[0]}**; {rows['variance_estimand'].iloc[0]}; examination: "
                  f"{rows['examination'].iloc[0]}", "",
                  "| group | impressions | clicks | items | exposure | merit | exposure / merit [95% CI] | note |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows.itertuples():
            lines.append(f"| {_cell(r.group)} | {r.n} | {r.clicks} | {getattr(r, 'items', '')} | {r.exposure:.4f} | "
                         f"{r.merit:.4f} | {_ci(r.exposure_over_merit, r.ci_low, r.ci_high)} | {_cell(r.note)} |")
        lines += ["", "| group / reference | ratio [95% CI] | p | Holm p | δ (log) | verdict |", "|---|---|---|---|---|---|"]
        for r in pairs[pairs["ranking"] == ranking].itertuples():
            lines.append(f"| {_cell(r.group)} / {_cell(r.reference)} | {_ci(r.ratio, r.ci_low, r.ci_high)} | "
                         f"{_p(r.p_value)} | {_p(r.p_holm)} | {r.margin:.3f} | {r.verdict} |")
        lines.append("")
    return "\n".join(lines + ([note] if note else []))
