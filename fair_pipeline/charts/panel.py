"""One plotting area: what is drawn on it (lines, CI bands, points with error bars, bars, heatmap cells, notes) in
data coordinates, and how its axes are labelled. `charts.svg.render` lays panels out and draws them.

Colours are resolved per figure, not per panel: every series with the same name gets the same colour in every
panel (the first name seen takes the cycle's first colour), so small multiples read consistently."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

STYLES = ("solid", "dashed", "dotted")


def dodge(n_series: int, width: float = 0.6) -> np.ndarray:
    """x offsets that set `n_series` series side by side within `width` of one category (or x value), centred."""
    return (np.arange(n_series) - (n_series - 1) / 2) * (width / max(n_series, 1))


def _floats(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=float).ravel()


def _days(values: Any) -> np.ndarray:
    """Dates (datetime64, pandas Timestamps, ISO strings) as days since 1970-01-01."""
    return np.asarray(values, dtype="datetime64[D]").astype(np.int64).astype(float).ravel()


@dataclasses.dataclass
class Mark:
    """One thing drawn: `kind` says how (see `charts.svg`), `data` holds its arrays in data coordinates.
    `series` names it in the legend (None: no entry); a mark without `colour` takes its series' colour."""

    kind: str
    data: dict
    series: str | None = None
    colour: str | None = None
    style: str = "solid"
    legend: bool = True


class Panel:
    """Axes of one plot. x is numeric (whole-number ticks with `integer_x`), dates (`x_dates`) or categories
    (`x_labels`: positions 0..n-1)."""

    def __init__(self, title: str = "", xlabel: str = "", ylabel: str = "", *, xlim: tuple[float, float] | None = None,
                 ylim: tuple[float, float] | None = None, x_labels: list[str] | None = None, x_dates: bool = False,
                 rotate_x_labels: bool = False, grid: bool = True, integer_x: bool = False):
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.xlim, self.ylim, self.x_labels, self.x_dates = xlim, ylim, x_labels, x_dates
        self.y_labels: list[str] | None = None
        self.rotate_x_labels, self.grid, self.y_down, self.integer_x = rotate_x_labels, grid, False, integer_x
        self.marks: list[Mark] = []

    def _x(self, values: Any) -> np.ndarray:
        return _days(values) if self.x_dates else _floats(values)

    def line(self, x, y, series: str | None = None, colour: str | None = None, style: str = "solid",
             width: float = 1.5, markers: bool = False, step: bool = False, legend: bool = True) -> None:
        """A polyline (broken at missing values); `step`: held until the next x (a step function)."""
        if style not in STYLES:
            raise ValueError(f"line style {style!r}: expected one of {STYLES}")
        self.marks.append(Mark("line", {"x": self._x(x), "y": _floats(y), "width": width, "markers": markers,
                                        "step": step}, series, colour, style, legend))

    def band(self, x, low, high, series: str | None = None, colour: str | None = None, step: bool = False,
             opacity: float = 0.2) -> None:
        """A filled interval (e.g. a 95% CI) in its series' colour; it adds no legend entry."""
        self.marks.append(Mark("band", {"x": self._x(x), "low": _floats(low), "high": _floats(high), "step": step,
                                        "opacity": opacity}, series, colour, legend=False))

    def points(self, x, y, low=None, high=None, series: str | None = None, colour: str | None = None,
               x_low=None, x_high=None, connect: bool = False) -> None:
        """Markers with optional vertical (low/high) and horizontal (x_low/x_high) error bars, capped."""
        data = {"x": self._x(x), "y": _floats(y), "connect": connect}
        for key, values in (("low", low), ("high", high), ("x_low", x_low), ("x_high", x_high)):
            if values is not None:
                data[key] = self._x(values) if key.startswith("x_") else _floats(values)
        self.marks.append(Mark("points", data, series, colour))

    def hline(self, y: float, series: str | None = None, colour: str = "#808080", style: str = "dashed",
              width: float = 1.0) -> None:
        """A horizontal reference line across the panel."""
        self.marks.append(Mark("hline", {"y": _floats([y]), "width": width}, series, colour, style))

    def diagonal(self) -> None:
        """The y = x line of a ROC plot (chance), dotted grey, no legend entry."""
        self.marks.append(Mark("line", {"x": _floats([0, 1]), "y": _floats([0, 1]), "width": 0.8, "markers": False,
                                        "step": False}, None, "#808080", "dotted", legend=False))

    def bars(self, heights, bottoms=None, series: str | None = None, colour: str | None = None,
             width: float = 0.8) -> None:
        """One bar per category (x = 0..n-1, see `x_labels`), stacked on `bottoms` if given."""
        heights = _floats(heights)
        bottoms = np.zeros_like(heights) if bottoms is None else _floats(bottoms)
        self.marks.append(Mark("bars", {"x": np.arange(len(heights), dtype=float), "bottom": bottoms,
                                        "top": bottoms + heights, "width": width}, series, colour))

    def cells(self, values, row_labels: list[str], column_labels: list[str], text: list[list[str]]) -> None:
        """A heatmap: cell (i, j) coloured by values[i, j] in [0, 1] (viridis; blank where missing), labelled
        with text[i][j]; rows run downwards."""
        values = np.asarray(values, dtype=float)
        if values.shape != (len(row_labels), len(column_labels)):
            raise ValueError(f"heatmap of shape {values.shape} with {len(row_labels)} row and "
                             f"{len(column_labels)} column labels")
        self.x_labels, self.y_labels, self.y_down, self.grid = list(column_labels), list(row_labels), True, False
        self.marks.append(Mark("cells", {"values": values, "text": text}, legend=False))

    def note(self, x: float, y: float, text: str) -> None:
        """A small text beside a data point."""
        self.marks.append(Mark("note", {"x": self._x([x]), "y": _floats([y]), "text": text}, legend=False))

    def has_bars(self) -> bool:
        return any(mark.kind == "bars" for mark in self.marks)

    def extent(self, axis: str) -> np.ndarray:
        """Every data value the panel draws along `axis` ('x' or 'y'), for its limits."""
        keys = {"x": ("x", "x_low", "x_high"), "y": ("y", "low", "high", "bottom", "top")}[axis]
        parts = [mark.data[k] for mark in self.marks if mark.kind != "cells" for k in keys if k in mark.data]
        return np.concatenate(parts) if parts else np.empty(0)
