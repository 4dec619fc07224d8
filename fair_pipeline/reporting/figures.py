"""Matplotlib figures rendered to PNG bytes (Agg backend: no display, no network)."""
from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _png(figure: plt.Figure, tight: bool = True) -> bytes:
    try:
        if tight:  # a constrained layout (colour bars) arranges itself
            figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        plt.close(figure)


def to_png(draw: Callable[[plt.Axes], None], width: float = 6.4, height: float = 3.6) -> bytes:
    figure, axes = plt.subplots(figsize=(width, height), dpi=100)
    try:
        draw(axes)
    except BaseException:
        plt.close(figure)
        raise
    return _png(figure)


def legend_outside(ax: plt.Axes, title: str | None = None) -> None:
    """The legend to the right of the plotting area, so it never covers a bar, point or band."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, title=title, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _err(frame: pd.DataFrame, value: str, low: str, high: str) -> np.ndarray:
    return np.vstack([frame[value] - frame[low], frame[high] - frame[value]]).clip(min=0)


def draw_curves(
    ax: plt.Axes, frame: pd.DataFrame, x: str, y: str, low: str | None, high: str | None, by: str | None,
    reference: pd.DataFrame | None = None, reference_label: str = "truth", diagonal: bool = False, step: bool = False,
) -> None:
    """One line per `by` value with its CI band (if low/high given), an optional dashed reference line."""
    groups = frame.groupby(by, sort=True) if by else [("", frame)]
    for label, part in groups:
        part = part.sort_values(x)
        if step:
            (line,) = ax.step(part[x], part[y], where="post", label=str(label) or None)
        else:
            (line,) = ax.plot(part[x], part[y], marker="o" if len(part) <= 20 else None, label=str(label) or None)
        if low and high:
            ax.fill_between(part[x], part[low], part[high], alpha=0.2, step="post" if step else None, color=line.get_color())
    if reference is not None:
        ax.plot(reference[x], reference[y], "k--", label=reference_label)
    if diagonal:
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    ax.grid(alpha=0.3)
    if by or reference is not None:
        legend_outside(ax)


def curves_with_bands(
    frame: pd.DataFrame, x: str, y: str, low: str | None, high: str | None, by: str | None, xlabel: str, ylabel: str,
    reference: pd.DataFrame | None = None, reference_label: str = "truth", diagonal: bool = False, step: bool = False,
) -> bytes:
    """`draw_curves` on one labelled plot."""

    def draw(ax: plt.Axes) -> None:
        draw_curves(ax, frame, x, y, low, high, by, reference, reference_label, diagonal, step)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)

    return to_png(draw)


def _one_legend(figure: plt.Figure, axes) -> None:
    """Panels whose legends list the same entries keep the first panel's only, rather than one per panel (each
    legend is text laid out and drawn again, and tight_layout makes room for every one)."""
    legends = [ax.get_legend() for ax in axes]
    if len(legends) < 2 or any(legend is None for legend in legends):
        return
    labels = [[text.get_text() for text in legend.get_texts()] for legend in legends]
    if any(entry != labels[0] for entry in labels):
        return
    for ax in axes[1:]:
        ax.get_legend().remove()


def panels_figure(frame: pd.DataFrame, by: str, draw: Callable[[plt.Axes, pd.DataFrame], object], xlabel: str, ylabel: str,
                  columns: int = 3, colorbar_label: str | None = None) -> plt.Figure:
    """Small multiples: one panel per `by` value (in order of appearance), titled with it, drawn by `draw`. With
    `colorbar_label`, `draw` returns its colour mapping (e.g. draw_heatmap's) and one shared colour bar explains it."""
    parts = list(frame.groupby(by, sort=False))
    rows = max(1, -(-len(parts) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(3.3 * columns, 3.0 * rows), dpi=90, squeeze=False,
                                layout="constrained" if colorbar_label else None)
    try:
        mappable = None
        for ax, (name, part) in zip(axes.flat, parts):
            mappable = draw(ax, part)
            ax.set_title(str(name), fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in axes.flat[len(parts):]:
            ax.axis("off")
        _one_legend(figure, axes.flat[:len(parts)])
        if colorbar_label and mappable is not None:
            bar = figure.colorbar(mappable, ax=axes.ravel().tolist(), shrink=0.8)
            bar.set_label(colorbar_label, fontsize=8)
            bar.ax.tick_params(labelsize=7)
        figure.supxlabel(xlabel, fontsize=9)
        figure.supylabel(ylabel, fontsize=9)
    except BaseException:
        plt.close(figure)
        raise
    return figure


def panels(frame: pd.DataFrame, by: str, draw: Callable[[plt.Axes, pd.DataFrame], object], xlabel: str, ylabel: str,
           columns: int = 3, colorbar_label: str | None = None) -> bytes:
    figure = panels_figure(frame, by, draw, xlabel, ylabel, columns, colorbar_label)
    return _png(figure, tight=colorbar_label is None)


def points_with_errors(
    frame: pd.DataFrame, x: str, y: str, low: str, high: str, by: str | None, xlabel: str, ylabel: str,
    xticks: list[str] | None = None, reference: float | None = None, reference_label: str = "",
) -> bytes:
    """Point estimates with CI error bars, one series per `by` value (dodged so bars do not overlap); an optional
    dashed horizontal reference line (e.g. a ratio of 1 = parity)."""

    def draw(ax: plt.Axes) -> None:
        if reference is not None:
            ax.axhline(reference, color="grey", ls="--", lw=1, label=reference_label or None)
        groups = list(frame.groupby(by, sort=True)) if by else [("", frame)]
        width = 0.6 / max(len(groups), 1)
        for i, (label, part) in enumerate(groups):
            part = part.sort_values(x)
            offset = (i - (len(groups) - 1) / 2) * width
            ax.errorbar(part[x] + offset, part[y], yerr=_err(part, y, low, high), fmt="o", capsize=3, label=str(label) or None)
        if xticks is not None:
            ax.set_xticks(range(len(xticks)), xticks)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if by or reference_label:
            legend_outside(ax)

    return to_png(draw)


def draw_stacked_bars(ax: plt.Axes, frame: pd.DataFrame, index: str, columns: list[str], ylabel: str) -> None:
    bottom = np.zeros(len(frame))
    for column in columns:
        ax.bar(frame[index].astype(str), frame[column], bottom=bottom, label=column)
        bottom = bottom + frame[column].to_numpy(dtype=float)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", rotation=45, labelsize=7)
    legend_outside(ax)


def stacked_bars(frame: pd.DataFrame, index: str, columns: list[str], ylabel: str) -> bytes:
    return to_png(lambda ax: draw_stacked_bars(ax, frame, index, columns, ylabel))


HEATMAP_CMAP = "viridis"


def text_colour_on(rgba: tuple[float, ...]) -> str:
    """Black on light cells (viridis' yellow end), white on dark ones: relative luminance (ITU-R BT.601)."""
    red, green, blue = rgba[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def draw_heatmap(ax: plt.Axes, matrix: pd.DataFrame) -> plt.cm.ScalarMappable:
    """Cells coloured 0..1 and labelled with their value ('n/e' where not estimable), in a colour readable on the cell."""
    values = matrix.to_numpy(dtype=float)
    image = ax.imshow(values, cmap=HEATMAP_CMAP, vmin=0, vmax=1)
    ax.set_xticks(range(matrix.shape[1]), [str(c) for c in matrix.columns])
    ax.set_yticks(range(matrix.shape[0]), [str(i) for i in matrix.index])
    for (i, j), value in np.ndenumerate(values):
        colour = "black" if np.isnan(value) else text_colour_on(image.cmap(image.norm(value)))
        ax.text(j, i, "n/e" if np.isnan(value) else f"{value:.3f}", ha="center", va="center", color=colour, fontsize=8)
    return image


def frontier(frame: pd.DataFrame, x: str, y: str, xlow: str, xhigh: str, ylow: str, yhigh: str, label: str, xlabel: str, ylabel: str) -> bytes:
    def draw(ax: plt.Axes) -> None:
        part = frame.sort_values(label)
        ax.errorbar(part[x], part[y], xerr=_err(part, x, xlow, xhigh), yerr=_err(part, y, ylow, yhigh), fmt="o-", capsize=3)
        for _, row in part.iterrows():
            ax.annotate(f"λ={row[label]:g}", (row[x], row[y]), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)

    return to_png(draw)
