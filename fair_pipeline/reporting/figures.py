"""The report's figures from its tables: curves with CI bands, points with error bars, stacked bars, heatmaps,
small multiples (one panel per model), as SVG (`fair_pipeline.charts`)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from fair_pipeline.charts import Panel, dodge, render

__all__ = ["curves_with_bands", "draw_curves", "draw_heatmap", "draw_stacked_bars", "forest", "frontier", "panels",
           "points_with_errors", "stacked_bars"]

SINGLE = (520.0, 290.0)  # plotting area of a one-panel figure, pixels
SMALL = (230.0, 200.0)  # of each small multiple


def _series(label) -> str | None:
    return str(label) if str(label) else None


def draw_curves(
    panel: Panel, frame: pd.DataFrame, x: str, y: str, low: str | None, high: str | None, by: str | None,
    reference: pd.DataFrame | None = None, reference_label: str = "truth", diagonal: bool = False, step: bool = False,
) -> None:
    """One line per `by` value with its CI band (if low/high given), an optional dashed reference line."""
    groups = frame.groupby(by, sort=True) if by else [("", frame)]
    for label, part in groups:
        part = part.sort_values(x)
        series = _series(label)
        if low and high:
            panel.band(part[x], part[low], part[high], series=series, step=step)
        panel.line(part[x], part[y], series=series, markers=len(part) <= 20 and not step, step=step)
    if reference is not None:
        panel.line(reference[x], reference[y], series=reference_label, colour="black", style="dashed")
    if diagonal:
        panel.diagonal()


def curves_with_bands(
    frame: pd.DataFrame, x: str, y: str, low: str | None, high: str | None, by: str | None, xlabel: str, ylabel: str,
    reference: pd.DataFrame | None = None, reference_label: str = "truth", diagonal: bool = False, step: bool = False,
) -> bytes:
    """`draw_curves` on one labelled plot."""
    panel = Panel(xlabel=xlabel, ylabel=ylabel)
    draw_curves(panel, frame, x, y, low, high, by, reference, reference_label, diagonal, step)
    return render([panel], panel_size=SINGLE, legend_title=by)


def panels(frame: pd.DataFrame, by: str, draw: Callable[[Panel, pd.DataFrame], object], xlabel: str, ylabel: str,
           columns: int = 3, colorbar_label: str | None = None, legend_title: str | None = None) -> bytes:
    """Small multiples: one panel per `by` value (in order of appearance), titled with it, drawn by `draw`; one
    legend for all panels (a series has the same colour in each) and, with `colorbar_label`, one colour bar."""
    drawn = []
    for name, part in frame.groupby(by, sort=False):
        panel = Panel(str(name))
        draw(panel, part)
        drawn.append(panel)
    if not drawn:
        raise ValueError(f"no rows to draw: the frame has no value of {by!r}")
    return render(drawn, columns, panel_size=SMALL, xlabel=xlabel, ylabel=ylabel, colorbar_label=colorbar_label,
                  legend_title=legend_title, font_size=8)


def points_with_errors(
    frame: pd.DataFrame, x: str, y: str, low: str, high: str, by: str | None, xlabel: str, ylabel: str,
    xticks: list[str] | None = None, reference: float | None = None, reference_label: str = "",
) -> bytes:
    """Point estimates with CI error bars, one series per `by` value (dodged so bars do not overlap); an optional
    dashed horizontal reference line (e.g. a ratio of 1 = parity)."""
    panel = Panel(xlabel=xlabel, ylabel=ylabel, x_labels=xticks)
    if reference is not None:
        panel.hline(reference, series=reference_label or None)
    groups = list(frame.groupby(by, sort=True)) if by else [("", frame)]
    for offset, (label, part) in zip(dodge(len(groups)), groups):
        part = part.sort_values(x)
        panel.points(part[x] + offset, part[y], part[low], part[high], series=_series(label))
    return render([panel], panel_size=SINGLE, legend_title=by)


def draw_stacked_bars(panel: Panel, frame: pd.DataFrame, index: str, columns: list[str], ylabel: str) -> None:
    panel.x_labels, panel.ylabel, panel.rotate_x_labels = frame[index].astype(str).tolist(), ylabel, True
    bottom = np.zeros(len(frame))
    for column in columns:
        heights = frame[column].to_numpy(dtype=float)
        panel.bars(heights, bottom, series=str(column))
        bottom = bottom + heights


def stacked_bars(frame: pd.DataFrame, index: str, columns: list[str], ylabel: str) -> bytes:
    panel = Panel()
    draw_stacked_bars(panel, frame, index, columns, ylabel)
    return render([panel], panel_size=SINGLE)


def draw_heatmap(panel: Panel, matrix: pd.DataFrame) -> None:
    """Cells coloured 0..1 (viridis) and labelled with their value ('n/e' where not estimable), the text dark on
    light cells and light on dark ones (`charts.text_colour_on`)."""
    values = matrix.to_numpy(dtype=float)
    text = [["n/e" if np.isnan(v) else f"{v:.3f}" for v in row] for row in values]
    panel.cells(values, [str(i) for i in matrix.index], [str(c) for c in matrix.columns], text)


def frontier(frame: pd.DataFrame, x: str, y: str, xlow: str, xhigh: str, ylow: str, yhigh: str, label: str,
             xlabel: str, ylabel: str) -> bytes:
    """Points (x, y) with error bars both ways, joined in `label` order, each annotated with its λ."""
    part = frame.sort_values(label)
    panel = Panel(xlabel=xlabel, ylabel=ylabel)
    panel.points(part[x], part[y], part[ylow], part[yhigh], x_low=part[xlow], x_high=part[xhigh], connect=True)
    for _, row in part.iterrows():
        panel.note(row[x], row[y], f"λ={row[label]:g}")
    return render([panel], panel_size=SINGLE)


def forest(frame: pd.DataFrame, label: str, effect: str, low: str, high: str, margin: str, xlabel: str,
           ylabel: str) -> bytes:
    """A forest plot: one point with its 95% CI per row (labelled along x), the ±δ band shaded around 0 and the
    zero line, one panel per distinct δ (each panel's band is its own margin)."""
    drawn = []
    for delta, part in frame.groupby(margin, sort=True):
        part = part.reset_index(drop=True)
        x = np.arange(len(part), dtype=float)
        panel = Panel(f"δ = {delta:g}" if frame[margin].nunique() > 1 else "", xlabel=xlabel, ylabel=ylabel,
                      x_labels=part[label].astype(str).tolist())
        panel.band([-0.5, len(part) - 0.5], [-delta, -delta], [delta, delta], series=f"±δ (δ = {delta:g})",
                   colour="#2ca02c")
        panel.hline(0.0, colour="#808080", style="solid", width=0.8)
        panel.points(x, part[effect], part[low], part[high], series="gap with 95% CI", colour="#d62728")
        drawn.append(panel)
    if not drawn:
        raise ValueError("no gap to draw")
    return render(drawn, 1, panel_size=(SINGLE[0], 220.0))
