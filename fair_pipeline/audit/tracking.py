"""One MLflow run per fairness audit (stage `audit`), for people browsing experiments: parameters, headline
metrics and one figure per scored output. The results themselves are the warehouse tables (`audit.store`).

`tracking` is the `MLflowTracking` resource (fair_pipeline.platform.tracking); only its documented run API is used.
"""
from __future__ import annotations

import math

from fair_pipeline.audit.evaluation import OutputAudit
from fair_pipeline.audit.report import audit_figures
from fair_pipeline.platform.tracking import TAG_EVALUATION_WINDOW, TAG_TRAINING_WINDOWS


def headline_metrics(audits: list[OutputAudit]) -> dict[str, float]:
    """Per output: the full-AUC gap between the first two groups and Delta xAUC (estimable ones only)."""
    metrics = {}
    for a in audits:
        pairs = a.report.pairs
        full = pairs[(pairs["cutoff"] == 1.0) & pairs["estimable"]] if len(pairs) else pairs
        if len(full):
            metrics[f"{a.output.name}.auc_gap"] = float(full["diff"].iloc[0])
            metrics[f"{a.output.name}.auc_gap_se"] = float(full["se"].iloc[0])
        if a.report.xauc is not None:
            d = a.report.xauc.deltas
            d = d[d["estimable"]]
            if len(d):
                metrics[f"{a.output.name}.delta_xauc"] = float(d["delta"].iloc[0])
                metrics[f"{a.output.name}.delta_xauc_se"] = float(d["se"].iloc[0])
    return {k: v for k, v in metrics.items() if math.isfinite(v)}


def log_audit(tracking, context, audits: list[OutputAudit], params: dict, window: tuple[str, str],
              title: str = "") -> tuple[str, str, dict[str, str]]:
    """Log the audit as one run; returns the MLflow run id, its UI address and the address of each output's figure
    ({output name: URL}, for the Dagster metadata to link to)."""
    figures = audit_figures(audits, title)
    span = f"{window[0]}..{window[1]}"
    tags = {"fair_pipeline.label_source": params.get("label_source", ""),
            "fair_pipeline.variance": params.get("variance", "conditional"), TAG_EVALUATION_WINDOW: span,
            TAG_TRAINING_WINDOWS: "; ".join(f"{a.output.name}: {a.output.training_window}" for a in audits)}
    run_name = f"fairness audit, {params.get('label_source', '')} labels, evaluated on {span}"
    with tracking.start_run(context, "audit", run_name=run_name, window=window, tags=tags) as run:
        run.log_params(params)
        run.log_metrics(headline_metrics(audits))
        urls = {a.output.name: run.log_figure(figures[f"curves_{a.output.name}"], f"curves_{a.output.name}")
                for a in audits}
        return run.run_id, run.url, urls
