"""The fairness report: numbers from hand-made marts, sections fed hand-made report tables, missing stages, offline
HTML. (The report made from real store tables: tests/reporting/test_assets.py.)"""
import re

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.reporting import ReportInputs, build_report, render_html, summary_lines, write_report
from fair_pipeline.reporting import stored
from fair_pipeline.reporting.build import findings_json
from fair_pipeline.reporting.proportions import two_proportion_test, wilson_interval
from tests.charts.svg_reading import parse
from tests.shared_home import restore_home_after_each_test


def test_wilson_interval_hand_value_and_coverage():
    low, high = wilson_interval([30, 0], [100, 0])
    assert low[0] == pytest.approx(0.2189, abs=1e-4) and high[0] == pytest.approx(0.3958, abs=1e-4)
    assert np.isnan(low[1]) and np.isnan(high[1])  # no trials: not estimable, not 0
    rng = np.random.default_rng(7)
    k = rng.binomial(60, 0.3, size=20000)
    low, high = wilson_interval(k, np.full_like(k, 60))
    coverage = np.mean((low <= 0.3) & (0.3 <= high))
    assert 0.93 < coverage < 0.97
    with pytest.raises(ValueError, match="successes"):
        wilson_interval([5], [3])


def test_two_proportion_test_hand_value_and_null_calibration():
    diff, p = two_proportion_test(30, 100, 10, 100)
    assert diff == pytest.approx(0.2)
    assert p == pytest.approx(0.000407, rel=1e-2)  # z = 0.2 / sqrt(0.2 * 0.8 * 0.02) = 3.536
    assert np.isnan(two_proportion_test(0, 100, 0, 100)[1]) and np.isnan(two_proportion_test(1, 0, 1, 5)[1])
    rng = np.random.default_rng(3)
    ks = rng.binomial(400, 0.2, size=(4000, 2))
    ps = np.array([two_proportion_test(a, 400, b, 400)[1] for a, b in ks])
    assert 0.035 < np.mean(ps < 0.05) < 0.065


@pytest.fixture()
def warehouse(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA marts; CREATE SCHEMA staging")
    con.execute("""CREATE TABLE marts.daily_volume AS SELECT * FROM (VALUES
        (DATE '2024-01-01', 'observational', 1000, 90, 10), (DATE '2024-01-01', 'randomized', 400, 30, 0),
        (DATE '2024-01-02', 'observational', 1200, 95, 0), (DATE '2024-01-02', 'randomized', 500, 33, 5))
        AS t(partition_date, source, accepted_rows, clicks, rejected_rows)""")
    con.execute("""CREATE TABLE staging.stg_quarantine AS SELECT * FROM (VALUES
        (DATE '2024-01-01', 'observational', 'position out of range', 'a.parquet', 10),
        (DATE '2024-01-02', 'randomized', 'click not 0/1', 'b.parquet', 5))
        AS t(partition_date, source, reason, source_file, rejected_rows)""")
    # Shuffle CTR: 30/100 at the top vs 10/100 at the bottom (split over two days), production flat.
    con.execute("""CREATE TABLE marts.daily_ctr_by_position AS SELECT * FROM (VALUES
        (DATE '2024-01-01', 'shuffle', 1, '0', 50, 16, 0.32), (DATE '2024-01-02', 'shuffle', 1, '0', 50, 14, 0.28),
        (DATE '2024-01-01', 'shuffle', 2, '0', 100, 10, 0.1),
        (DATE '2024-01-01', 'production', 1, '1', 80, 8, 0.1), (DATE '2024-01-01', 'production', 2, '1', 80, 8, 0.1))
        AS t(partition_date, policy, position, group_label, impressions, clicks, ctr)""")
    con.close()
    return path


def _offline(html: str) -> bool:
    return not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", html) and "<script" not in html and "<link" not in html


def test_mart_sections_report_real_numbers(tmp_path, warehouse):
    inputs = ReportInputs(home=tmp_path, warehouse_path=warehouse)
    report = build_report(inputs)
    inputs.close()
    sections = {s.spec.key: s for s in report.sections}
    assert sections["data_volume"].available and sections["ctr_by_position"].available
    assert report.metrics()["data_volume.accepted_rows"] == 3100
    assert report.metrics()["data_volume.rejected_share"] == pytest.approx(15 / 3115)
    findings = {f.text: f.status for _, f in report.findings()}
    ctr = next(t for t in findings if "shuffled" in t)
    assert findings[ctr] == "significant" and "+0.2000" in ctr and "position effect p < 0.001" in ctr
    table = next(b for b in sections["ctr_by_position"].content.blocks if hasattr(b, "frame"))
    top = table.frame.set_index("position").loc[1, "shuffle"]
    assert top.startswith("0.3000 [0.2189, 0.3958]") and "(n = 100)" in top
    assert table.frame.set_index("position").loc[2, "production"].startswith("0.1000")
    quarantine = {b.caption: b.frame for b in sections["data_volume"].content.blocks if hasattr(b, "frame")}
    assert quarantine["Quarantine reasons (all partitions)"].to_dict("records")[0] == {
        "source": "observational", "reason": "position out of range", "rejected_rows": 10, "partitions": 1}
    by_partition = quarantine["Quarantined rows by partition and reason (partitions with none are left out)"].set_index("partition")
    assert by_partition.loc["2024-01-02", "randomized: click not 0/1"] == 5
    assert by_partition.loc["2024-01-02", "observational: position out of range"] == 0
    # Later stages have never run: each is listed as missing, nothing fails.
    missing = {s.spec.key for s in report.missing}
    assert missing == {"position_bias", "eo_transform", "exposure_merit", "logged_exposure", "roc", "xauc", "pairwise",
                       "audit_by_cells", "audit_trend", "lambda_frontier", "model_selection"}
    summary = "\n".join(summary_lines(report))
    assert summary.index("**Missing sections**") < summary.index(
        "- Model selection: stage 'selection': marts.model_ranking holds no results yet")
    assert any("Missing sections" in line for line in summary_lines(report))


def test_report_without_any_stage_lists_everything_as_missing(tmp_path):
    inputs = ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb")
    report = build_report(inputs)
    assert not report.available and len(report.missing) == 14
    assert "ingestion has never run" in report.missing[0].missing
    files = write_report(report, tmp_path / "reports")
    html = files.html.read_text()
    assert "No statistical test could be run yet" in html and html.count("class='missing'") == 14
    assert not (tmp_path / "none.duckdb").exists()  # reading never creates a warehouse


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """A home with the simulator's truth curve, and every report table made by hand."""
    home = tmp_path_factory.mktemp("report_home")
    positions = np.arange(1, 6)
    w = 1 / np.log2(positions + 1)
    fpr = np.linspace(0, 1, 11)
    tables = {
        "position_bias_curve": pd.DataFrame({"position": positions, "estimate": w + 0.01, "ci_low": w - 0.05, "ci_high": w + 0.05}),
        "eo_transform_cdf": pd.DataFrame({"group": ["0"] * 5 + ["1"] * 5, "score": list(range(5)) * 2,
                                          "cdf": [0.2, 0.4, 0.6, 0.8, 1.0, 0.1, 0.3, 0.5, 0.9, 1.0]}),
        "exposure_merit": pd.DataFrame({"ranking": ["before", "before", "after", "after"], "group": ["0", "1", "0", "1"],
                                        "exposure": [0.6, 0.4, 0.52, 0.48], "exposure_ci_low": [0.55, 0.35, 0.47, 0.43],
                                        "exposure_ci_high": [0.65, 0.45, 0.57, 0.53], "merit": [0.5] * 4,
                                        "merit_ci_low": [0.45] * 4, "merit_ci_high": [0.55] * 4, "n": [100] * 4}),
        "roc_curves": pd.DataFrame({"model": "m1", "group": np.repeat(["0", "1"], 11), "fpr": np.tile(fpr, 2),
                                    "tpr": np.concatenate([np.sqrt(fpr), fpr]), "tpr_ci_low": np.tile(fpr, 2) * 0.9,
                                    "tpr_ci_high": np.minimum(np.tile(fpr, 2) * 1.1 + 0.05, 1)}),
        "partial_auc": pd.DataFrame({"model": "m1", "group": ["0", "1", "2"], "estimate": [0.081, 0.062, np.nan],
                                     "ci_low": [0.075, 0.055, np.nan], "ci_high": [0.087, 0.069, np.nan],
                                     "n_pos": [400, 380, 2], "n_neg": [600, 620, 3], "p_value": [np.nan, 0.002, np.nan]}),
        "xauc": pd.DataFrame({"model": "m1", "direction": ["0>1", "1>0"], "estimate": [0.74, 0.71], "ci_low": [0.7, 0.67],
                              "ci_high": [0.78, 0.75], "n_pos": [400, 380], "n_neg": [620, 600], "p_value": [0.31, 0.31]}),
        "pairwise_accuracy": pd.DataFrame({"model": "m1", "group_a": ["0", "0", "1", "1"], "group_b": ["0", "1", "0", "1"],
                                           "estimate": [0.8, 0.75, 0.7, 0.78], "ci_low": [0.77, 0.72, 0.66, 0.75],
                                           "ci_high": [0.83, 0.78, 0.74, 0.81], "n_pairs": [1000] * 4}),
        "lambda_frontier": pd.DataFrame({"lambda": [0.0, 1.0, 10.0], "utility": [0.8, 0.78, 0.7], "utility_ci_low": [0.78, 0.76, 0.68],
                                         "utility_ci_high": [0.82, 0.8, 0.72], "unfairness": [0.1, 0.05, 0.01],
                                         "unfairness_ci_low": [0.08, 0.03, 0.0], "unfairness_ci_high": [0.12, 0.07, 0.03]}),
        "model_ranking": pd.DataFrame({"rank": [2, 1], "model": ["baseline", "fair λ=1"], "score": [0.7, 0.75]}),
    }
    truth_dir = home / "landing" / "_truth"
    truth_dir.mkdir(parents=True)
    pd.DataFrame({"position": positions.astype(np.int32), "weight": w}).to_parquet(truth_dir / "bias_curve.parquet")
    return home, tables


def _serve(monkeypatch, tables: dict[str, pd.DataFrame]) -> None:
    """Every stage's reader hands out the given report tables (as if made from its store tables)."""
    for key, source in list(stored.SOURCES.items()):
        mine = {name: frame for name, frame in tables.items() if stored.TABLES[name] == key}
        monkeypatch.setitem(stored.SOURCES, key, stored.Source(source.stage, source.tables,
                                                               lambda con, partition, mine=mine: dict(mine)))


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("tracked", root_of=lambda tracked: tracked[0])


def _exposure_tables() -> dict:
    """The audit's exposure tables of a small two-group log (the logged-exposure section reads them)."""
    import numpy as np

    from fair_pipeline.audit import exposure_parity

    rng = np.random.default_rng(0)
    w = 1.0 / np.log2(1.0 + np.arange(1, 4))
    position, group = rng.integers(1, 4, 2000), rng.choice(["0", "1"], 2000)
    result = exposure_parity(position, (rng.random(2000) < 0.2 * w[position - 1]).astype(int), group, w)
    common = {"scored_output": "production", "ranking": "production (logged ranking)", "examination": "fixed",
              "variance_estimand": result.variance_estimand}
    return {"fairness_audit_exposure_groups": result.per_group.assign(**common),
            "fairness_audit_exposure_pairs": result.pairs.assign(**common)}


def _audit_partitions(warehouse) -> pd.DataFrame:
    """Two audited partitions of production's group gap (cutoffs 0.1 and 1; the trend reads the smallest)."""
    import datetime as dt

    from fair_pipeline.audit.store import write_audit

    rows = pd.DataFrame({"day": ["2024-01-01", "2024-01-01", "2024-01-02", "2024-01-02"], "cutoff": [0.1, 1.0] * 2,
                         "diff": [-0.0123, -0.05, -0.0345, -0.06], "ci_low": [-0.03, -0.07, -0.0512, -0.08],
                         "ci_high": [0.0054, -0.03, -0.0178, -0.04], "verdict": ["inconclusive", "x", "gap larger than δ", "x"]})
    with duckdb.connect(str(warehouse)) as con:
        for day, part in rows.groupby("day"):
            pairs = part.drop(columns="day").assign(scored_output="production", group_a="1", group_b="0", estimable=True)
            date = dt.date.fromisoformat(day)
            write_audit(con, "relevance", date, date, {"fairness_audit_pairs": pairs, **_exposure_tables()}, partition=date)
    return rows[rows["cutoff"] == 0.1]


def test_every_section_renders_from_its_report_tables(tracked, warehouse, monkeypatch):
    home, tables = tracked
    _serve(monkeypatch, tables)
    trend_rows = _audit_partitions(warehouse)
    inputs = ReportInputs(home=home, warehouse_path=warehouse)
    report = build_report(inputs)
    inputs.close()
    assert not report.missing, [(s.spec.key, s.missing) for s in report.missing]
    findings = findings_json(report)["findings"]
    by_text = {f["text"]: f["status"] for f in findings}
    # Without FPR bounds, logged differences or verdicts (a table logged by an older audit) the comparison still
    # names both groups, the CI, p and n, and gets its verdict from the difference and p with the default δ = 0.02:
    # p = 0.002 but the interval (SE from p: 0.019 / 3.09, so -0.019 ± 0.012) reaches across -δ and TOST p = 0.435,
    # so the data cannot tell a gap within ±δ from a larger one: inconclusive, not "within ±δ".
    assert by_text["model m1, partial AUC: group 1 = 0.062 [0.055, 0.069] vs group 0 = 0.081 [0.075, 0.087], "
                   "difference -0.019 [CI n/a], p = 0.002, δ = 0.02, TOST p = 0.435 (n_pos = 380 / 400, n_neg = 620 / 600): "
                   "inconclusive"] == "inconclusive"
    assert by_text["model m1, partial AUC: group 2 vs group 0 not estimable (n_pos = 2 / 400, n_neg = 3 / 600)"] == "not estimable"
    # ΔxAUC = 0.03 with p = 0.31 (SE 0.0296): neither significant nor provably within ±0.02
    assert sum(s == "inconclusive" and "xAUC" in t for t, s in by_text.items()) == 2  # the pair, detailed and headline
    assert findings_json(report)["verdict_counts"] == {
        "gap larger than δ (significant)": 0, "gap significant but within ±δ": 0, "equivalent within ±δ (TOST, 95%)": 0,
        "inconclusive": 2, "not estimable": 1}
    assert any(t.startswith("estimate (chosen): simulated truth inside the 95% CI at 5 of 5 estimated positions; max |ŵ − w| = 0.0100")
               for t in by_text)
    assert report.metrics()["position_bias.w_pos1"] == pytest.approx(1.01)
    html = render_html(report)
    assert _offline(html)
    assert html.count("data:image/svg+xml;base64,") == len(report.figures()) == 9  # all but the optional xROC
    # the trend: one row per audited partition, each that day's stored gap and CI
    trend = next(s for s in report.sections if s.spec.key == "audit_trend")
    table = next(b.frame for b in trend.content.blocks if getattr(b, "caption", "").startswith("Every audited output"))
    assert table["partition"].tolist() == trend_rows["day"].tolist() and set(table["pair"]) == {"1 − 0"}
    # normalized (I(α)/α: the stored difference over the cutoff 0.1), as the ROC section shows it
    assert table["gap (95% CI)"].tolist() == ["-0.123 [-0.300, +0.054]", "-0.345 [-0.512, -0.178]"]
    assert table["verdict"].tolist() == trend_rows["verdict"].tolist()
    assert [f.text for f in trend.content.findings] == [
        "production, partial AUC gap I(α)/α at α = 0.1 (1 − 0): -0.345 [-0.512, -0.178] on 2024-01-02, -0.123 [-0.300, +0.054] "
        "on 2024-01-01 (2 audited partitions; each CI is that day's own)"]
    assert "0.062 [0.055, 0.069]" in html and "not estimable" in html
    files = write_report(report, home / "reports")
    assert {p.name for p in files.figures} == {f.name + ".svg" for f in report.figures()}
    assert all(parse(p.read_bytes()) is not None for p in files.figures)
    markdown = files.markdown.read_text()
    assert "| m1      | 1       |" in markdown or "0.062 [0.055, 0.069]" in markdown
    assert all(f"figures/{f.name}.svg" in markdown for f in report.figures())


def test_a_table_with_missing_columns_is_reported_not_raised(tracked, warehouse, monkeypatch):
    home, tables = tracked
    _serve(monkeypatch, {**tables, "model_ranking": pd.DataFrame({"model": ["a"]})})
    inputs = ReportInputs(home=home, warehouse_path=warehouse)
    report = build_report(inputs)
    inputs.close()
    section = next(s for s in report.sections if s.spec.key == "model_selection")
    assert not section.available and "lacks columns ['rank']" in section.missing


def test_a_stage_owner_can_replace_or_add_a_section(tmp_path, monkeypatch):
    from fair_pipeline.reporting import SectionContent, SectionSpec, Text, register_section, sections

    monkeypatch.setattr(sections, "SECTIONS", list(sections.SECTIONS))
    register_section(SectionSpec("position_bias", "Position bias (custom)", "position_bias",
                                 lambda inputs: SectionContent(blocks=[Text("custom")])))
    register_section(SectionSpec("elicitation", "Elicited metric", "elicitation", lambda inputs: SectionContent()), after="pairwise")
    keys = [s.key for s in sections.SECTIONS]
    assert keys.index("elicitation") == keys.index("pairwise") + 1 and len(keys) == 15
    report = build_report(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb"), sections.SECTIONS)
    assert next(s for s in report.sections if s.spec.key == "position_bias").available
    with pytest.raises(ValueError, match="no report section 'nope'"):
        register_section(SectionSpec("x", "x", "audit", lambda inputs: SectionContent()), after="nope")


def _audit_tables() -> dict[str, pd.DataFrame]:
    """An audit of two models with everything the audit logs: two cutoffs, differences with CIs, ΔxAUC.
    Model `prod` differs at I(0.1) (p = 0.001) but not at I(1) (p = 0.40); `eo` is `prod` after a per-group
    monotone transform: the same within-group AUCs, balanced xAUC."""
    pauc = pd.DataFrame({
        "model": ["prod"] * 4 + ["eo"] * 4, "group": ["a", "b"] * 4, "fpr_low": 0.0, "fpr_high": [0.1, 0.1, 1.0, 1.0] * 2,
        "estimate": [0.50, 0.40, 0.85, 0.84] * 2, "ci_low": [0.46, 0.36, 0.83, 0.82] * 2, "ci_high": [0.54, 0.44, 0.87, 0.86] * 2,
        "n_pos": [300, 200] * 4, "n_neg": [700, 800] * 4, "p_value": [np.nan, 0.001, np.nan, 0.40] * 2, "reference": "a",
        "diff": [np.nan, -0.10, np.nan, -0.01] * 2, "diff_ci_low": [np.nan, -0.157, np.nan, -0.038] * 2,
        "diff_ci_high": [np.nan, -0.043, np.nan, 0.018] * 2})
    xauc = pd.DataFrame({
        "model": ["prod", "prod", "eo", "eo"], "direction": ["a>b", "b>a"] * 2, "estimate": [0.95, 0.70, 0.83, 0.82],
        "ci_low": [0.94, 0.68, 0.81, 0.80], "ci_high": [0.96, 0.72, 0.85, 0.84], "n_pos": [300, 200] * 2, "n_neg": [800, 700] * 2,
        "p_value": [1e-6, 1e-6, 0.6, 0.6], "delta": [0.25, -0.25, 0.01, -0.01], "delta_ci_low": [0.22, -0.28, -0.02, -0.04],
        "delta_ci_high": [0.28, -0.22, 0.04, 0.02]})
    return {"partial_auc": pauc, "xauc": xauc}


def test_partial_auc_and_xauc_findings_name_model_cutoff_ci_and_p():
    from fair_pipeline.reporting.audit_sections import (
        group_comparisons,
        pauc_findings,
        pauc_table,
        xauc_findings,
        xauc_pairs,
    )

    tables = _audit_tables()
    comparisons = group_comparisons(tables["partial_auc"])
    findings = pauc_findings(comparisons)
    detailed = {f.text: f.status for f in findings if not f.headline}
    # -0.100 with SE 0.029 (from the CI): significant and beyond δ = 0.02; TOST p = Φ((-0.100 + 0.02) / 0.029) ≈ 1
    assert detailed["model prod, I(0.1): group b = 0.400 [0.360, 0.440] vs group a = 0.500 [0.460, 0.540], difference "
                    "-0.100 [-0.157, -0.043], p = 0.001, δ = 0.02, TOST p = 0.997 (n_pos = 200 / 300, n_neg = 800 / 700): "
                    "gap larger than δ (significant)"] == "gap larger than δ"
    # -0.010 [-0.038, +0.018]: SE 0.0143, TOST p = max(1 - Φ((-0.010 + 0.02)/0.0143), Φ((-0.010 - 0.02)/0.0143)) = max(0.242, 0.018): inconclusive
    assert detailed["model prod, I(1): group b = 0.840 [0.820, 0.860] vs group a = 0.850 [0.830, 0.870], difference "
                    "-0.010 [-0.038, +0.018], p = 0.400, δ = 0.02, TOST p = 0.242 (n_pos = 200 / 300, n_neg = 800 / 700): "
                    "inconclusive"] == "inconclusive"
    # Headlines: one per verdict, the two models (same verdicts at the same cutoffs) folded together.
    headlines = [f for f in findings if f.headline]
    assert [(f.status, f.text.split(":")[0]) for f in headlines] == [("gap larger than δ", "2 models (prod, eo)"),
                                                                     ("inconclusive", "2 models (prod, eo)")]
    assert "partial AUC of group b below group a by more than δ = 0.02 at I(0.1) (largest p = 0.001)" in headlines[0].text
    assert ("partial AUC of group b vs group a inconclusive at I(1): the data cannot tell whether the gap exceeds 0.02 "
            "(smallest p = 0.400)") in headlines[1].text
    table = pauc_table(tables["partial_auc"], comparisons).set_index(["model", "FPR cutoff"])
    assert table.loc[("prod", "I(0.1)"), "b − a [95% CI]"] == "-0.100 [-0.157, -0.043]"
    assert table.loc[("eo", "I(1)"), "p (b vs a)"] == "0.400" and table.loc[("eo", "I(1)"), "group a"] == "0.850 [0.830, 0.870]"
    assert table.loc[("prod", "I(0.1)"), "verdict (b vs a)"] == "gap larger than δ (significant)"
    assert table.loc[("prod", "I(1)"), "δ (b vs a)"] == "0.02"

    x = xauc_findings(xauc_pairs(tables["xauc"]))
    by_status = {f.status: f.text for f in x if f.headline}
    assert by_status["gap larger than δ"].startswith("model prod: cross-group ranking unbalanced against group b by more than δ = 0.02")
    assert "ΔxAUC = +0.250 [+0.220, +0.280], p < 0.001, δ = 0.02" in by_status["gap larger than δ"]
    assert by_status["inconclusive"].startswith("model eo: xAUC balance between groups a and b inconclusive")


def test_cdf_transform_section_shows_within_group_auc_unchanged_and_xauc_moved(tmp_path):
    from fair_pipeline.reporting.audit_sections import transform_comparison, transform_findings

    tables = _audit_tables()
    table = transform_comparison(tables["partial_auc"], tables["xauc"], "prod", ["eo"]).set_index("statistic")
    assert list(table.columns) == ["prod", "eo"]
    assert table.loc["AUC within group a", "prod"] == table.loc["AUC within group a", "eo"] == "0.850 [0.830, 0.870]"
    assert table.loc["xAUC(a>b)", "prod"] == "0.950 [0.940, 0.960]" and table.loc["xAUC(a>b)", "eo"] == "0.830 [0.810, 0.850]"
    (finding,) = transform_findings(tables["partial_auc"], tables["xauc"], "prod", ["eo"])
    assert finding.text.startswith("eo vs prod: within-group AUCs unchanged (largest change below 1e-09)")
    assert "xAUC(a>b) 0.950 [0.940, 0.960] → 0.830 [0.810, 0.850]" in finding.text
    # A transform that did move a within-group AUC is not reported as leaving it unchanged.
    moved = tables["partial_auc"].copy()
    moved.loc[(moved["model"] == "eo") & (moved["fpr_high"] == 1.0) & (moved["group"] == "b"), "estimate"] = 0.83
    (finding,) = transform_findings(moved, tables["xauc"], "prod", ["eo"])
    assert finding.text.startswith("eo vs prod: within-group AUCs changed by up to 0.01 ")


def _small_gaps_tables() -> dict[str, pd.DataFrame]:
    """With ~1M rows every gap is significant. One model has a partial-AUC gap of -0.08
    (beyond δ = 0.02); every other gap is tiny: ΔxAUC = +0.004 [+0.003, +0.005] (p < 0.001), partial-AUC gaps of
    0.003 at two cutoffs (one significant, one not and inside ±δ), as the audit logs them (verdict columns)."""
    from fair_pipeline.audit.stats.equivalence import classify_gaps

    diff, lo, hi = np.array([-0.08, 0.003, 0.003]), np.array([-0.082, 0.002, -0.001]), np.array([-0.078, 0.004, 0.007])
    p = np.array([1e-12, 1e-9, 0.14])
    verdict, p_tost = classify_gaps(diff, (hi - lo) / 3.92, 0.02)
    pauc = pd.DataFrame({
        "model": ["big"] * 2 + ["tiny"] * 4, "group": ["a", "b"] + ["a", "b"] * 2, "fpr_low": 0.0,
        "fpr_high": [0.1, 0.1, 0.1, 0.1, 1.0, 1.0], "estimate": [0.5, 0.42, 0.5, 0.503, 0.8, 0.803],
        "ci_low": [0.499, 0.419, 0.499, 0.502, 0.799, 0.80], "ci_high": [0.501, 0.421, 0.501, 0.504, 0.801, 0.806],
        "n_pos": [250000, 250000] * 3, "n_neg": [250000, 250000] * 3, "p_value": [np.nan, p[0], np.nan, p[1], np.nan, p[2]],
        "reference": "a", "diff": [np.nan, diff[0], np.nan, diff[1], np.nan, diff[2]],
        "diff_ci_low": [np.nan, lo[0], np.nan, lo[1], np.nan, lo[2]], "diff_ci_high": [np.nan, hi[0], np.nan, hi[1], np.nan, hi[2]],
        "margin": [np.nan, 0.02] * 3, "p_tost": [np.nan, p_tost[0], np.nan, p_tost[1], np.nan, p_tost[2]],
        "verdict": [None, verdict[0], None, verdict[1], None, verdict[2]]})
    xauc = pd.DataFrame({
        "model": ["tiny", "tiny"], "direction": ["a>b", "b>a"], "estimate": [0.802, 0.798], "ci_low": [0.8015, 0.7975],
        "ci_high": [0.8025, 0.7985], "n_pos": [250000, 250000], "n_neg": [250000, 250000], "p_value": [1e-14, 1e-14],
        "delta": [0.004, -0.004], "delta_ci_low": [0.003, -0.005], "delta_ci_high": [0.005, -0.003], "margin": 0.02,
        "p_tost": [0.0, 0.0], "verdict": "gap significant but within ±δ"})
    return {"partial_auc": pauc, "xauc": xauc}


def test_summary_leads_with_the_gap_beyond_delta_and_calls_the_tiny_significant_ones_within(tmp_path):
    from fair_pipeline.reporting import SectionSpec, StageMissing
    from fair_pipeline.reporting.audit_sections import roc_audit, xauc_audit

    tables = _small_gaps_tables()

    class Inputs:
        sources: dict = {}
        partition = None
        serving = None  # the registry not read, as ReportInputs' default

        def stored_table(self, name, required):
            if name not in tables:
                raise StageMissing(f"no {name}")
            return tables[name]

        def sql(self, query, tables, params=None):
            raise StageMissing("no warehouse")

    specs = [SectionSpec("roc", "ROC curves and partial AUC by group", "audit", roc_audit),
             SectionSpec("xauc", "xROC / xAUC", "audit", xauc_audit)]
    report = build_report(Inputs(), specs)
    assert not report.missing
    lines = summary_lines(report)
    text = "\n".join(lines)
    # 1. the one gap larger than δ leads the summary
    assert lines[0] == "**Group gaps larger than δ (significant and beyond the practical margin)**"
    assert lines[2].startswith("- ROC curves and partial AUC by group: model big: partial AUC of group b below group a by "
                               "more than δ = 0.02 at I(0.1)")
    # 2. then the counts per verdict
    assert lines[4].startswith("**4 comparisons: 1 gap larger than δ, 2 significant but within ±δ, 1 equivalent within "
                               "±δ, 0 inconclusive, 0 not estimable**")
    # 3. the tiny significant gaps are "within ±δ", never presented as significant findings
    assert "Significant at the 5% level" not in text and "significantly" not in text
    within = text[text.index("**Significant but within ±δ"):]
    assert "model tiny: ΔxAUC between groups a and b significant but within ±0.02" in within
    assert "model tiny: partial AUC of group b vs group a: significant but within ±0.02 at I(0.1)" in within
    assert text.index("by more than δ") < text.index("comparisons:") < text.index("significant but within ±0.02")
    counts = findings_json(report)["verdict_counts"]
    assert counts["gap larger than δ (significant)"] == 1 and counts["gap significant but within ±δ"] == 2
    assert sum(counts.values()) == 4
    # the not-significant 0.003 [-0.001, +0.007] at I(1): 95% CI inside ±0.02, so equivalent (TOST)
    assert counts["equivalent within ±δ (TOST, 95%)"] == 1


def test_lambdas_sort_as_numbers_and_counts_render_as_integers():
    from fair_pipeline.reporting.build import display_frame
    from fair_pipeline.reporting.formatting import model_order
    from fair_pipeline.reporting.frontier import lambda_frontier
    from fair_pipeline.reporting.model import StageMissing

    names = ["production", "eo_weighted", "ranker_2026-01-07_auc_lam_0.1", "ranker_2026-01-07_auc_lam_10",
             "ranker_2026-01-07_auc_lam_2", "eo_unweighted", "ranker_2026-01-07_auc_lam_1"]
    assert model_order(names) == ["production", "eo_weighted", "eo_unweighted", "ranker_2026-01-07_auc_lam_0.1",
                                  "ranker_2026-01-07_auc_lam_1", "ranker_2026-01-07_auc_lam_2", "ranker_2026-01-07_auc_lam_10"]
    frontier = pd.DataFrame({"lambda": ["10", "2", "0.1"], "utility": [0.7, 0.75, 0.8], "utility_ci_low": [0.68, 0.73, 0.78],
                             "utility_ci_high": [0.72, 0.77, 0.82], "unfairness": [0.01, 0.03, 0.1],
                             "unfairness_ci_low": [0.0, 0.02, 0.08], "unfairness_ci_high": [0.03, 0.04, 0.12]})

    class Inputs:
        sources: dict = {}

        def stored_table(self, name, required):
            if name != "lambda_frontier":
                raise StageMissing(f"no {name}")  # no audit of the rankers
            return frontier

    content = lambda_frontier(Inputs())
    table = next(b for b in content.blocks if hasattr(b, "frame")).frame
    assert table["lambda"].tolist() == ["0.1", "2", "10"]
    assert content.findings[0].text.startswith("λ = 0.1 → 10:")
    shown = display_frame(pd.DataFrame({"model": ["m"] * 2, "n_pos": [25000.0, np.nan], "n_neg": [3.0, 4.0],
                                        "estimate": [1.0, 2.0]}))
    assert shown["n_pos"].tolist() == ["25,000", "n/a"] and shown["n_neg"].tolist() == ["3", "4"]
    assert shown["estimate"].tolist() == [1.0, 2.0]  # not a count: left alone


def test_pairwise_section_judges_cross_group_gaps_against_delta():
    from fair_pipeline.reporting.pairwise import pairwise_accuracy

    tables = {
        "pairwise_accuracy": pd.DataFrame({"model": "m", "group_a": ["0", "0", "1", "1"], "group_b": ["0", "1", "0", "1"],
                                           "estimate": [0.8, 0.70, 0.75, 0.78], "ci_low": [0.79, 0.69, 0.74, 0.77],
                                           "ci_high": [0.81, 0.71, 0.76, 0.79], "n_pairs": [25000.0] * 4}),
        # logged by the audit (verdict column) for model m; an older run of model old without verdicts
        "pairwise_gaps": pd.DataFrame({"model": ["m", "old"], "group_a": ["0", "0"], "group_b": ["1", "1"],
                                       "estimate": [-0.05, 0.004], "ci_low": [-0.06, 0.003], "ci_high": [-0.04, 0.005],
                                       "p_value": [1e-20, 1e-9], "margin": [0.02, np.nan], "p_tost": [1.0, np.nan],
                                       "verdict": ["gap larger than δ (significant)", None], "n_queries": [2000.0, 2000.0]}),
    }

    class Inputs:
        sources: dict = {}

        def stored_table(self, name, required):
            return tables[name]

    content = pairwise_accuracy(Inputs())
    assert content.verdicts == ["gap larger than δ (significant)", "gap significant but within ±δ"]
    headlines = {f.status: f.text for f in content.findings if f.headline}
    assert headlines["gap larger than δ"].startswith("model m: pairwise ranking unbalanced against group 0 by more than "
                                                     "δ = 0.02")
    assert "A(0>1) − A(1>0) = -0.050 [-0.060, -0.040], p < 0.001, δ = 0.02" in headlines["gap larger than δ"]
    assert "(queries = 2,000)" in headlines["gap larger than δ"]
    assert headlines["within ±δ"].startswith("model old: pairwise accuracy gap between groups 0 and 1 significant but "
                                             "within ±0.02")
    table = next(b for b in content.blocks if hasattr(b, "frame") and b.caption.startswith("Cross-group")).frame
    assert table["verdict"].tolist() == ["gap larger than δ (significant)", "gap significant but within ±δ"]
    matrix = next(b for b in content.blocks if hasattr(b, "frame") and b.caption.startswith("Pairwise accuracy")).frame
    assert matrix.iloc[0, 2].endswith("(pairs = 25,000)")


def test_sections_say_which_uncertainty_their_intervals_are_for():
    from fair_pipeline.reporting.audit_sections import estimand_note

    clustered = pd.DataFrame({"variance_estimand": ["item_clustered", "item_clustered"]})
    assert "item-clustered" in estimand_note(clustered) and "population of items" in estimand_note(clustered)
    old_table = pd.DataFrame({"estimate": [0.5]})  # logged before the column existed: rows were independent
    assert "these exact items" in estimand_note(old_table)
