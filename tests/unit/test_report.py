"""The fairness report: numbers from hand-made marts, hooks fed through MLflow, missing stages, offline HTML."""
import re

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.core.proportions import two_proportion_test, wilson_interval
from fair_pipeline.reporting import ReportInputs, build_report, render_html, summary_lines, write_report
from fair_pipeline.reporting.build import findings_json
from fair_pipeline.tracking import MLflowTracking


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
    inputs = ReportInputs(home=tmp_path, warehouse_path=warehouse, tracking=None)
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
    # Later stages have never run: each is listed as missing, nothing fails.
    missing = {s.spec.key for s in report.missing}
    assert missing == {"position_bias", "eo_transform", "exposure_merit", "roc", "xauc", "pairwise", "lambda_frontier", "model_selection"}
    assert any("Missing sections" in line for line in summary_lines(report))


def test_report_without_any_stage_lists_everything_as_missing(tmp_path):
    inputs = ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb", tracking=None)
    report = build_report(inputs)
    assert not report.available and len(report.missing) == 10
    assert "ingestion has never run" in report.missing[0].missing
    files = write_report(report, tmp_path / "reports")
    html = files.html.read_text()
    assert "No statistical test could be run yet" in html and html.count("class='missing'") == 10
    assert not (tmp_path / "none.duckdb").exists()  # reading never creates a warehouse


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    home = tmp_path_factory.mktemp("report_home")
    tracking = MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))
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
    with tracking.start_run(None, "audit", run_name="synthetic") as run:
        for name, frame in tables.items():
            run.log_table(frame, name)
    truth_dir = home / "landing" / "_truth"
    truth_dir.mkdir(parents=True)
    pd.DataFrame({"position": positions.astype(np.int32), "weight": w}).to_parquet(truth_dir / "bias_curve.parquet")
    return home, tracking


def test_every_hook_section_renders_from_mlflow_tables(tracked, warehouse):
    home, tracking = tracked
    inputs = ReportInputs(home=home, warehouse_path=warehouse, tracking=tracking)
    report = build_report(inputs)
    inputs.close()
    assert not report.missing, [(s.spec.key, s.missing) for s in report.missing]
    findings = findings_json(report)["findings"]
    by_text = {f["text"]: f["status"] for f in findings}
    assert by_text["model m1: partial AUC of group 1 = 0.062 [0.055, 0.069] vs the reference group "
                   "(p = 0.002; n_pos = 380, n_neg = 620)"] == "significant"
    assert by_text["model m1: partial AUC of group 2: not estimable (n_pos = 2, n_neg = 3)"] == "not estimable"
    assert sum(s == "not significant" and "xAUC" in t for t, s in by_text.items()) == 2
    assert any("truth lies inside the 95% CI at 5 of 5" in t for t in by_text)
    assert report.metrics()["position_bias.w_pos1"] == pytest.approx(1.01)
    html = render_html(report)
    assert _offline(html)
    assert html.count("data:image/png;base64,") == len(report.figures()) == 8  # all but the optional xROC
    assert "0.062 [0.055, 0.069]" in html and "not estimable" in html
    files = write_report(report, home / "reports")
    assert {p.name for p in files.figures} == {f.name + ".png" for f in report.figures()}
    markdown = files.markdown.read_text()
    assert "| m1      | 1       |" in markdown or "0.062 [0.055, 0.069]" in markdown
    assert all(f"figures/{f.name}.png" in markdown for f in report.figures())


def test_a_table_with_missing_columns_is_reported_not_raised(tracked, warehouse):
    home, tracking = tracked
    with tracking.start_run(None, "selection", run_name="broken") as run:
        run.log_table(pd.DataFrame({"model": ["a"]}), "model_ranking")
    inputs = ReportInputs(home=home, warehouse_path=warehouse, tracking=tracking)
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
    assert keys.index("elicitation") == keys.index("pairwise") + 1 and len(keys) == 11
    report = build_report(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb"), sections.SECTIONS)
    assert next(s for s in report.sections if s.spec.key == "position_bias").available
    with pytest.raises(ValueError, match="no report section 'nope'"):
        register_section(SectionSpec("x", "x", "audit", lambda inputs: SectionContent()), after="nope")
