"""Charts: the figures of the audit, the stages' MLflow runs and the fairness report, drawn as SVG.

A `Panel` records what to draw in data coordinates (lines, CI bands, points with error bars, bars, heatmap
cells, notes) and how its axes are labelled; `render` lays panels out on a grid with one legend (and a colour
bar for heatmaps) and returns the SVG document's bytes. Pure Python and numpy: no plotting library, no fonts
to lay out (the browser does that), so a figure costs milliseconds. Tests: tests/charts/.
"""
from fair_pipeline.charts.colours import text_colour_on, viridis
from fair_pipeline.charts.panel import Panel, dodge
from fair_pipeline.charts.svg import render

SUFFIX = ".svg"
MEDIA_TYPE = "image/svg+xml"

__all__ = ["MEDIA_TYPE", "Panel", "SUFFIX", "dodge", "render", "text_colour_on", "viridis"]
