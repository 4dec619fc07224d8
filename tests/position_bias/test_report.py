"""Agreement check, markdown table and figure of a position-bias curve."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.position_bias import compare_estimates
from fair_pipeline.position_bias.report import curve_figure, curve_markdown
from tests.charts.svg_reading import legend_labels, marks, parse


def curve(weights, ses):
    weights, ses = np.asarray(weights, float), np.asarray(ses, float)
    frame = pd.DataFrame(
        {
            "position": np.arange(1, len(weights) + 1),
            "weight": weights,
            "ci_low": weights - 1.96 * ses,
            "ci_high": weights + 1.96 * ses,
            "se": ses,
            "impressions": 1000,
            "clicks": 100,
            "truncated": False,
        }
    )
    frame.attrs["level"] = 0.95
    return frame


def test_agreement_uses_the_joint_standard_error_on_the_log_scale():
    obs = curve([1.0, 0.60, 0.50, np.nan], [0.0, 0.03, 0.01, 0.0])
    rnd = curve([1.0, 0.50, 0.40, 0.3], [0.0, 0.04, 0.01, 0.01])
    table, summary = compare_estimates(obs, rnd)
    z2 = np.log(0.6 / 0.5) / np.hypot(0.03 / 0.6, 0.04 / 0.5)  # 1.93: agrees at 95%
    z3 = np.log(0.5 / 0.4) / np.hypot(0.01 / 0.5, 0.01 / 0.4)  # 6.97: disagrees
    assert table["z"].iloc[1] == pytest.approx(z2) and table["z"].iloc[2] == pytest.approx(z3)
    assert table["agrees"].tolist()[1:3] == [True, False]
    assert pd.isna(table["agrees"].iloc[3]) and pd.isna(table["agrees"].iloc[0])  # NaN weight, position 1
    assert summary["positions_compared"] == 2
    assert summary["disagreeing_positions"] == [3] and summary["disagreeing_positions_bonferroni"] == [3]
    assert summary["agrees"] is False


def test_markdown_marks_not_estimable_positions_and_shows_truth():
    text = curve_markdown(curve([1.0, 0.5, np.nan], [0.0, 0.02, np.nan]), truth=np.array([1.0, 0.63, 0.5]))
    lines = text.splitlines()
    assert lines[0] == "| position | weight | 95% CI | SE | impressions | clicks | true w |"
    assert lines[3] == "| 2 | 0.5000 | [0.4608, 0.5392] | 0.0200 | 1000 | 100 | 0.6300 |"
    assert "n/a (not estimable)" in lines[4]


def test_figure_draws_one_band_per_curve_and_the_truth():
    root = parse(curve_figure({"a": curve([1, 0.5, 0.3], [0, 0.02, 0.02]), "b": curve([1, 0.6, 0.4], [0, 0.01, 0.01])},
                              truth=np.array([1.0, 0.55, 0.35])))
    assert [m.get("data-series") for m in marks(root, "line")] == ["a", "b", "true w_j"]
    assert [m.get("data-series") for m in marks(root, "band")] == ["a", "b"]
    assert legend_labels(root) == ["a", "b", "true w_j"]
