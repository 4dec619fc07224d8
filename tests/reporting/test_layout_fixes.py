"""Report layout as a reader sees it: integers, tables that do not wrap CIs, readable heatmaps with a colour
bar, legends beside the plot, the exposure ratio the findings test, the champion, what the groups are."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from fair_pipeline import charts
from fair_pipeline.charts import Panel, render
from fair_pipeline.platform import settings
from fair_pipeline.reporting import build, eo_sections, figures, sections, selection
from fair_pipeline.reporting.model import Table
from tests.charts.svg_reading import SVG, legend_labels, marks, panels, parse, texts


def test_ranks_counts_and_versions_read_back_as_objects_are_shown_as_integers():
    # A ranking read back from MLflow: numbers as Python objects with None, which showed as '1.0' and '26680.0'.
    frame = pd.DataFrame({"rank": [1.0, 2.0, None], "model": ["a", "b", "c"], "min_group_count": [26680.0, 3.0, None],
                          "champion_version": ["3", None, None], "paired_rows": [1200.0, 1200.0, 7.0],
                          "cost": [0.25, 0.5, None]}, dtype=object)
    shown = build.display_frame(frame)
    assert shown["rank"].tolist() == ["1", "2", "n/a"]
    assert shown["min_group_count"].tolist() == ["26,680", "3", "n/a"]
    assert shown["champion_version"].tolist() == ["3", "n/a", "n/a"]
    assert shown["paired_rows"].tolist() == ["1,200", "1,200", "7"]
    assert shown["cost"].tolist() == [0.25, 0.5, None]  # not a count column: untouched
    text = build.display_frame(pd.DataFrame({"rank": ["winner", "2"]}))
    assert text["rank"].tolist() == ["winner", "2"]


def test_table_cells_never_wrap_and_wide_tables_scroll_inside_the_page():
    html = build._table_html(Table(pd.DataFrame({"estimate": ["0.812 [0.790, 0.833]"]}), "caption"))
    assert html.startswith("<p class='caption'>caption</p><div class='table-wrap'><table")
    assert "table.data td{white-space:nowrap}" in build._CSS and ".table-wrap{overflow-x:auto" in build._CSS


def test_heatmap_text_is_dark_on_light_cells_and_light_on_dark_ones():
    panel = Panel()
    figures.draw_heatmap(panel, pd.DataFrame([[0.95, 0.1], [0.55, np.nan]], index=["0", "1"], columns=["0", "1"]))
    (cells,) = marks(parse(render([panel])), "cells")
    colours = {text.text: text.get("fill") for text in cells.iter(f"{SVG}text")}
    # viridis: 0.95 is yellow (white text was unreadable), 0.1 dark purple
    assert colours == {"0.950": "black", "0.100": "white", "0.550": "white", "n/e": "black"}
    assert charts.text_colour_on((1.0, 1.0, 0.0, 1.0)) == "black" and charts.text_colour_on((0.2, 0.0, 0.3)) == "white"


def test_pairwise_panels_get_one_colour_bar_saying_what_the_colour_is():
    frame = pd.DataFrame({"model": ["m1"] * 4 + ["m2"] * 4, "group_a": ["0", "0", "1", "1"] * 2,
                          "group_b": ["0", "1", "0", "1"] * 2, "estimate": [0.5, 0.7, 0.9, 0.5, 0.5, 0.6, 0.6, 0.5]})

    def draw(panel, part):
        figures.draw_heatmap(panel, part.pivot(index="group_a", columns="group_b", values="estimate"))

    root = parse(figures.panels(frame, "model", draw, "worse", "better", colorbar_label="pairwise accuracy A(a>b)"))
    assert [p.get("data-title") for p in panels(root)] == ["m1", "m2"]
    bars = [g for g in root.iter(f"{SVG}g") if g.get("class") == "colour-bar"]
    assert len(bars) == 1 and "pairwise accuracy A(a>b)" in texts(bars[0])


def _translate(element) -> float:
    return float(re.match(r"translate\(([-\d.]+),", element.get("transform")).group(1))


def test_legends_sit_beside_the_plot_not_on_the_bars():
    frame = pd.DataFrame({"partition": ["2026-01-01", "2026-01-02"], "accepted": [900, 1000], "quarantined": [5, 0]})
    root = parse(figures.stacked_bars(frame, "partition", ["accepted", "quarantined"], "rows"))
    (panel,) = panels(root)
    plot_right = _translate(panel) + float(panel.find(f"{SVG}rect").get("width"))
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    swatches = [float(r.get("x")) for r in legend.findall(f"{SVG}rect")]
    assert legend_labels(root) == ["accepted", "quarantined"] and min(swatches) >= plot_right


SUMMARY = pd.DataFrame({"method": ["weighted", "raw", "unweighted", "alpha=0.5"],
                        "exposure_over_merit_ratio": [0.928, 0.648, 0.935, 0.8],
                        "exposure_over_merit_ratio_se": [0.0633, 0.0571, 0.0633, 0.05]})


def test_the_exposure_figure_shows_the_ratio_the_findings_test():
    ratios = eo_sections.exposure_ratios(SUMMARY)
    assert ratios["ranking"].tolist() == ["before", "unweighted", "after"]
    assert ratios["x"].tolist() == [0, 1, 2]
    # the interval on the log scale, where the verdict is judged: log ratio ± 1.96 SE / ratio, back-transformed
    assert ratios["low"].tolist() == pytest.approx([r * np.exp(-1.96 * se / r) for r, se in
                                                    ((0.648, 0.0571), (0.935, 0.0633), (0.928, 0.0633))])
    findings = eo_sections.exposure_ratio_findings(SUMMARY)
    assert findings[0].text.startswith("before (raw scores): exposure per unit of merit, group-0 / group-1 ratio = "
                                       "0.648 [0.545, 0.770] (1 = proportional exposure; δ = log 1.25")
    assert findings[0].verdict == "gap larger than δ (significant)"  # log 0.648 ± 1.96 * 0.0571 / 0.648 < -log 1.25
    # the verdict words match the interval shown: "larger" exactly when the shown CI lies outside [0.8, 1.25]
    for ratio in np.linspace(0.74, 0.78, 401):
        one = pd.DataFrame({"method": ["raw"], "exposure_over_merit_ratio": [ratio], "exposure_over_merit_ratio_se": [0.02]})
        shown = eo_sections.exposure_ratios(one).iloc[0]
        (finding,) = eo_sections.exposure_ratio_findings(one)
        assert (finding.verdict == "gap larger than δ (significant)") == (shown["high"] < 0.8), (ratio, shown["high"])
    per_group = pd.DataFrame({"ranking": ["before", "before"], "group": ["0", "1"], "exposure": [0.3, 0.5],
                              "exposure_ci_low": [0.2, 0.4], "exposure_ci_high": [0.4, 0.6]})
    assert eo_sections.exposure_figure(per_group, SUMMARY).caption.startswith("Exposure per unit of merit, group-0 / group-1 ratio")
    assert eo_sections.exposure_figure(per_group, None).caption.startswith("Exposure per group")  # no ratio logged


def test_the_champion_is_named_with_its_version():
    text, finding = selection.champion_blocks("fair-ranker", 3, "2026-01-01/probability/lam=0.1/alpha=0")
    assert text.markdown == ("Champion model: **fair-ranker version 3** (`models:/fair-ranker@champion`, the candidate "
                             "2026-01-01/probability/lam=0.1/alpha=0).")
    assert finding.text == ("Champion model: fair-ranker version 3 (models:/fair-ranker@champion, the candidate "
                            "2026-01-01/probability/lam=0.1/alpha=0).") and finding.status == "info"
    assert selection.champion_text("fair-ranker", None) == "No champion model: model selection has not registered one yet."


def test_groups_are_explained_with_configured_labels_or_by_their_column(monkeypatch):
    monkeypatch.delenv(settings.GROUP_LABELS_ENV, raising=False)
    assert settings.group_labels() == {}
    assert build._group_note() == sections.GROUP_COLUMN_NOTE and "`group_id`" in sections.GROUP_COLUMN_NOTE
    monkeypatch.setenv(settings.GROUP_LABELS_ENV, "0=women, 1 = men")
    assert settings.group_labels() == {"0": "women", "1": "men"}
    assert build._group_note() == "Groups (column `group_id` of the items landing file): `0` = women; `1` = men."
    monkeypatch.setenv(settings.GROUP_LABELS_ENV, "0=women,men")
    with pytest.raises(ValueError, match="'men' is not GROUP=LABEL"):
        settings.group_labels()
