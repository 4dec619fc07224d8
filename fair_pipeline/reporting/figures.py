"""Matplotlib figures rendered to PNG bytes (Agg backend: no display, no network)."""
from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _png(figure: plt.Figure) -> bytes:
    try:
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
        ax.legend(fontsize=7)


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


def panels(frame: pd.DataFrame, by: str, draw: Callable[[plt.Axes, pd.DataFrame], None], xlabel: str, ylabel: str,
           columns: int = 3) -> bytes:
    """Small multiples: one panel per `by` value (in order of appearance), titled with it, drawn by `draw`."""
    parts = list(frame.groupby(by, sort=False))
    rows = max(1, -(-len(parts) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(3.3 * columns, 3.0 * rows), dpi=90, squeeze=False)
    try:
        for ax, (name, part) in zip(axes.flat, parts):
            draw(ax, part)
            ax.set_title(str(name), fontsize=8)
            ax.tick_params(labelsize=7)
    except BaseException:
        plt.close(figure)
        raise
    for ax in axes.flat[len(parts):]:
        ax.axis("off")
    figure.supxlabel(xlabel, fontsize=9)
    figure.supylabel(ylabel, fontsize=9)
    return _png(figure)


def points_with_errors(
    frame: pd.DataFrame, x: str, y: str, low: str, high: str, by: str | None, xlabel: str, ylabel: str,
    xticks: list[str] | None = None,
) -> bytes:
    """Point estimates with CI error bars, one series per `by` value (dodged so bars do not overlap)."""

    def draw(ax: plt.Axes) -> None:
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
        if by:
            ax.legend(fontsize=8)

    return to_png(draw)


def stacked_bars(frame: pd.DataFrame, index: str, columns: list[str], ylabel: str) -> bytes:
    def draw(ax: plt.Axes) -> None:
        bottom = np.zeros(len(frame))
        for column in columns:
            ax.bar(frame[index].astype(str), frame[column], bottom=bottom, label=column)
            bottom = bottom + frame[column].to_numpy(dtype=float)
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", rotation=45, labelsize=7)
        ax.legend(fontsize=8)

    return to_png(draw)


def draw_heatmap(ax: plt.Axes, matrix: pd.DataFrame) -> plt.cm.ScalarMappable:
    """Cells coloured 0..1 and labelled with their value ('n/e' where not estimable)."""
    image = ax.imshow(matrix.to_numpy(dtype=float), cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(matrix.shape[1]), [str(c) for c in matrix.columns])
    ax.set_yticks(range(matrix.shape[0]), [str(i) for i in matrix.index])
    for (i, j), value in np.ndenumerate(matrix.to_numpy(dtype=float)):
        ax.text(j, i, "n/e" if np.isnan(value) else f"{value:.3f}", ha="center", va="center", color="w", fontsize=8)
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
