"""The main job end to end on a tiny simulated home: report files, MLflow run, Dagster metadata, CLI summary.

`fair-pipeline run --partitions 2` on three simulated days trains and audits the two newest partitions (each trained on the days
before it): one report per partition under reports/<D>/, `reports/latest` pointing at the newest, and a trend
section over both audited partitions."""
import datetime as dt
import json
import re

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.commands import main
from fair_pipeline.platform import settings
from fair_pipeline.platform.tracking import (
    TAG_DAGSTER_RUN,
    TAG_PARTITION,
    TAG_WINDOW,
    MLflowTracking,
    TrackingUnavailableError,
)
from fair_pipeline.reporting import ReportInputs, Table, Text, build_report
from tests.figure_links import linked_figure
from tests.shared_home import restore_home_after_each_test


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("main_job")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAIR_PIPELINE_HOME", str(path))
        mp.setenv("DAGSTER_HOME", str(path / "dagster_home"))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield path


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home", built_by=("main_job_output",))


@pytest.fixture(scope="module")
def main_job_output(home):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", "--days", "3", "--partitions", "2", "--requests-per-day", "200", "--slots", "10",
                         "--items", "200"])
    assert code == 0, out.getvalue()
    return out.getvalue()


def _days(home) -> list[str]:
    """The simulated partitions (the landing directories)."""
    return sorted(p.name.removeprefix("date=") for p in (home / "landing" / "observational").glob("date=*"))


def test_one_report_per_trained_partition_and_latest_points_at_the_newest(home, main_job_output):
    days = _days(home)
    assert len(days) == 3
    reports = home / "reports"
    # the first day has nothing before it to train on: the two newest partitions are trained and reported
    assert sorted(p.name for p in reports.iterdir() if p.is_dir() and not p.is_symlink()) == days[1:]
    for day in days[1:]:
        assert {"fairness_report.html", "fairness_summary.md", "findings.json"} <= {p.name for p in (reports / day).iterdir()}
    assert (reports / "latest").is_symlink() and (reports / "latest").resolve() == (reports / days[-1]).resolve()
    assert f"partition {days[1]}: run" in main_job_output and f"partition {days[2]}: run" in main_job_output


def test_main_job_prints_report_ui_and_findings(home, main_job_output):
    from fair_pipeline.reporting.latest import latest_report_dir

    latest = latest_report_dir(home / "reports")  # reports/<newest partition>/
    report = latest / "fairness_report.html"
    assert latest.name == _days(home)[-1]
    assert f"fairness report:    {report}" in main_job_output
    assert re.search(r"open the UIs: +fair-pipeline (--home \S+ )?ui ", main_job_output)
    # one progress line per step (Dagster's console logger, which repeated every finding, shows warnings only)
    assert re.search(r"^\[\s*\d+\] reporting/fairness_report\s+done\s+[\d.]+s", main_job_output, re.MULTILINE)
    # a quiet summary: at most 20 lines after the run's last line; every headline is in findings.json and the report
    after = main_job_output.rsplit(" succeeded in ", 1)[1].splitlines()[1:]
    assert 0 < len(after) <= 20, after
    assert "not in the report" not in main_job_output
    headlines = [f"[{f['status']}] {f['section']}: {f['text']}"
                 for f in json.loads((latest / "findings.json").read_text())["findings"] if f["headline"]]
    assert any(h.startswith("[info] Data volume and quarantine:") for h in headlines)
    assert any("under shuffled (randomized) traffic, CTR at position 1 minus position 10" in h for h in headlines)
    assert any(h.startswith("[info] Per-group CDF transforms: eo_weighted vs production: within-group AUCs unchanged")
               for h in headlines)
    assert any(re.search(r"ROC curves and partial AUC by group: .*at I\(0\.\d+\)", h) for h in headlines)
    # the same counts per verdict as the report's summary, after the headlines (gaps larger than δ first)
    counts = re.search(r"(\d+) comparisons: (\d+) gaps? larger than δ, (\d+) significant but within ±δ, (\d+) equivalent "
                       r"within ±δ, (\d+) inconclusive, (\d+) not estimable", main_job_output)
    assert counts and int(counts[1]) == sum(int(c) for c in counts.groups()[1:]) > 0
    summary = json.loads((latest / "findings.json").read_text())["verdict_summary"]
    assert summary == counts[0]
    printed = [line for line in main_job_output.splitlines() if line.startswith("  [")]
    order = ["GAP > δ", "SIGNIFICANT", "not significant", "significant, within ±δ", "equivalent within ±δ",
             "inconclusive", "not estimable", "fact"]
    ranks = [next(i for i, label in enumerate(order) if line.startswith(f"  [{label}]")) for line in printed]
    assert ranks == sorted(ranks)  # gaps larger than δ lead
    html = report.read_text()
    assert "Data volume and quarantine" in html and "data:image/svg+xml;base64," in html
    # model selection: the metric labelled as simulated, the ranking with costs and intervals
    assert "Metric: SIMULATED oracle" in html and "Elicited metric (λ, a, B)" in html and "cost [95% CI]" in html
    findings = json.loads((latest / "findings.json").read_text())
    assert findings["metrics"]["data_volume.accepted_rows"] > 0


def test_report_is_logged_to_mlflow_and_linked_from_dagster(home, main_job_output):
    instance = dg.DagsterInstance.get()
    event = instance.get_latest_materialization_event(dg.AssetKey(["reporting", "fairness_report"]))
    metadata = event.asset_materialization.metadata
    run_id = metadata["mlflow_run_id"].value
    newest = _days(home)[-1]
    assert event.asset_materialization.partition == newest
    assert metadata["report_html"].value == str(settings.reports_dir() / newest / "fairness_report.html")
    assert metadata["latest"].value == f"reports/latest -> {newest}"
    # Every section: data volume, CTR, position bias, the EO stage's CDFs and exposure/merit, the audit's logged
    # exposure parity, ROC/partial AUC, xAUC and pairwise sections, the audit trend, the λ frontier and model selection.
    assert run_id in metadata["mlflow_run"].value and metadata["sections_available"].value == 14
    linked_figure(metadata["figure_ctr_by_position"].value)
    tracking = MLflowTracking()
    run = tracking.client().get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags[TAG_DAGSTER_RUN] == event.run_id
    assert run.data.tags["dagster.asset_key"] == "reporting/fairness_report"
    assert run.data.tags[TAG_PARTITION] == newest and TAG_WINDOW not in run.data.tags
    assert run.data.tags["dagster.code_version"] == "2"
    artifacts = {a.path for a in tracking.client().list_artifacts(run_id, "report")}
    assert {"report/fairness_report.html", "report/fairness_summary.md", "report/findings.json"} <= artifacts


def test_the_report_reads_the_warehouse_and_only_what_is_deployed_from_the_registry(home, main_job_output, tmp_path):
    """A report made against a fresh, empty tracking store has every section with the same findings as the main
    job's report of that partition, except what is deployed: the registry is its authority, and an empty one says
    nothing is, beside what the day's selection last registered."""
    from fair_pipeline.definitions import fairness_report
    from fair_pipeline.platform.resources import DuckDBWarehouse

    newest = _days(home)[-1]
    findings = home / "reports" / newest / "findings.json"
    before = json.loads(findings.read_text())
    empty = MLflowTracking(tracking_uri=f"sqlite:///{tmp_path / 'empty.db'}", artifact_root=str(tmp_path / "artifacts"))
    result = dg.materialize([fairness_report], resources={"warehouse": DuckDBWarehouse(), "mlflow": empty},
                            partition_key=newest)
    assert result.success
    metadata = result.asset_materializations_for_node("reporting__fairness_report")[0].metadata
    assert metadata["sections_available"].value == 14 and metadata["sections_missing"].value == []
    after = json.loads(findings.read_text())

    def deployed(f):
        return f["text"].startswith("Deployed")

    assert [f["text"] for f in after["findings"] if not deployed(f)] == \
        [f["text"] for f in before["findings"] if not deployed(f)]
    assert after["verdict_counts"] == before["verdict_counts"]
    [was] = [f["text"] for f in before["findings"] if deployed(f)]
    [now] = [f["text"] for f in after["findings"] if deployed(f)]
    assert was.startswith("Deployed: fair-ranker@champion = version")
    assert now.startswith("Deployed: nothing. fair-ranker@champion is not set")
    assert "Last registered by selection: fair-ranker@champion = version" in now


def test_unreachable_mlflow_fails_the_report_with_a_clear_message(home, main_job_output):
    from fair_pipeline.definitions import fairness_report
    from fair_pipeline.platform.resources import DuckDBWarehouse
    from fair_pipeline.ui import free_port

    port = free_port()
    result = dg.materialize(
        [fairness_report],
        resources={"warehouse": DuckDBWarehouse(), "mlflow": MLflowTracking(tracking_uri=f"http://127.0.0.1:{port}")},
        partition_key=_days(home)[-1],
        raise_on_error=False,
    )
    assert not result.success
    messages = []
    for event in result.all_events:
        error = getattr(getattr(event, "event_specific_data", None), "error", None)
        while error is not None:
            messages.append((event.event_type_value, error.message))
            error = error.cause
    assert any(
        kind == "RESOURCE_INIT_FAILURE" and f"MLflow tracking server http://127.0.0.1:{port} is unreachable" in message
        for kind, message in messages
    ), messages


_FLAKY_CALLS = []


class FlakyTracking(MLflowTracking):
    """Behaves like a store that is locked on the first attempt only."""

    def start_run(self, context, stage, **kwargs):
        _FLAKY_CALLS.append(stage)
        if len(_FLAKY_CALLS) == 1:
            raise TrackingUnavailableError("MLflow store sqlite:///x unavailable: database is locked")
        return super().start_run(context, stage, **kwargs)


def test_a_locked_store_is_retried_and_the_report_then_succeeds(home, main_job_output):
    from fair_pipeline.definitions import fairness_report
    from fair_pipeline.platform.resources import DuckDBWarehouse

    days = _days(home)
    latest = (home / "reports" / "latest").resolve()
    before = (home / "reports" / days[1] / "findings.json").stat().st_mtime_ns
    # an older partition's report: rewritten in its own directory; `latest` stays on the newest
    result = dg.materialize([fairness_report], resources={"warehouse": DuckDBWarehouse(), "mlflow": FlakyTracking()},
                            partition_key=days[1])
    assert result.success
    assert _FLAKY_CALLS == ["reporting", "reporting"]
    assert any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
    runs = MLflowTracking().client().search_runs([MLflowTracking().experiment_id("reporting")])
    assert sum(r.info.status == "FINISHED" for r in runs) == 3  # the main job's two reports and this one
    assert (home / "reports" / days[1] / "findings.json").stat().st_mtime_ns > before
    assert (home / "reports" / "latest").resolve() == latest == (home / "reports" / days[-1]).resolve()
    metadata = result.asset_materializations_for_node("reporting__fairness_report")[0].metadata
    assert metadata["latest"].value == f"reports/latest -> {days[-1]}"


def test_the_report_logs_one_line_so_verbose_runs_print_each_finding_once(home, main_job_output):
    """`run --verbose` shows Dagster's log, then every finding: the asset's log names the findings file instead of
    repeating them."""
    from fair_pipeline.definitions import fairness_report
    from fair_pipeline.platform.resources import DuckDBWarehouse

    newest = _days(home)[-1]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([fairness_report], resources={"warehouse": DuckDBWarehouse(), "mlflow": MLflowTracking()},
                            partition_key=newest, instance=instance)
    assert result.success
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    findings = json.loads((home / "reports" / newest / "findings.json").read_text())["findings"]
    assert len(findings) > 5
    assert not [f["text"] for f in findings if len(f["text"]) > 20 and any(f["text"] in m for m in messages)]
    line = re.compile(rf"{len(findings)} findings in \d+ sections: {re.escape(str(home / 'reports' / newest / 'findings.json'))}")
    assert [m for m in messages if line.fullmatch(m)], messages


def _table(section, caption: str) -> pd.DataFrame:
    return next(b.frame for b in section.content.blocks if isinstance(b, Table) and b.caption.startswith(caption))


def _cells(frame: pd.DataFrame, column: str) -> np.ndarray:
    """'0.812 [0.790, 0.833] ...' cells -> rows of (estimate, low, high)."""
    return np.array([[float(x) for x in re.findall(r"[-+]?\d+\.\d+", cell)[:3]] for cell in frame[column]])


def test_every_section_has_real_numbers_from_the_run(home, main_job_output):
    """If a stage stopped storing a table, or a section lost its numbers, this fails: every section is
    rebuilt from the run's warehouse and checked against it and the simulator's truth."""
    days = _days(home)
    inputs = ReportInputs(home=home, warehouse_path=home / "warehouse.duckdb", partition=dt.date.fromisoformat(days[-1]))
    try:
        report = build_report(inputs)
    finally:
        inputs.close()
    sections = {s.spec.key: s for s in report.sections}
    assert not report.missing, [(s.spec.key, s.missing) for s in report.missing]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        accepted = con.execute("SELECT CAST(partition_date AS VARCHAR), count(*) FROM raw.observational_impressions "
                               "GROUP BY ALL ORDER BY 1").fetchall()

    volume = _table(sections["data_volume"], "Accepted and quarantined rows").set_index("partition")
    assert [(d, int(volume.loc[d, "observational accepted"])) for d, _ in accepted] == accepted and len(accepted) == 3
    ctr = _table(sections["ctr_by_position"], "CTR")
    assert ctr["position"].tolist() == list(range(1, 11)) and (_cells(ctr, "shuffle")[:, 0] > 0).any()

    # Position bias: every method at every position; the chosen curve's CIs cover the simulated truth at most positions.
    curves = _table(sections["position_bias"], "ŵ_j").set_index("position")
    assert curves.index.tolist() == list(range(1, 11))
    assert {"adjacent_pairwise (chosen)", "randomized", "naive", "true w (simulated)"} <= set(curves.columns)
    chosen = _cells(curves, "adjacent_pairwise (chosen)")
    truth = curves["true w (simulated)"].to_numpy()
    assert chosen[0, 0] == 1.0 and np.mean((chosen[:, 1] <= truth + 5e-4) & (truth - 5e-4 <= chosen[:, 2])) >= 0.8
    assert report.metrics()["position_bias.w_pos2"] == pytest.approx(chosen[1, 0], abs=5e-4)

    # CDF transform: within-group AUCs identical for production and the EO transforms, xAUCs moved.
    comparison = _table(sections["eo_transform"], "Within-group AUC and xAUC").set_index("statistic")
    within = [s for s in comparison.index if s.startswith("AUC within group")]
    crossed = [s for s in comparison.index if s.startswith("xAUC(")]
    assert len(within) == 2 and len(crossed) == 2
    assert (comparison.loc[within, "production"] == comparison.loc[within, "eo_weighted"]).all()
    assert (comparison.loc[crossed, "production"] != comparison.loc[crossed, "eo_weighted"]).all()

    exposure = _table(sections["exposure_merit"], "Exposure and merit by group")
    assert {"before", "after"} <= set(exposure["ranking"]) and (exposure["n"] > 0).all()
    assert (np.diff(_cells(exposure, "exposure [95% CI]")[:, [1, 0, 2]], axis=1) >= 0).all()  # low <= estimate <= high
    # Beside the simulated study, the logged ranking's exposure parity measured on the logs, with CIs.
    keys = [s.spec.key for s in report.sections]
    assert keys.index("logged_exposure") == keys.index("exposure_merit") + 1
    logged = _table(sections["logged_exposure"], "per group")
    assert set(logged["group"].astype(str)) == {"0", "1"} and (logged["impressions"] > 0).all()
    assert (np.diff(_cells(logged, "exposure / merit [95% CI]")[:, [1, 0, 2]], axis=1) > 0).all()
    ratio = _table(sections["logged_exposure"], "each group vs the largest")
    assert len(ratio) == 1 and (np.diff(_cells(ratio, "ratio [95% CI]")[:, [1, 0, 2]], axis=1) > 0).all()
    assert any("logged ranking, from the logs" in f.text for f in sections["logged_exposure"].content.findings)

    # Partial AUC: every model at every cutoff, each finding names the model and the cutoff with a CI and a p-value.
    pauc = _table(sections["roc"], "Normalized partial AUC")
    assert set(pauc["FPR cutoff"]) == {"I(0.05)", "I(0.1)", "I(0.2)", "I(0.5)", "I(1)"}
    assert {"production", "eo_weighted", "eo_unweighted"} <= set(pauc["model"])
    for finding in sections["roc"].content.findings:
        assert re.search(r"I\(\d", finding.text) and "model" in finding.text
        assert finding.status == "not estimable" or (re.search(r"\[[-+]?\d", finding.text) and " p " in f" {finding.text}")
    assert {f.status for f in sections["roc"].content.findings} <= {"gap larger than δ", "within ±δ", "equivalent",
                                                                     "inconclusive", "not estimable"}
    assert all(f.verdict for f in sections["roc"].content.findings)

    xauc = _table(sections["xauc"], "Cross-group AUC")
    assert set(xauc["model"]) == set(pauc["model"]) and np.isfinite(_cells(xauc, "ΔxAUC [95% CI]")).all()
    pairwise = _table(sections["pairwise"], "Pairwise accuracy")
    assert set(pairwise["model"]) == set(pauc["model"]) and len(pairwise) == 2 * len(set(pauc["model"]))
    # Audit trend: both audited partitions, each gap and CI exactly the audit's stored row of that day.
    trend = _table(sections["audit_trend"], "Every audited output's gaps per partition")
    assert sorted(trend["partition"].unique()) == days[1:]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        # the smallest audited cutoff with an estimable gap on some audited day (smaller ones need more clusters)
        cutoff, skipped = con.execute(
            "SELECT min(cutoff) FILTER (WHERE estimable), list(DISTINCT cutoff) FILTER (WHERE NOT estimable) "
            "FROM marts.fairness_audit_pairs").fetchone()
        stored = con.execute("SELECT CAST(partition_date AS VARCHAR) AS partition, -effect, -effect_ci_high, -effect_ci_low "
                             "FROM marts.fairness_audit_pairs WHERE scored_output = 'production' AND estimable AND "
                             "cutoff = $c AND group_a = '0' AND group_b = '1' ORDER BY 1", {"c": cutoff}).df()
    text = next(b.markdown for b in sections["audit_trend"].content.blocks if isinstance(b, Text))
    assert f"Partial-AUC gaps are at FPR {cutoff:g}, the smallest audited cutoff estimable" in text
    smaller = sorted(c for c in skipped or [] if c < cutoff)
    assert (f"smaller cutoffs ({', '.join(f'{c:g}' for c in smaller)}) are estimable in none" in text) == bool(smaller)
    metric = f"partial AUC gap I(α)/α at α = {cutoff:g}"
    production = trend[(trend["model"] == "production") & (trend["metric"] == metric)].sort_values("partition")
    assert production["partition"].tolist() == stored["partition"].tolist() == days[1:]
    assert set(production["pair"]) == {"1 − 0"}
    # the normalized effect, group 1 − group 0, printed with 3 decimals: the ROC section's number for the same day
    np.testing.assert_allclose(_cells(production, "gap (95% CI)"), stored.iloc[:, 1:].to_numpy(float), atol=5e-4)
    roc_today = pauc[(pauc["model"] == "production") & (pauc["FPR cutoff"] == f"I({cutoff:g})")]
    assert production["gap (95% CI)"].iloc[-1] == roc_today["1 − 0 [95% CI]"].iloc[0]
    assert production["verdict"].iloc[-1] == roc_today["verdict (1 vs 0)"].iloc[0]
    assert report.metrics()["audit_trend.trend_partitions"] == 2.0
    assert "audit_trend" in {f.name for f in report.figures()}
    frontier = _table(sections["lambda_frontier"], "λ trade-off frontier")
    assert len(frontier) >= 2 and np.isfinite(_cells(frontier, "utility [95% CI]")).all()
    assert {"position_bias", "roc", "xroc", "pairwise", "lambda_frontier", "eo_cdf"} <= {f.name for f in report.figures()}
    ranking = _table(sections["model_selection"], "Model-selection ranking")
    assert ranking["rank"].tolist()[0] == 1 and ranking["cost [95% CI]"].str.match(r"\d+\.\d+ \[").any()
