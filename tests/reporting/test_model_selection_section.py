"""The report's model-selection section shows each candidate's paired difference vs the winner (clustered by
item) next to its cost, and its finding reads the paired interval, not the overlap of marginal CIs."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.reporting import selection
from fair_pipeline.reporting.model import StageMissing, Table


class _Inputs:
    """Stands in for ReportInputs: the stage tables from memory."""

    def __init__(self, tables: dict[str, pd.DataFrame]):
        self.tables, self.sources = tables, {}

    def stored_table(self, name, required):
        if name not in self.tables:
            raise StageMissing(f"no table {name!r}")
        return self.tables[name]


def _ranking(runner_low: float) -> pd.DataFrame:
    """Winner, runner-up (overlapping marginal CIs) and a not-estimable candidate."""
    return pd.DataFrame({
        "rank": [1, 2, np.nan], "model": ["w", "r", "x"], "cost": [0.1750, 0.1790, np.nan],
        "ci_low": [0.1600, 0.1640, np.nan], "ci_high": [0.1900, 0.1940, np.nan],
        "diff_vs_winner": [0.0, 0.0040, np.nan], "diff_ci_low": [np.nan, runner_low, np.nan],
        "diff_ci_high": [np.nan, 0.0040 + (0.0040 - runner_low), np.nan], "diff_p": [np.nan, 0.0123, np.nan],
        "paired_clusters": [1061, 1061, 1061], "paired_rows": [1100, 1100, 1100], "reason": ["", "", "too few"],
    })


def _section(frame: pd.DataFrame):
    content = selection.model_selection(_Inputs({"model_ranking": frame}))
    table = next(b.frame for b in content.blocks if isinstance(b, Table) and b.caption == "Model-selection ranking")
    return content, table


def test_paired_difference_and_p_are_shown_next_to_each_candidate():
    content, table = _section(_ranking(0.0009))
    column = "Δ cost vs winner [95% CI, paired by item]"
    assert table[column].tolist() == ["winner (reference)", "+0.0040 [+0.0009, +0.0071]", "not estimable"]
    assert table["p (Δ = 0)"].tolist() == ["n/a", "0.012", "n/a"]
    assert table["cost [95% CI]"].iloc[1] == "0.1790 [0.1640, 0.1940]"
    (finding,) = content.findings
    assert finding.status == "significant"  # marginal CIs overlap; the paired interval excludes 0
    assert "runner-up r costs +0.0040 [+0.0009, +0.0071] more" in finding.text
    assert "clustered by item: 1,061 items, 1,100 rows; p = 0.012)" in finding.text


def test_a_paired_interval_including_zero_is_within_noise():
    content, _ = _section(_ranking(-0.0010))
    (finding,) = content.findings
    assert finding.status == "not significant" and finding.text.endswith("within sampling noise")


def test_an_older_ranking_without_paired_columns_still_renders():
    frame = _ranking(0.0009).drop(columns=["diff_vs_winner", "diff_ci_low", "diff_ci_high", "diff_p",
                                           "paired_clusters", "paired_rows"])
    content, table = _section(frame)
    assert "Δ cost vs winner [95% CI, paired by item]" not in table.columns
    assert content.findings[0].text.endswith("(intervals overlap)") and content.findings[0].status == "not significant"


def test_finding_names_the_winning_family_and_each_other_familys_best():
    frame = _ranking(0.0010).assign(family=["pairwise_fair", "eo_transform", "reject_option"])
    frame = pd.concat([frame, pd.DataFrame({
        "rank": [3], "model": ["e2"], "family": ["eo_transform"], "cost": [0.19], "ci_low": [0.17], "ci_high": [0.21],
        "diff_vs_winner": [0.015], "diff_ci_low": [0.002], "diff_ci_high": [0.028], "diff_p": [0.02],
        "paired_clusters": [1061], "paired_rows": [1100], "reason": [""]})], ignore_index=True)
    content, table = _section(frame)
    assert "family" in table.columns
    texts = [f.text for f in content.findings]
    family = [t for t in texts if "winning family" in t]
    assert family == ["the winning family is pairwise_fair (w); other families' best vs the winner "
                      "(paired, clustered by item): eo_transform best r costs +0.0040 [+0.0010, +0.0070] more; "
                      "no estimable candidate in reject_option"]


def test_with_exposure_weighed_the_report_says_why_the_paired_differences_are_empty():
    frame = _ranking(0.0009).assign(exposure_weight=2.5, diff_ci_low=np.nan, diff_ci_high=np.nan, diff_p=np.nan)
    content, table = _section(frame)
    column = "Δ cost vs winner [95% CI, paired by item]"
    assert table[column].tolist() == ["winner (reference)", "+0.0040 (no paired CI: exposure weighed)", "not estimable"]
    notes = [b.markdown for b in content.blocks if hasattr(b, "markdown") and "No paired differences" in b.markdown]
    assert len(notes) == 1 and "μ = 2.5" in notes[0] and "rates' part" in notes[0]
    assert content.findings[0].text.endswith("(intervals overlap)")  # the marginal total-cost CIs, said as such
    unweighed, _ = _section(_ranking(0.0009).assign(exposure_weight=0.0))
    assert not [b for b in unweighed.blocks if hasattr(b, "markdown") and "No paired differences" in b.markdown]
