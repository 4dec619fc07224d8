"""The main job end to end on a tiny simulated home: report files, MLflow run, Dagster metadata, CLI summary."""
import json

import dagster as dg
import pytest

from fair_pipeline import cli, settings
from fair_pipeline.tracking import TAG_DAGSTER_RUN, TAG_WINDOW, MLflowTracking, TrackingUnavailableError


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("main_job")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAIR_PIPELINE_HOME", str(path))
        mp.setenv("DAGSTER_HOME", str(path / "dagster_home"))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield path


@pytest.fixture(scope="module")
def main_job_output(home):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["run", "--days", "2", "--requests-per-day", "200", "--slots", "10", "--items", "200"])
    assert code == 0, out.getvalue()
    return out.getvalue()


def test_main_job_prints_report_ui_and_findings(home, main_job_output):
    report = home / "reports" / "fairness_report.html"
    assert f"fairness report:    {report}" in main_job_output
    assert "fair-pipeline ui" in main_job_output
    assert "[fact] Data volume and quarantine:" in main_job_output
    assert "under shuffled (randomized) traffic, CTR at position 1 minus position 10" in main_job_output
    assert "not yet available (stage never ran): Position-bias curve (position_bias)" in main_job_output
    html = report.read_text()
    assert "Data volume and quarantine" in html and "data:image/png;base64," in html
    # model selection: the metric labelled as simulated, the ranking with costs and intervals
    assert "Metric: SIMULATED oracle" in html and "Elicited metric (λ, a, B)" in html and "cost [95% CI]" in html
    findings = json.loads((home / "reports" / "findings.json").read_text())
    assert findings["metrics"]["data_volume.accepted_rows"] > 0


def test_report_is_logged_to_mlflow_and_linked_from_dagster(home, main_job_output):
    instance = dg.DagsterInstance.get()
    event = instance.get_latest_materialization_event(dg.AssetKey(["reporting", "fairness_report"]))
    metadata = event.asset_materialization.metadata
    run_id = metadata["mlflow_run_id"].value
    assert metadata["report_html"].value == str(settings.reports_dir() / "fairness_report.html")
    # Data volume, CTR by position, the EO stage's per-group CDFs and exposure/merit, the
    # ranker_candidates λ frontier (training stage), the audit's ROC/partial AUC, xAUC and pairwise sections,
    # and model selection.
    assert run_id in metadata["mlflow_run"].value and metadata["sections_available"].value == 9
    assert "data:image/png;base64," in metadata["figure_ctr_by_position"].value
    tracking = MLflowTracking()
    run = tracking.client().get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags[TAG_DAGSTER_RUN] == event.run_id
    assert run.data.tags["dagster.asset_key"] == "reporting/fairness_report"
    assert ".." in run.data.tags[TAG_WINDOW] and run.data.tags["dagster.code_version"] == "1"
    artifacts = {a.path for a in tracking.client().list_artifacts(run_id, "report")}
    assert {"report/fairness_report.html", "report/fairness_summary.md", "report/findings.json"} <= artifacts


def test_unreachable_mlflow_fails_the_report_with_a_clear_message(home, main_job_output):
    from fair_pipeline.definitions import fairness_report
    from fair_pipeline.resources import DuckDBWarehouse
    from fair_pipeline.ui import free_port

    port = free_port()
    result = dg.materialize(
        [fairness_report],
        resources={"warehouse": DuckDBWarehouse(), "mlflow": MLflowTracking(tracking_uri=f"http://127.0.0.1:{port}")},
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
    from fair_pipeline.resources import DuckDBWarehouse

    result = dg.materialize([fairness_report], resources={"warehouse": DuckDBWarehouse(), "mlflow": FlakyTracking()})
    assert result.success
    assert _FLAKY_CALLS == ["reporting", "reporting"]
    assert any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
    runs = MLflowTracking().client().search_runs([MLflowTracking().experiment_id("reporting")])
    assert sum(r.info.status == "FINISHED" for r in runs) == 2  # the main job's report and this one
