"""Panels laid out on a grid and written as one SVG document: axes, ticks, grid lines, marks, panel titles, a
shared legend (and colour bar) to the right of the grid, figure title and axis labels.

SVG rather than a raster: the browser lays the text out, so drawing a figure costs milliseconds instead of a
plotting library's text layout and PNG encoding, and the figure stays sharp at any zoom. Text widths are
estimated (`text_width`) only to reserve room for labels."""
from __future__ import annotations

import dataclasses
from html import escape

import numpy as np

from fair_pipeline.charts import ticks
from fair_pipeline.charts.colours import CYCLE, VIRIDIS_STOPS, hex_colour, text_colour_on, viridis
from fair_pipeline.charts.panel import Mark, Panel

FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
DASHES = {"solid": "", "dashed": "5,3", "dotted": "1.5,2.5"}
TICK, PAD, LEGEND_ROW = 4.0, 4.0, 15.0


def text_width(text: str, size: float) -> float:
    """Room a label needs: about 0.6 em per character in a sans-serif font."""
    return 0.6 * size * len(text)


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, text: str, size: float, anchor: str = "middle", colour: str = "#222",
          rotate: float | None = None, baseline: str = "auto", weight: str = "normal") -> str:
    transform = f" transform='rotate({_n(rotate)} {_n(x)} {_n(y)})'" if rotate else ""
    bold = " font-weight='bold'" if weight != "normal" else ""
    return (f"<text x='{_n(x)}' y='{_n(y)}' font-size='{_n(size)}' text-anchor='{anchor}' fill='{colour}'"
            f" dominant-baseline='{baseline}'{bold}{transform}>{escape(text)}</text>")


@dataclasses.dataclass(frozen=True)
class LegendEntry:
    label: str
    colour: str
    kind: str  # line, points, bars
    style: str


class Colours:
    """Series name -> colour, the same in every panel of a figure; an unnamed mark takes the next colour of the
    cycle, once (the legend and the drawing ask for it)."""

    def __init__(self) -> None:
        self._by_series: dict[str, str] = {}
        self._by_mark: dict[int, str] = {}
        self._next = 0

    def _take(self) -> str:
        colour = CYCLE[self._next % len(CYCLE)]
        self._next += 1
        return colour

    def of(self, mark: Mark) -> str:
        if mark.colour is not None:
            return mark.colour
        if mark.series is None:
            if id(mark) not in self._by_mark:
                self._by_mark[id(mark)] = self._take()
            return self._by_mark[id(mark)]
        if mark.series not in self._by_series:
            self._by_series[mark.series] = self._take()
        return self._by_series[mark.series]


@dataclasses.dataclass
class Scale:
    """Data interval [low, high] onto pixels [0, length] (reversed for a y axis drawn upwards)."""

    low: float
    high: float
    length: float
    upwards: bool

    def __call__(self, values: np.ndarray) -> np.ndarray:
        share = (np.asarray(values, dtype=float) - self.low) / (self.high - self.low)
        return self.length * (1.0 - share if self.upwards else share)


@dataclasses.dataclass
class Axis:
    """Tick positions and labels of one axis, and its data limits."""

    low: float
    high: float
    positions: np.ndarray
    labels: list[str]


def _axis(panel: Panel, which: str, pixels: float) -> Axis:
    """Limits, tick positions and labels; about one tick per 60 pixels (at least 4)."""
    target = max(4, int(pixels // 60))
    categories = panel.x_labels if which == "x" else panel.y_labels
    fixed = panel.xlim if which == "x" else panel.ylim
    data = panel.extent(which)
    if categories is not None:
        low, high = fixed or (-0.5, len(categories) - 0.5)
        if fixed is None and data.size:  # dodged points may sit beyond the outer categories
            low, high = min(low, float(np.nanmin(data)) - 0.3), max(high, float(np.nanmax(data)) + 0.3)
        return Axis(low, high, np.arange(len(categories), dtype=float), [str(c) for c in categories])
    low, high = fixed or ticks.limits(data)
    if fixed is None and which == "y" and panel.has_bars() and data.size and np.nanmin(data) >= 0:
        low = 0.0  # bars stand on the axis
    if which == "x" and panel.x_dates:
        positions = ticks.ticks(low, high, target=min(target, 7), integer=True)
        return Axis(low, high, positions, [str(np.datetime64(int(p), "D"))[5:] for p in positions])
    positions = ticks.ticks(low, high, target, integer=which == "x" and panel.integer_x)
    return Axis(low, high, positions, ticks.labels(positions))


def _segments(x: np.ndarray, *ys: np.ndarray) -> list[np.ndarray]:
    """Index runs where x and every y are finite (a line breaks at a missing value)."""
    ok = np.isfinite(x)
    for y in ys:
        ok &= np.isfinite(y)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    return [np.arange(start, stop) for start, stop in zip(edges[::2], edges[1::2])]


def _stepped(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points of a step function held until the next x ('post')."""
    return np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]


def _points(px: np.ndarray, py: np.ndarray) -> str:
    return " ".join(f"{_n(a)},{_n(b)}" for a, b in zip(px, py))


def _stroke(colour: str, width: float, style: str) -> str:
    dash = DASHES[style]
    return (f"fill='none' stroke='{colour}' stroke-width='{_n(width)}' stroke-linejoin='round'"
            + (f" stroke-dasharray='{dash}'" if dash else ""))


def _draw_mark(mark: Mark, colour: str, sx: Scale, sy: Scale) -> list[str]:
    d = mark.data
    out = []
    if mark.kind == "line":
        for run in _segments(d["x"], d["y"]):
            x, y = d["x"][run], d["y"][run]
            if d["step"]:
                x, y = _stepped(x, y)
            out.append(f"<polyline points='{_points(sx(x), sy(y))}' {_stroke(colour, d['width'], mark.style)}/>")
            if d["markers"]:
                out += [f"<circle cx='{_n(a)}' cy='{_n(b)}' r='2.5' fill='{colour}'/>"
                        for a, b in zip(sx(d["x"][run]), sy(d["y"][run]))]
    elif mark.kind == "band":
        for run in _segments(d["x"], d["low"], d["high"]):
            x, low, high = d["x"][run], d["low"][run], d["high"][run]
            if d["step"]:
                (x, low), high = _stepped(x, low), _stepped(d["x"][run], high)[1]
            outline = _points(np.concatenate([sx(x), sx(x)[::-1]]), np.concatenate([sy(high), sy(low)[::-1]]))
            out.append(f"<polygon points='{outline}' fill='{colour}' fill-opacity='{d['opacity']}' stroke='none'/>")
    elif mark.kind == "points":
        out += _draw_points(d, colour, sx, sy)
    elif mark.kind == "hline":
        y = sy(d["y"])[0]
        out.append(f"<line x1='0' y1='{_n(y)}' x2='{_n(sx.length)}' y2='{_n(y)}' {_stroke(colour, d['width'], mark.style)}/>")
    elif mark.kind == "bars":
        half = (sx(d["width"]) - sx(0.0)) / 2
        for x, bottom, top in zip(sx(d["x"]), sy(d["bottom"]), sy(d["top"])):
            if np.isfinite(bottom) and np.isfinite(top):
                out.append(f"<rect x='{_n(x - half)}' y='{_n(min(top, bottom))}' width='{_n(2 * half)}' "
                           f"height='{_n(abs(bottom - top))}' fill='{colour}'/>")
    elif mark.kind == "cells":
        out += _draw_cells(d, sx, sy)
    elif mark.kind == "note":
        out.append(_text(sx(d["x"])[0] + 4, sy(d["y"])[0] - 4, d["text"], 8, anchor="start"))
    else:
        raise ValueError(f"unknown mark kind {mark.kind!r}")
    return out


def _draw_points(d: dict, colour: str, sx: Scale, sy: Scale) -> list[str]:
    x, y, out, cap = sx(d["x"]), sy(d["y"]), [], 3.0
    if d["connect"]:
        for run in _segments(d["x"], d["y"]):
            out.append(f"<polyline points='{_points(x[run], y[run])}' {_stroke(colour, 1.2, 'solid')}/>")
    for bounds, vertical in ((("low", "high"), True), (("x_low", "x_high"), False)):
        if bounds[0] not in d:
            continue
        low, high = (sy if vertical else sx)(d[bounds[0]]), (sy if vertical else sx)(d[bounds[1]])
        for i in np.flatnonzero(np.isfinite(low) & np.isfinite(high) & np.isfinite(x) & np.isfinite(y)):
            if vertical:
                out.append(f"<path d='M{_n(x[i])},{_n(low[i])}V{_n(high[i])}M{_n(x[i] - cap)},{_n(low[i])}"
                           f"h{_n(2 * cap)}M{_n(x[i] - cap)},{_n(high[i])}h{_n(2 * cap)}' stroke='{colour}' stroke-width='1.2'/>")
            else:
                out.append(f"<path d='M{_n(low[i])},{_n(y[i])}H{_n(high[i])}M{_n(low[i])},{_n(y[i] - cap)}"
                           f"v{_n(2 * cap)}M{_n(high[i])},{_n(y[i] - cap)}v{_n(2 * cap)}' stroke='{colour}' stroke-width='1.2'/>")
    ok = np.isfinite(x) & np.isfinite(y)
    out += [f"<circle cx='{_n(a)}' cy='{_n(b)}' r='3' fill='{colour}'/>" for a, b in zip(x[ok], y[ok])]
    return out


def _draw_cells(d: dict, sx: Scale, sy: Scale) -> list[str]:
    values, out = d["values"], []
    width, height = sx(1.0) - sx(0.0), sy(1.0) - sy(0.0)
    for (i, j), value in np.ndenumerate(values):
        rgb = None if np.isnan(value) else viridis(value)
        fill, ink = ("#ffffff", "black") if rgb is None else (hex_colour(rgb), text_colour_on(rgb))
        x, y = sx(j - 0.5), sy(i - 0.5)
        out.append(f"<rect x='{_n(x)}' y='{_n(y)}' width='{_n(width)}' height='{_n(height)}' fill='{fill}'/>")
        out.append(_text(x + width / 2, y + height / 2, d["text"][i][j], 8, colour=ink, baseline="central"))
    return out


@dataclasses.dataclass
class Layout:
    """Pixel sizes of the figure: each panel's plotting area and the room around it."""

    plot_w: float
    plot_h: float
    left: float  # room left of a plotting area: y tick labels, y label
    bottom: float  # below it: x tick labels, x label
    top: float  # above it: panel title
    right: float = 12.0


def _room(panel: Panel, x: Axis, y: Axis, size: float) -> tuple[float, float, float]:
    left = TICK + PAD + max((text_width(s, size) for s in y.labels), default=0) + (size + 8 if panel.ylabel else 0)
    tallest = (max((text_width(s, size) for s in x.labels), default=0) * 0.72 + size) if panel.rotate_x_labels else size
    bottom = TICK + PAD + tallest + (size + 10 if panel.xlabel else 2)
    top = size + 10 if panel.title else 6
    return left, bottom, top


def _draw_panel(panel: Panel, x: Axis, y: Axis, colours: Colours, layout: Layout, ox: float, oy: float,
                clip_id: str, size: float) -> list[str]:
    w, h = layout.plot_w, layout.plot_h
    sx, sy = Scale(x.low, x.high, w, False), Scale(y.low, y.high, h, not panel.y_down)
    out = [f"<g class='panel' data-title='{escape(panel.title, quote=True)}' transform='translate({_n(ox)},{_n(oy)})'>",
           f"<clipPath id='{clip_id}'><rect x='0' y='0' width='{_n(w)}' height='{_n(h)}'/></clipPath>"]
    if panel.grid:
        out += [f"<line x1='{_n(p)}' y1='0' x2='{_n(p)}' y2='{_n(h)}' stroke='#e6e6e6' stroke-width='0.8'/>"
                for p in sx(x.positions)]
        out += [f"<line x1='0' y1='{_n(p)}' x2='{_n(w)}' y2='{_n(p)}' stroke='#e6e6e6' stroke-width='0.8'/>"
                for p in sy(y.positions)]
    out.append(f"<g clip-path='url(#{clip_id})'>")
    for mark in panel.marks:  # each mark its own group, named by kind and series (what tests and readers query)
        series = f" data-series='{escape(mark.series, quote=True)}'" if mark.series is not None else ""
        out += [f"<g class='{mark.kind}'{series}>", *_draw_mark(mark, colours.of(mark), sx, sy), "</g>"]
    out += ["</g>", f"<rect x='0' y='0' width='{_n(w)}' height='{_n(h)}' fill='none' stroke='#444' stroke-width='0.8'/>"]
    for p, label in zip(sx(x.positions), x.labels):
        out.append(f"<line x1='{_n(p)}' y1='{_n(h)}' x2='{_n(p)}' y2='{_n(h + TICK)}' stroke='#444' stroke-width='0.8'/>")
        if panel.rotate_x_labels:
            out.append(_text(p, h + TICK + PAD + size * 0.4, label, size, anchor="end", rotate=-45, baseline="central"))
        else:
            out.append(_text(p, h + TICK + PAD + size * 0.8, label, size))
    for p, label in zip(sy(y.positions), y.labels):
        out.append(f"<line x1='{_n(-TICK)}' y1='{_n(p)}' x2='0' y2='{_n(p)}' stroke='#444' stroke-width='0.8'/>")
        out.append(_text(-TICK - PAD, p, label, size, anchor="end", baseline="central"))
    if panel.title:
        out.append(_text(w / 2, -8, panel.title, size + 1))
    if panel.xlabel:
        out.append(_text(w / 2, h + layout.bottom - 6, panel.xlabel, size + 1))
    if panel.ylabel:
        out.append(_text(-layout.left + size + 2, h / 2, panel.ylabel, size + 1, rotate=-90))
    out.append("</g>")
    return out


def _legend_entries(panels: list[Panel], colours: Colours) -> list[LegendEntry]:
    """One entry per series name across all panels, in order of first appearance (colours assigned here)."""
    entries: dict[str, LegendEntry] = {}
    for panel in panels:
        for mark in panel.marks:
            colour = colours.of(mark)
            if mark.legend and mark.series is not None and mark.series not in entries:
                entries[mark.series] = LegendEntry(mark.series, colour, mark.kind, mark.style)
    return list(entries.values())


def _draw_legend(entries: list[LegendEntry], x: float, y: float, size: float, title: str | None) -> list[str]:
    out = ["<g class='legend'>"]
    if title:
        out.append(f"<g class='legend-title'>{_text(x, y + size, title, size, anchor='start', weight='bold')}</g>")
        y += LEGEND_ROW
    for entry in entries:
        middle = y + LEGEND_ROW / 2
        if entry.kind == "bars":
            out.append(f"<rect x='{_n(x)}' y='{_n(middle - 5)}' width='18' height='10' fill='{entry.colour}'/>")
        elif entry.kind == "points":
            out.append(f"<circle cx='{_n(x + 9)}' cy='{_n(middle)}' r='3' fill='{entry.colour}'/>")
            out.append(f"<line x1='{_n(x + 9)}' y1='{_n(middle - 5)}' x2='{_n(x + 9)}' y2='{_n(middle + 5)}' "
                       f"stroke='{entry.colour}' stroke-width='1.2'/>")
        else:
            out.append(f"<line x1='{_n(x)}' y1='{_n(middle)}' x2='{_n(x + 18)}' y2='{_n(middle)}' "
                       f"{_stroke(entry.colour, 1.8, entry.style)}/>")
        out.append(_text(x + 24, middle, entry.label, size, anchor="start", baseline="central"))
        y += LEGEND_ROW
    return [*out, "</g>"]


def _draw_colour_bar(x: float, y: float, height: float, label: str, size: float) -> list[str]:
    stops = "".join(f"<stop offset='{i / (len(VIRIDIS_STOPS) - 1):.4f}' stop-color='{c}'/>"
                    for i, c in enumerate(VIRIDIS_STOPS))
    scale = Scale(0.0, 1.0, height, True)
    out = ["<g class='colour-bar'>", f"<linearGradient id='viridis' x1='0' y1='1' x2='0' y2='0'>{stops}</linearGradient>",
           f"<rect x='{_n(x)}' y='{_n(y)}' width='12' height='{_n(height)}' fill='url(#viridis)' stroke='#444' stroke-width='0.8'/>"]
    positions = ticks.ticks(0.0, 1.0)
    for p, text in zip(scale(positions), ticks.labels(positions)):
        out.append(f"<line x1='{_n(x + 12)}' y1='{_n(y + p)}' x2='{_n(x + 12 + TICK)}' y2='{_n(y + p)}' stroke='#444' stroke-width='0.8'/>")
        out.append(_text(x + 12 + TICK + 2, y + p, text, size, anchor="start", baseline="central"))
    out.append(_text(x + 12 + TICK + 2 + text_width("0.0", size) + size + 4, y + height / 2, label, size + 1, rotate=-90))
    return [*out, "</g>"]


def render(panels: list[Panel], columns: int = 1, *, panel_size: tuple[float, float] = (520.0, 300.0),
           title: str = "", xlabel: str = "", ylabel: str = "", legend_title: str | None = None,
           colorbar_label: str | None = None, font_size: float = 9.0, description: str = "") -> bytes:
    """One SVG document (UTF-8 bytes) of `panels` on a grid of `columns`, in reading order.

    `xlabel`/`ylabel` label the whole grid (small multiples); a panel's own labels sit beside it. The legend
    lists every named series once; `colorbar_label` adds a viridis colour bar for heatmap cells."""
    if not panels:
        raise ValueError("a figure needs at least one panel")
    columns = max(1, min(columns, len(panels)))
    rows = -(-len(panels) // columns)
    axes = [(_axis(p, "x", panel_size[0]), _axis(p, "y", panel_size[1])) for p in panels]
    rooms = [_room(p, x, y, font_size) for p, (x, y) in zip(panels, axes)]
    layout = Layout(*panel_size, left=max(r[0] for r in rooms), bottom=max(r[1] for r in rooms),
                    top=max(r[2] for r in rooms))
    colours = Colours()
    entries = _legend_entries(panels, colours)
    cell_w = layout.left + layout.plot_w + layout.right
    cell_h = layout.top + layout.plot_h + layout.bottom
    margin_left = font_size + 12 if ylabel else 4.0
    margin_top = font_size + 18 if title else 4.0
    margin_bottom = font_size + 12 if xlabel else 4.0
    grid_w, grid_h = columns * cell_w, rows * cell_h
    legend_w = (max(text_width(e.label, font_size) for e in entries) + 24 + 8) if entries else 0.0
    if legend_title:
        legend_w = max(legend_w, text_width(legend_title, font_size) + 8)
    bar_w = (12 + TICK + 2 + text_width("0.0", font_size) + 2 * font_size + 12) if colorbar_label else 0.0
    width = margin_left + grid_w + bar_w + legend_w + 8
    height = max(margin_top + grid_h + margin_bottom, margin_top + LEGEND_ROW * (len(entries) + 2))
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{_n(width)}' height='{_n(height)}' "
           f"viewBox='0 0 {_n(width)} {_n(height)}' font-family='{FONT}' role='img'>",
           f"<title>{escape(description or title)}</title>",
           f"<rect width='100%' height='100%' fill='white'/>"]
    if title:
        out.append(_text(margin_left + grid_w / 2, font_size + 8, title, font_size + 2))
    for i, (panel, (x, y)) in enumerate(zip(panels, axes)):
        row, column = divmod(i, columns)
        ox = margin_left + column * cell_w + layout.left
        oy = margin_top + row * cell_h + layout.top
        out += _draw_panel(panel, x, y, colours, layout, ox, oy, f"plot{i}", font_size)
    if xlabel:
        out.append(_text(margin_left + grid_w / 2, margin_top + grid_h + font_size + 4, xlabel, font_size + 1))
    if ylabel:
        out.append(_text(font_size + 2, margin_top + grid_h / 2, ylabel, font_size + 1, rotate=-90))
    if colorbar_label:
        out += _draw_colour_bar(margin_left + grid_w + 4, margin_top + layout.top, min(grid_h - layout.top - layout.bottom,
                                max(layout.plot_h, 120.0)), colorbar_label, font_size)
    if entries:
        out += _draw_legend(entries, margin_left + grid_w + bar_w + 4, margin_top + layout.top, font_size, legend_title)
    out.append("</svg>")
    return "\n".join(out).encode()
