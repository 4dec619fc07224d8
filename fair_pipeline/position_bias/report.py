"""Presenting position-bias curves: a markdown table and an SVG figure (CI bands, optional truth)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from fair_pipeline.charts import Panel, render
from fair_pipeline.position_bias.aggregates import require_columns


def _fmt(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.4f}"


def curve_markdown(curve: pd.DataFrame, truth: np.ndarray | None = None, max_rows: int | None = None) -> str:
    """Markdown table: position, ŵ, 95% CI, SE, impressions, clicks (and the true w_j when given).

    NaN weights print as `n/a (not estimable)`; truncated positions are marked."""
    require_columns(curve, ["position", "weight", "ci_low", "ci_high", "se", "impressions", "clicks"], "curve")
    level = curve.attrs.get("level", 0.95)
    header = ["position", "weight", f"{level:.0%} CI", "SE", "impressions", "clicks"]
    if truth is not None:
        header.append("true w")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = curve if max_rows is None else curve.head(max_rows)
    truncated = rows["truncated"] if "truncated" in rows.columns else pd.Series(False, index=rows.index)
    for (_, row), cut in zip(rows.iterrows(), truncated):
        estimable = math.isfinite(row["weight"])
        weight = _fmt(row["weight"]) + (" (truncated)" if cut and estimable else "")
        cells = [
            str(int(row["position"])),
            weight if estimable else "n/a (not estimable)",
            f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]" if estimable else "n/a",
            _fmt(row["se"]),
            str(int(row["impressions"])),
            str(int(row["clicks"])),
        ]
        if truth is not None:
            position = int(row["position"])
            cells.append(_fmt(float(truth[position - 1])) if position <= len(truth) else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve_figure(curves: dict[str, pd.DataFrame] | pd.DataFrame, truth: np.ndarray | None = None, title: str = "",
                 y_top: float | None = None) -> bytes:
    """One line per estimate with its CI band; the true curve dashed when given; the y-axis from 0 to `y_top`
    (default: everything drawn). Returns the SVG."""
    if isinstance(curves, pd.DataFrame):
        curves = {curves.attrs.get("method", "estimate"): curves}
    panel = Panel(title, "position j", "w_j = P(Y(j)=1 | Y(1)=1)", integer_x=True,
                  ylim=(0.0, y_top) if y_top is not None else None)
    for name, curve in curves.items():
        require_columns(curve, ["position", "weight", "ci_low", "ci_high"], f"curve {name!r}")
        panel.band(curve["position"], curve["ci_low"], curve["ci_high"], series=name)
        panel.line(curve["position"], curve["weight"], series=name, width=1.2, markers=True)
    if truth is not None:
        panel.line(np.arange(1, len(truth) + 1), truth, series="true w_j", colour="black", style="dashed", width=1.0)
    return render([panel], panel_size=(560.0, 300.0))


def load_truth_curve(landing, day=None) -> np.ndarray | None:
    """The simulator's true w_j (index 0 = position 1) of partition `day` (`bias_curve.parquet` under
    `ingestion.landing.truth_dir`), or None.

    For REPORTING only (error vs truth, the dashed line of the figure): no estimator may read it."""
    from fair_pipeline.ingestion.landing import truth_dir

    path = truth_dir(landing, day) / "bias_curve.parquet"
    if not path.exists():
        return None
    truth = pd.read_parquet(path).sort_values("position")
    return truth["weight"].to_numpy(dtype=float)


def errors_vs_truth(curves: dict[str, pd.DataFrame], truth: np.ndarray) -> pd.DataFrame:
    """Per method: max |ŵ_j - w_j| and where, and how many CIs cover w_j, over the estimable positions j <= T
    (beyond the truncation T the chained estimators assume w_j = w_T, an error of the model, not the estimate)."""
    rows = []
    for method, curve in curves.items():
        truncate = curve.attrs.get("truncate")
        keep = curve["position"].between(1, min(len(truth), truncate or len(truth))) & curve["weight"].notna()
        part = curve[keep]
        true_w = truth[part["position"].to_numpy() - 1]
        error = np.abs(part["weight"].to_numpy() - true_w)
        covered = (part["ci_low"].to_numpy() <= true_w) & (true_w <= part["ci_high"].to_numpy())
        worst = int(np.argmax(error)) if len(error) else None
        rows.append(
            {
                "method": method,
                "max_abs_error": float(error[worst]) if worst is not None else float("nan"),
                "at_position": int(part["position"].iloc[worst]) if worst is not None else None,
                "positions_compared": int(len(part)),
                "ci_covers_truth": int(covered.sum()),
            }
        )
    return pd.DataFrame(rows, columns=["method", "max_abs_error", "at_position", "positions_compared", "ci_covers_truth"])


REPORT_COLUMNS = ["method", "chosen", "position", "estimate", "ci_low", "ci_high", "se", "n_impressions", "clicks",
                  "truncated"]


def curve_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Stored curves (`marts.position_bias_curves` rows: method, chosen, position, weight, ..., impressions) in the
    fairness report's `position_bias_curve` shape (position, estimate, ci_low, ci_high, method, n_impressions, se,
    clicks, chosen, truncated: positions beyond T, where a chained estimator assumes w_j = w_T)."""
    renamed = curves.rename(columns={"weight": "estimate", "impressions": "n_impressions"})
    return renamed.reindex(columns=REPORT_COLUMNS).sort_values(["method", "position"], kind="stable").reset_index(drop=True)


def curves_plot(
    curves: dict[str, pd.DataFrame],
    truth: np.ndarray | None = None,
    chosen: str | None = None,
    title: str = "",
    plot_methods: tuple[str, ...] | None = None,
) -> bytes:
    """The figure of a position-bias run: `plot_methods` (default: the chosen one, randomized and naive, the
    reference and the cautionary tale) with CI bands, the true curve when given, and a y-axis showing the bands up
    to twice the largest weight, so that one very wide interval does not flatten the rest."""
    wanted = plot_methods if plot_methods is not None else tuple(dict.fromkeys(m for m in (chosen, "randomized", "naive") if m))
    shown = {m: curves[m] for m in wanted if m in curves}
    finite = lambda column: [v for c in shown.values() for v in c[column].to_numpy(dtype=float) if math.isfinite(v)]  # noqa: E731
    top_weight = max([1.0, *finite("weight")])
    y_top = 1.05 * min(max([top_weight, *finite("ci_high")]), 2 * top_weight)
    return curve_figure(shown, truth=truth, title=title, y_top=y_top)
