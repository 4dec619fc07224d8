"""The UI as a person sees it: `fair-pipeline ui` on a small materialized home, driven by headless Chromium.

One UI process serves the whole module (the Dagster webserver takes a while to start) and is stopped when the module ends;
the Ctrl-C test starts and stops its own. Screenshots go to test-artifacts/.
"""
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.charts.svg_reading import parse
from tests.e2e.ui_process import REPO, UiProcess, no_server_left

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = REPO / "test-artifacts"
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (apt-get install chromium)")
TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def mlflow_port() -> int:
    from fair_pipeline.ui import free_port

    return free_port()


@pytest.fixture(scope="module")
def home(tmp_path_factory, mlflow_port):
    path = tmp_path_factory.mktemp("ui_home")
    # The links in the run's Dagster metadata point at the MLflow UI the module's `fair-pipeline ui` serves.
    env = {**os.environ, "FAIR_PIPELINE_HOME": str(path), "DAGSTER_HOME": str(path / "dagster_home"),
           "FAIR_PIPELINE_MLFLOW_UI_URL": f"http://127.0.0.1:{mlflow_port}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, "-m", "fair_pipeline.commands", "run", "--days", "2", "--requests-per-day", "200", "--slots", "10", "--items", "200"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return path


@pytest.fixture(scope="module")
def ui(home, mlflow_port):
    server = UiProcess(home, mlflow_port=mlflow_port)
    yield server
    server.stop(signal.SIGTERM)
    assert no_server_left(server)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_ui_serves_both_on_the_requested_ports(ui):
    urls = ui.urls()
    assert urls == {"Dagster": f"http://127.0.0.1:{ui.dagster_port}", "MLflow": f"http://127.0.0.1:{ui.mlflow_port}"}
    with urllib.request.urlopen(f"{urls['Dagster']}/server_info", timeout=10) as response:
        assert b"dagster_webserver_version" in response.read()
    with urllib.request.urlopen(f"{urls['MLflow']}/health", timeout=10) as response:
        assert response.status == 200


def _request(url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body, headers=headers or {})
    response = connection.getresponse()
    return response.status, response.read()


def test_the_guard_refuses_forged_mutations_and_the_run_survives(ui, home):
    """The requests a foreign page can make a browser send: a GET mutation (an <img> tag), a POST under a rebound
    Host name and one from a foreign Origin. Each is refused and the run they target still exists."""
    import json
    import urllib.parse

    dagster = ui.urls()["Dagster"]
    runs = json.dumps({"query": "{runsOrError{... on Runs{results{runId}}}}"}).encode()
    status, body = _request(f"{dagster}/graphql", "POST", runs, {"Content-Type": "application/json"})
    assert status == 200, body
    run_ids = [r["runId"] for r in json.loads(body)["data"]["runsOrError"]["results"]]
    assert run_ids
    delete = f'mutation{{deletePipelineRun(runId:"{run_ids[0]}"){{__typename}}}}'
    status, body = _request(f"{dagster}/graphql?query={urllib.parse.quote(delete)}")
    assert status == 405 and b"mutation refused over GET" in body
    port = urllib.parse.urlsplit(dagster).port
    forged = json.dumps({"query": delete}).encode()
    for headers in ({"Host": f"rebound.example:{port}"}, {"Origin": "http://evil.example"}):
        status, body = _request(f"{dagster}/graphql", "POST", forged, {"Content-Type": "application/json", **headers})
        assert status == 403, (headers, body)
    status, body = _request(f"{dagster}/graphql", "POST", runs, {"Content-Type": "application/json"})
    assert [r["runId"] for r in json.loads(body)["data"]["runsOrError"]["results"]] == run_ids


@pytest.mark.browser
@needs_chromium
def test_asset_graph_shows_the_assets_and_their_passed_checks(ui, page):
    from playwright.sync_api import expect

    dagster = ui.urls()["Dagster"]
    page.goto(f"{dagster}/asset-groups")
    for group in ("ingestion", "staging", "marts", "reporting"):
        expect(page.get_by_text(group, exact=True).first).to_be_visible()
    _shot(page, "dagster_global_lineage")
    page.goto(f"{dagster}/locations/fair_pipeline/asset-groups/ingestion")
    for name in ("observational_impressions", "randomized_impressions", "items"):
        expect(page.get_by_text(name, exact=True).first).to_be_visible()
    expect(page.get_by_text("1 / 1 Passed").first).to_be_visible()
    expect(page.get_by_text("stg_observational_impressions").first).to_be_visible()  # downstream edge
    _shot(page, "dagster_ingestion_graph")


@pytest.mark.browser
@needs_chromium
def test_the_report_opens_in_a_browser_with_its_summary_and_figures(home, page):
    """The newest report as a reader opens it: the summary first, then sections whose figures render (each figure
    is an embedded SVG that loaded, not a broken image). Its first screen is the README's picture of the report."""
    from playwright.sync_api import expect

    report = (home / "reports" / "latest").resolve() / "fairness_report.html"
    page.goto(report.as_uri())
    expect(page.get_by_role("heading", name="Fairness report")).to_be_visible()
    expect(page.get_by_role("heading", name="Summary")).to_be_visible()
    expect(page.get_by_role("heading", name="ROC curves and partial AUC by group")).to_be_attached()
    widths = page.eval_on_selector_all("img", "images => images.map(i => i.complete ? i.naturalWidth : 0)")
    assert len(widths) >= 5 and min(widths) > 100, widths
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "fairness_report_first_screen.png"))


@pytest.mark.browser
@needs_chromium
def test_asset_page_shows_the_blocking_check_passed(ui, page):
    from playwright.sync_api import expect

    page.goto(f"{ui.urls()['Dagster']}/assets/raw/observational_impressions?view=checks")
    expect(page.get_by_text("rejected_share_below_threshold").first).to_be_visible()
    expect(page.get_by_text("This is a blocking asset check.")).to_be_visible()
    expect(page.get_by_text("Passed", exact=True).first).to_be_visible()
    _shot(page, "dagster_asset_checks")


@pytest.mark.browser
@needs_chromium
def test_report_asset_links_its_mlflow_run(ui, page, home):
    from playwright.sync_api import expect

    page.goto(f"{ui.urls()['Dagster']}/assets/reporting/fairness_report")
    expect(page.get_by_text("mlflow_run_id").first).to_be_visible()
    # the newest partition's report (reports/<date>/), which reports/latest points at
    report = (home / "reports" / "latest").resolve() / "fairness_report.html"
    expect(page.get_by_text(str(report)).first).to_be_visible()
    _shot(page, "dagster_report_asset")


@pytest.mark.browser
@needs_chromium
def test_mlflow_link_of_the_report_asset_opens_its_run(ui, page, home):
    """A real click: the `mlflow_run` link in the report asset's Dagster metadata opens that run in MLflow's
    classic view."""
    from playwright.sync_api import expect

    from fair_pipeline.platform.tracking import MLflowTracking

    tracking = MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))
    run = tracking.client().search_runs([tracking.experiment_id("reporting")], order_by=["attributes.start_time DESC"],
                                        max_results=1)[0]
    page.goto(f"{ui.urls()['Dagster']}/assets/reporting/fairness_report")
    link = page.locator(f"a[href*='{run.info.run_id}'][href*='workflowType']").first  # not a figure's link
    expect(link).to_be_visible()
    if link.get_attribute("target") == "_blank":
        with page.context.expect_page() as opened:
            link.click()
        mlflow_page = opened.value
    else:
        link.click()
        mlflow_page = page
    mlflow_page.wait_for_load_state()
    assert mlflow_page.url.startswith(ui.urls()["MLflow"]) and run.info.run_id in mlflow_page.url, mlflow_page.url
    assert "workflowType=machine_learning" in mlflow_page.url
    expect(mlflow_page.get_by_text(run.info.run_name).first).to_be_visible()
    _shot(mlflow_page, "mlflow_run_from_dagster_link")


@pytest.mark.browser
@needs_chromium
def test_mlflow_experiment_page_shows_the_logged_run(ui, page, home):
    from playwright.sync_api import expect

    from fair_pipeline.platform.tracking import MLflowTracking

    tracking = MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))
    experiment_id = tracking.experiment_id("reporting")
    page.goto(f"{ui.urls()['MLflow']}/#/experiments/{experiment_id}/runs")
    expect(page.get_by_text("fair_pipeline/reporting").first).to_be_visible()
    expect(page.get_by_text("fairness_report", exact=True).first).to_be_visible()
    _shot(page, "mlflow_reporting_runs")


def test_figures_in_dagster_metadata_load_from_the_mlflow_ui(ui, home):
    """Figures are logged once to MLflow and linked from the Dagster metadata (not embedded): every linked figure
    of the newest report and audit is served by the running MLflow UI as an SVG image."""
    import re

    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home / "dagster_home"))
    urls = []
    for key in (["reporting", "fairness_report"], ["marts", "fairness_audit"]):
        metadata = instance.get_latest_materialization_event(dg.AssetKey(key)).asset_materialization.metadata
        for value in metadata.values():
            text = str(getattr(value, "value", value))
            assert "data:image" not in text
            urls += re.findall(r"\]\((http[^)\s]+/get-artifact\?[^)\s]+)\)", text)
    assert urls and all(url.startswith(ui.urls()["MLflow"]) for url in urls), urls
    for url in set(urls):
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.headers.get_content_type() == "image/svg+xml", url
            parse(response.read())


def test_ctrl_c_stops_both_servers(home):
    """Its own `fair-pipeline ui` (the module's serves the other tests, in whatever order they run)."""
    own = UiProcess(home)
    code = own.stop(signal.SIGINT)
    assert code == 0, own.output
    assert own.output.rstrip().endswith("stopped")
    assert no_server_left(own)
