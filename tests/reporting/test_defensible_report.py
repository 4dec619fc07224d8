"""A report a fairness team can defend in a review: one definition per number (the trend shows its section's
effect, sign and verdict; λ in numeric order), only data up to the report's day, extrapolated positions never
headlined, every comparison judged against a δ by the interval rule, no repeated titles, no cut headlines."""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit.store import write_audit
from fair_pipeline.reporting import ReportInputs, sections, selection, trend
from fair_pipeline.reporting.audit_sections import group_comparisons, pauc_table
from fair_pipeline.reporting.model import Table
from fair_pipeline.reporting.summary import terminal_summary_lines

DAYS = [dt.date(2026, 1, 1), dt.date(2026, 1, 2)]
MODELS = ["ranker_x_lam_10", "production", "ranker_x_lam_2"]  # stored in text order: lam_10 before lam_2


def _audit(path) -> pd.DataFrame:
    """Two audited days of three outputs: per-group partial AUCs and the pair (a = '0', b = '1') with the audit's
    own columns: diff = I_0 - I_1 unnormalized, effect = diff / cutoff, the effect's CI, δ and verdict."""
    rows = []
    for d, day in enumerate(DAYS):
        for m, model in enumerate(MODELS):
            effect = 0.30 - 0.1 * m - 0.05 * d  # group 0 above group 1
            rows.append({"day": day, "scored_output": model, "group_a": "0", "group_b": "1", "cutoff": 0.1,
                         "diff": effect * 0.1, "diff_normalized": effect, "ci_low": (effect - 0.08) * 0.1,
                         "ci_high": (effect + 0.08) * 0.1, "effect": effect, "effect_ci_low": effect - 0.08,
                         "effect_ci_high": effect + 0.08, "p_value": 0.001, "margin": 0.02,
                         "verdict": "gap larger than δ (significant)" if effect - 0.08 > 0.02 else "inconclusive",
                         "estimable": True})
    frame = pd.DataFrame(rows)
    with duckdb.connect(str(path)) as con:
        for day, part in frame.groupby("day"):
            groups = pd.concat([pd.DataFrame({
                "scored_output": r.scored_output, "group": ["0", "1"], "is_overall": False, "cutoff": 0.1,
                "n_pos": [300, 200], "n_neg": [700, 800], "auc_normalized": [0.5, 0.5 - r.effect],
                "ci_low": [0.046, (0.5 - r.effect) * 0.1 - 0.004], "ci_high": [0.054, (0.5 - r.effect) * 0.1 + 0.004],
                "estimable": True, "variance_estimand": "conditional"}) for r in part.itertuples()])
            outputs = pd.DataFrame({"scored_output": MODELS, "status": "audited", "held_out": True})
            write_audit(con, "relevance", day, day, {"fairness_audit_pairs": part.drop(columns="day"),
                                                     "fairness_audit_groups": groups,
                                                     "fairness_audit_outputs": outputs}, partition=day)
    return frame


def test_the_trend_shows_the_sections_normalized_effect_sign_and_verdict_with_lambdas_in_numeric_order(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    _audit(path)
    inputs = ReportInputs(home=tmp_path, warehouse_path=path, partition=DAYS[-1])
    try:
        content = trend.audit_trend(inputs)
        roc = sections.audit_sections.roc_audit(inputs)
    finally:
        inputs.close()
    table = next(b.frame for b in content.blocks if isinstance(b, Table))
    assert list(table.columns[:2]) == ["verdict", "gap (95% CI)"]  # verdict and effect first
    today = table[table["partition"] == str(DAYS[-1])]
    section = next(b.frame for b in roc.blocks if isinstance(b, Table) and "group differences" in b.caption)
    # λ as numbers, lam 2 before lam 10 (never the text order 10, 2), in the section's order
    rankers = [m for m in today["model"] if m.startswith("ranker")]
    assert rankers == ["ranker_x_lam_2", "ranker_x_lam_10"] and today["model"].tolist() == section["model"].tolist()
    for model in MODELS:
        trend_row = today[today["model"] == model].iloc[0]
        section_row = section[(section["model"] == model) & (section["FPR cutoff"] == "I(0.1)")].iloc[0]
        # the section's group 1 − group 0, normalized, and its verdict: the same number and words in both places
        assert trend_row["pair"] == "1 − 0" and trend_row["gap (95% CI)"] == section_row["1 − 0 [95% CI]"]
        assert trend_row["gap (95% CI)"].startswith("-0.") and trend_row["verdict"] == section_row["verdict (1 vs 0)"]
        assert trend_row["δ"] == "0.02"


@pytest.fixture()
def marts(tmp_path):
    """Volume and CTR marts of two January days and a day eleven months later."""
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA marts; CREATE SCHEMA staging")
        con.execute("""CREATE TABLE marts.daily_volume AS SELECT * FROM (VALUES
            (DATE '2026-01-01', 'observational', 1000, 90, 10), (DATE '2026-01-02', 'observational', 1200, 95, 0),
            (DATE '2026-11-05', 'observational', 12300000, 9000, 7))
            AS t(partition_date, source, accepted_rows, clicks, rejected_rows)""")
        con.execute("""CREATE TABLE staging.stg_quarantine AS SELECT * FROM (VALUES
            (DATE '2026-01-01', 'observational', 'position out of range', 'a.parquet', 10),
            (DATE '2026-11-05', 'observational', 'click not 0/1', 'b.parquet', 7))
            AS t(partition_date, source, reason, source_file, rejected_rows)""")
        con.execute("""CREATE TABLE marts.daily_ctr_by_position AS SELECT * FROM (VALUES
            (DATE '2026-01-01', 'shuffle', 1, '0', 50, 16, 0.32), (DATE '2026-01-02', 'shuffle', 2, '0', 100, 10, 0.1),
            (DATE '2026-11-05', 'shuffle', 1, '0', 1000000, 900000, 0.9))
            AS t(partition_date, policy, position, group_label, impressions, clicks, ctr)""")
    return path


def test_a_days_report_counts_only_data_up_to_its_day(tmp_path, marts):
    inputs = ReportInputs(home=tmp_path, warehouse_path=marts, partition=dt.date(2026, 1, 2))
    try:
        volume, ctr = sections.data_volume(inputs), sections.ctr_by_position(inputs)
    finally:
        inputs.close()
    assert volume.metrics["accepted_rows"] == 2200 and volume.metrics["rejected_rows"] == 10
    assert volume.findings[0].text.startswith("2,200 impressions accepted over 2 partition(s)")
    reasons = next(b for b in volume.blocks if isinstance(b, Table) and b.caption.startswith("Quarantine reasons"))
    assert reasons.frame["reason"].tolist() == ["position out of range"] and "2025-12-26..2026-01-02" in reasons.caption
    cells = next(b for b in ctr.blocks if isinstance(b, Table))
    assert "(n = 50)" in cells.frame.loc[cells.frame["position"] == 1, "shuffle"].iloc[0]  # November's 1,000,000 left out
    assert ctr.metrics["ctr_shuffle_pos1"] == pytest.approx(0.32)


class _Curve:
    """ReportInputs serving one position-bias curve (no simulator truth)."""

    partition, sources = None, {}

    def __init__(self, curve):
        self.curve = curve

    def stored_table(self, name, required):
        return self.curve

    def truth(self, name):
        return None


def test_extrapolated_positions_are_marked_and_never_headlined():
    estimate = np.array([1.0, 0.6, 0.45, 0.45, 0.45])  # T = 3: positions 4-5 carry w_3 on
    curve = pd.DataFrame({"method": "adjacent_pairwise", "chosen": True, "position": np.arange(1, 6), "estimate": estimate,
                          "ci_low": estimate - 0.05, "ci_high": np.minimum(estimate + 0.05, 1.0),
                          "n_impressions": [25000.0, 25000, 24000, 100, 10], "truncated": [False, False, False, True, True]})
    content = sections.position_bias(_Curve(curve))
    (headline,) = [f for f in content.findings if f.headline]
    assert headline.text.startswith("examination weight at position 3 (adjacent_pairwise, the last estimated position) = "
                                    "0.450 [0.400, 0.500]") and "n = 24,000 impressions" in headline.text
    table = next(b.frame for b in content.blocks if isinstance(b, Table) and b.caption.startswith("ŵ_j"))
    column = table.set_index("position")["adjacent_pairwise (chosen)"]
    assert column[4] == column[5] == "extrapolated (w_T carried on)" and column[3] == "0.450 [0.400, 0.500]"
    assert "w_pos5" not in content.metrics and content.metrics["w_pos2"] == 0.6
    assert "Beyond position 3" in content.blocks[0].markdown


def test_the_exposure_ratio_is_judged_against_a_margin_on_the_log_scale():
    from fair_pipeline.reporting.eo_sections import exposure_ratio_findings

    # 0.986 [0.977, 0.995]: significantly different from 1, but the whole interval lies inside [0.8, 1.25]
    summary = pd.DataFrame({"method": ["raw"], "exposure_over_merit_ratio": [0.986],
                            "exposure_over_merit_ratio_se": [0.009 / 1.96]})
    (finding,) = exposure_ratio_findings(summary)
    assert finding.verdict == "gap significant but within ±δ" and finding.status == "within ±δ"
    assert "differs significantly" not in finding.text and "δ = log 1.25" in finding.text
    # 0.648 [0.536, 0.760] lies below 0.8 entirely: larger than δ
    summary = summary.assign(exposure_over_merit_ratio=[0.648], exposure_over_merit_ratio_se=[0.0571])
    assert exposure_ratio_findings(summary)[0].verdict == "gap larger than δ (significant)"


def test_an_interval_reaching_inside_delta_is_not_called_larger_than_delta():
    # A vs B at I(0.05) = -0.104 [-0.208, -0.001], p < 0.05, stored by an old audit without its verdict
    pauc = pd.DataFrame({"model": "m", "group": ["A", "B"], "estimate": [0.5, 0.396], "ci_low": [0.45, 0.3],
                         "ci_high": [0.55, 0.49], "n_pos": [100, 100], "n_neg": [300, 300], "p_value": [np.nan, 0.049],
                         "fpr_low": 0.0, "fpr_high": 0.05, "diff": [np.nan, -0.104], "diff_ci_low": [np.nan, -0.208],
                         "diff_ci_high": [np.nan, -0.001]})
    comparisons = group_comparisons(pauc)
    assert comparisons["verdict"].tolist() == ["inconclusive"]  # the CI reaches -0.001, inside ±0.02
    table = pauc_table(pauc, comparisons)
    assert list(table.columns[:4]) == ["model", "FPR cutoff", "verdict (B vs A)", "B − A [95% CI]"]


def test_findings_do_not_repeat_their_section_title():
    ranking = pd.DataFrame({"rank": [1, 2], "model": ["w", "r"], "cost": [0.17, 0.18], "ci_low": [0.16, 0.17],
                            "ci_high": [0.18, 0.19]})
    texts = [f.text for f in selection.selection_findings(ranking)]
    assert texts and not any(t.lower().startswith("model selection") for t in texts)


def test_terminal_headlines_are_never_cut():
    text = "gap " + " ".join(f"word{i}" for i in range(60)) + " [-0.208, -0.001]: inconclusive"
    data = {"findings": [{"section": "ROC", "status": "gap larger than δ", "text": text, "headline": True}],
            "missing": [], "verdict_summary": "1 comparison"}
    lines = terminal_summary_lines(data)
    assert lines[1] == f"  [GAP > δ] ROC: {text}" and not any(line.rstrip().endswith("…") for line in lines)


def _ranking(day: dt.date) -> pd.DataFrame:
    return pd.DataFrame({
        "partition_date": pd.Timestamp(day), "rank": [1, 2, 3, 4], "cost": [0.1729, 0.18, 0.181, 0.19],
        "model": ["reject_option/lam=0/bound=0.1", "pairwise_fair/slack=0.1", "threshold_postprocessor/eo",
                  "2026-01-01/probability/lam=0/alpha=1"],
        "family": ["reject_option", "pairwise_fair", "threshold_postprocessor", "eo_transform"],
        "champion_version": [None, None, None, "7"], "registered_model": "fair-ranker"})


def test_the_first_screen_says_what_is_deployed_and_that_the_winner_is_not_a_ranking_model(tmp_path):
    from fair_pipeline.reporting.stored import deployed_model
    from fair_pipeline.selection.store import MODEL_RANKING

    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA marts")
        frame = pd.concat([_ranking(DAYS[0]), _ranking(DAYS[1]).assign(champion_version=None)])  # day 2 registered none
        con.register("ranking", frame)
        con.execute(f"CREATE TABLE {MODEL_RANKING} AS SELECT * FROM ranking")
        deployed = deployed_model(con, DAYS[1])
    from fair_pipeline.reporting.decision import deployed_text

    text = deployed_text(_ranking(DAYS[0]), deployed, DAYS[0])
    assert text.startswith("**Deployed: `fair-ranker@champion` = version 7**, the candidate "
                           "`2026-01-01/probability/lam=0/alpha=1` (family eo_transform), ranked 4 of 4")
    assert "**Selection's winner is not deployed:** `reject_option/lam=0/bound=0.1` (family reject_option, cost 0.1729)" in text
    later = deployed_text(_ranking(DAYS[1]).assign(champion_version=None), deployed, DAYS[1])
    assert "This partition's selection registered no model, so the alias still points at 2026-01-01's" in later
    assert deployed_text(None, pd.DataFrame(), DAYS[0]).startswith("**Deployed: nothing yet.**")


def test_the_first_screen_draws_the_gaps_beyond_delta_with_the_band_and_explains_every_verdict(tmp_path):
    from fair_pipeline.audit.stats.equivalence import VERDICTS
    from fair_pipeline.reporting import build
    from fair_pipeline.reporting.decision import decision
    from fair_pipeline.reporting.model import Figure, Section, SectionContent, SectionSpec, gap_rows
    from tests.charts.svg_reading import parse

    gaps = gap_rows(pd.Series(["production", "production", "m"]), pd.Series(["I(0.1), group 1 − 0", "ΔxAUC(0, 1)", "x"]),
                    pd.Series([-0.38, -0.01, 0.3]), pd.Series([-0.61, -0.03, 0.25]), pd.Series([-0.15, 0.01, 0.35]),
                    pd.Series([0.02, 0.02, 0.02]), pd.Series(["gap larger than δ (significant)", "inconclusive",
                                                              "gap larger than δ (significant)"]))
    first = decision(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb"), gaps)
    (figure,) = [b for b in first.blocks if isinstance(b, Figure)]
    assert parse(figure.svg) is not None and "δ" in figure.caption
    drawn = next(b.frame for b in first.blocks if isinstance(b, Table))
    assert drawn["gap [95% CI]"].tolist() == ["-0.380 [-0.610, -0.150]", "+0.300 [+0.250, +0.350]"]  # production first
    legend = first.blocks[-1].markdown
    assert all(f"**{verdict}**" in legend for verdict in VERDICTS)
    section = Section(SectionSpec("roc", "ROC", "audit", lambda i: None), content=SectionContent(
        blocks=[Figure("roc", figure.svg, "ROC")], findings=[sections.Finding(f"finding {i}", "info") for i in range(50)]))
    page = build.render_html(build.Report("now", [section], decision=first))
    assert page.index("Decision first") < page.index("id='summary'") < page.index("id='roc'")
    # the 50 findings are collapsed under a count, after the section's figure
    roc = page[page.index("<h2 id='roc'>"):]
    assert roc.index("<img") < roc.index("<details class='findings'><summary>Findings (50)</summary>")


class _Frontier:
    """ReportInputs serving the training stage's frontier and the audit's tables of the same rankers."""

    partition, sources = None, {}

    def __init__(self, xauc_moves: bool):
        lams = [0.0, 1.0, 10.0, 2.0]  # stored in text order
        self.tables = {
            "lambda_frontier": pd.DataFrame({
                "lambda": lams, "utility": [0.77, 0.76, 0.73, 0.75], "utility_ci_low": [0.74, 0.73, 0.70, 0.72],
                "utility_ci_high": [0.80, 0.79, 0.76, 0.78], "unfairness": [0.057] * 4, "unfairness_ci_low": [0.051] * 4,
                "unfairness_ci_high": [0.063] * 4, "cutoff": 0.1, "penalty_target": [0.1, 0.03, 0.003, 0.015]}),
            "partial_auc": pd.concat([pd.DataFrame({
                "model": f"ranker_w_probability_lam_{lam:g}", "group": ["0", "1"], "estimate": [0.8, 0.4],
                "ci_low": [0.7, 0.3], "ci_high": [0.9, 0.5], "n_pos": 100, "n_neg": 300, "p_value": [np.nan, 0.001],
                "fpr_low": 0.0, "fpr_high": 0.1, "diff": [np.nan, -0.4], "diff_ci_low": [np.nan, -0.6],
                "diff_ci_high": [np.nan, -0.2], "margin": 0.02, "verdict": [None, "gap larger than δ (significant)"]})
                for lam in lams], ignore_index=True),
            "xauc": pd.concat([pd.DataFrame({
                "model": f"ranker_w_probability_lam_{lam:g}", "direction": ["0>1", "1>0"],
                "estimate": [0.5, 0.5 + d], "ci_low": [0.45, 0.45 + d], "ci_high": [0.55, 0.55 + d], "n_pos": 100,
                "n_neg": 300, "p_value": 0.01, "delta": [-d, d], "delta_ci_low": [-d - 0.05, d - 0.05],
                "delta_ci_high": [-d + 0.05, d + 0.05], "margin": 0.02, "verdict": "inconclusive"})
                for lam, d in zip(lams, [0.288, 0.2, 0.094 if xauc_moves else 0.27, 0.15 if xauc_moves else 0.28])],
                ignore_index=True)}

    def stored_table(self, name, required):
        return self.tables[name]


def test_the_frontier_plots_the_penalty_target_and_the_audited_gaps_and_says_which_moved():
    from fair_pipeline.reporting.frontier import lambda_frontier
    from fair_pipeline.reporting.model import Figure
    from tests.charts.svg_reading import parse, texts

    content = lambda_frontier(_Frontier(xauc_moves=True))
    table = next(b.frame for b in content.blocks if isinstance(b, Table))
    assert table["lambda"].tolist() == ["0", "1", "2", "10"]
    assert table["audited ΔxAUC(0, 1) [95% CI]"].tolist() == ["-0.288 [-0.338, -0.238]", "-0.200 [-0.250, -0.150]",
                                                              "-0.150 [-0.200, -0.100]", "-0.094 [-0.144, -0.044]"]
    (figure,) = [b for b in content.blocks if isinstance(b, Figure)]
    titles = set(texts(parse(figure.svg)))
    assert {"ΔxAUC(0, 1)", "I(0.1) gap, group 1 − 0", "Î (penalty target, training rows)"} <= titles
    (finding,) = content.findings
    assert finding.text.startswith("λ = 0 → 10: moves Î (penalty target, training rows) 0.100 [CI n/a] → 0.003")
    assert "ΔxAUC(0, 1) -0.288 [-0.338, -0.238] → -0.094 [-0.144, -0.044]" in finding.text.split("does not move")[0]
    assert "I(0.1) gap, group 1 − 0 -0.400 [-0.600, -0.200] → -0.400" in finding.text.split("does not move")[1]
    # a penalty that moves nothing the report shows is said to move nothing
    still = _Frontier(xauc_moves=False)
    still.tables["lambda_frontier"]["penalty_target"] = 0.1
    (finding,) = lambda_frontier(still).findings
    assert "the mitigation moves none of the metrics shown" in finding.text


def test_volume_counts_render_as_counts():
    from fair_pipeline.reporting.build import display_frame

    per_day = pd.DataFrame({"partition": ["2026-01-01"], "observational accepted": [1250000.0],
                            "observational rejected": [0.0], "clicks": [25000.0], "items": [300.0]})
    shown = display_frame(per_day).iloc[0]
    assert (shown["observational accepted"], shown["observational rejected"]) == ("1,250,000", "0")
    assert (shown["clicks"], shown["items"]) == ("25,000", "300")


def test_the_report_docs_show_the_first_screen_screenshot():
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    page = (docs / "tracking_and_report.md").read_text()
    assert "](images/fairness_report_first_screen.png)" in page and "decision-first screen" in page
    assert (docs / "images" / "fairness_report_first_screen.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
