"""SVG charts: ticks, the data-to-pixel mapping, broken and stepped lines, colours per series across panels,
one legend entry per series, heatmap cells and their text colour, escaping, and errors naming the bad input."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.charts import Panel, render, ticks
from fair_pipeline.charts.colours import VIRIDIS_STOPS, hex_colour, text_colour_on, viridis
from tests.charts.svg_reading import SVG, legend_labels, marks, panels, parse, points, texts


def test_ticks_are_nice_steps_inside_the_range_with_the_decimals_they_need():
    assert ticks.ticks(0.0, 1.0).tolist() == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert ticks.labels(ticks.ticks(0.0, 1.0)) == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    assert ticks.ticks(-0.07, 0.31).tolist() == pytest.approx([-0.0, 0.1, 0.2, 0.3])
    assert ticks.labels(np.array([0.0, 2.5, 5.0, 7.5])) == ["0.0", "2.5", "5.0", "7.5"]
    assert ticks.labels(ticks.ticks(0.0, 1_000_000.0)) == ["0", "200,000", "400,000", "600,000", "800,000", "1,000,000"]
    assert ticks.ticks(0.9, 3.1, integer=True).tolist() == [1.0, 2.0, 3.0]  # positions, never 1.5
    assert ticks.labels(np.array([-0.1, 0.0, 0.1])) == ["-0.1", "0.0", "0.1"]
    assert ticks.limits(np.array([0.0, 10.0, np.nan])) == (-0.5, 10.5)  # 5% margin, NaN ignored
    assert ticks.limits(np.array([np.nan])) == (0.0, 1.0) and ticks.limits(np.array([2.0])) == (1.5, 2.5)


def test_data_map_onto_the_plotting_area_with_y_upwards():
    panel = Panel(xlim=(0, 10), ylim=(0, 1))
    panel.line([0, 5, 10], [0, 0.5, 1], series="a")
    (line,) = marks(parse(render([panel], panel_size=(200, 100))), "line")
    assert points(line.find(f"{SVG}polyline")) == [(0, 100), (100, 50), (200, 0)]


def test_a_line_breaks_at_missing_values_and_a_step_holds_until_the_next_x():
    panel = Panel(xlim=(0, 4), ylim=(0, 4))
    panel.line([0, 1, 2, 3, 4], [0, 1, np.nan, 3, 4], series="broken")
    panel.line([0, 2, 4], [1, 2, 3], series="step", step=True)
    root = parse(render([panel], panel_size=(400, 400)))
    broken, step = marks(root, "line")
    assert [len(points(p)) for p in broken.findall(f"{SVG}polyline")] == [2, 2]
    assert points(step.find(f"{SVG}polyline")) == [(0, 300), (200, 300), (200, 200), (400, 200), (400, 100)]


def test_a_series_keeps_its_colour_in_every_panel_and_is_listed_once():
    left, right = Panel("left"), Panel("right")
    left.band([0, 1], [0, 0], [1, 1], series="group 1")
    left.line([0, 1], [0, 1], series="group 1")
    right.line([0, 1], [1, 0], series="group 0")
    right.line([0, 1], [0.5, 0.5], series="group 1")
    right.diagonal()  # no legend entry
    root = parse(render([left, right], 2, legend_title="group"))
    assert [p.get("data-title") for p in panels(root)] == ["left", "right"]
    assert legend_labels(root) == ["group 1", "group 0"]
    colour = {}
    for line in marks(root, "line"):
        if line.get("data-series"):
            colour.setdefault(line.get("data-series"), set()).add(line.find(f"{SVG}polyline").get("stroke"))
    assert colour == {"group 1": {"#1f77b4"}, "group 0": {"#ff7f0e"}}
    (band,) = marks(root, "band")
    assert band.find(f"{SVG}polygon").get("fill") == "#1f77b4"


def test_heatmap_cells_are_viridis_with_readable_text_and_a_colour_bar():
    panel = Panel("m1")
    values = [[0.95, 0.1], [0.55, np.nan]]
    panel.cells(values, ["0", "1"], ["0", "1"], [["0.950", "0.100"], ["0.550", "n/e"]])
    root = parse(render([panel], colorbar_label="pairwise accuracy A(a>b)"))
    (cells,) = marks(root, "cells")
    fills = [r.get("fill") for r in cells.findall(f"{SVG}rect")]
    assert fills == [hex_colour(viridis(0.95)), hex_colour(viridis(0.1)), hex_colour(viridis(0.55)), "#ffffff"]
    ink = {t.text: t.get("fill") for t in cells.findall(f"{SVG}text")}
    # viridis: 0.95 is yellow (white text was unreadable), 0.1 dark purple
    assert ink == {"0.950": "black", "0.100": "white", "0.550": "white", "n/e": "black"}
    assert "pairwise accuracy A(a>b)" in texts(root) and root.find(f".//{SVG}linearGradient") is not None
    assert text_colour_on((1.0, 1.0, 0.0)) == "black" and text_colour_on((0.2, 0.0, 0.3)) == "white"


def test_viridis_interpolates_between_its_stops():
    assert hex_colour(viridis(0.0)) == VIRIDIS_STOPS[0] and hex_colour(viridis(1.0)) == VIRIDIS_STOPS[-1]
    assert hex_colour(viridis(1.7)) == VIRIDIS_STOPS[-1] and hex_colour(viridis(-1)) == VIRIDIS_STOPS[0]
    middle = viridis(1 / 32)  # halfway between the first two stops
    first, second = (np.array([int(h[i:i + 2], 16) for i in (1, 3, 5)]) / 255 for h in VIRIDIS_STOPS[:2])
    np.testing.assert_allclose(middle, (first + second) / 2)


def test_points_bars_dates_and_notes():
    panel = Panel(x_labels=["before", "after"])
    panel.points([0, 1], [0.5, 0.7], [0.4, 0.6], [0.6, 0.8], series="ratio")
    panel.hline(1.0, series="parity")
    bars = Panel(x_labels=["d1", "d2"], rotate_x_labels=True)
    bars.bars([10, 20], series="accepted")
    bars.bars([1, 0], [10, 20], series="quarantined")
    days = Panel(x_dates=True)
    days.line(np.array(["2026-01-01", "2026-01-03"], dtype="datetime64[D]"), [0.1, 0.2], series="gap")
    days.note(np.datetime64("2026-01-02"), 0.15, "λ=0.1")
    root = parse(render([panel, bars, days], 3))
    (errors,) = marks(root, "points")
    assert len(errors.findall(f"{SVG}path")) == 2 and len(errors.findall(f"{SVG}circle")) == 2
    assert [len(b.findall(f"{SVG}rect")) for b in marks(root, "bars")] == [2, 2]
    assert {"before", "after", "d1", "d2", "01-01", "01-02", "01-03", "λ=0.1"} <= set(texts(root))
    assert legend_labels(root) == ["ratio", "parity", "accepted", "quarantined", "gap"]


def test_text_is_escaped():
    panel = Panel("a < b & 'c'")
    panel.line([0, 1], [0, 1], series="x<y>&\"z'")
    root = parse(render([panel], title="<title>"))  # parses: nothing broke the XML
    assert legend_labels(root) == ["x<y>&\"z'"] and "<title>" in texts(root)
    assert panels(root)[0].get("data-title") == "a < b & 'c'"


def test_bad_input_is_refused_naming_what_was_wrong():
    with pytest.raises(ValueError, match="at least one panel"):
        render([])
    with pytest.raises(ValueError, match="line style 'dashdot'"):
        Panel().line([0], [0], style="dashdot")
    with pytest.raises(ValueError, match=r"heatmap of shape \(1, 2\) with 2 row and 2 column labels"):
        Panel().cells([[0.1, 0.2]], ["a", "b"], ["c", "d"], [["", ""]])


def test_an_unnamed_mark_keeps_one_colour_whether_the_legend_or_the_drawing_asks_first():
    panel = Panel()
    panel.points([0, 1], [0, 1], [0, 0], [1, 1], connect=True)  # the λ frontier: one unnamed series
    (points_mark,) = marks(parse(render([panel])), "points")
    assert {e.get("stroke") or e.get("fill") for e in points_mark} == {"#1f77b4"}


def test_the_pipeline_and_its_figures_import_no_plotting_library():
    import subprocess
    import sys

    code = ("import sys, fair_pipeline.definitions\n"
            "from fair_pipeline.reporting import figures\n"
            "import pandas as pd\n"
            "figures.stacked_bars(pd.DataFrame({'d': ['a'], 'n': [1]}), 'd', ['n'], 'rows')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'PIL')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
