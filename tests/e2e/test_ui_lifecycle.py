"""`fair-pipeline ui` serves both UIs on the requested ports and SIGTERM stops everything it started."""
import signal
import time
import urllib.request

from tests.e2e.ui_process import UiProcess, no_server_left


def test_ui_starts_both_servers_and_stops_cleanly_on_sigterm(tmp_path):
    ui = UiProcess(tmp_path)
    try:
        urls = ui.urls()
        assert urls == {"Dagster": f"http://127.0.0.1:{ui.dagster_port}", "MLflow": f"http://127.0.0.1:{ui.mlflow_port}"}
        with urllib.request.urlopen(f"{urls['Dagster']}/server_info", timeout=10) as response:
            assert response.status == 200 and b"dagster_webserver_version" in response.read()
        with urllib.request.urlopen(f"{urls['MLflow']}/health", timeout=10) as response:
            assert response.status == 200
        # The daemon runs too (schedules and backfills need it).
        log = tmp_path / "logs" / "dagster.log"
        deadline = time.monotonic() + 60
        while "SchedulerDaemon" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "SchedulerDaemon" in log.read_text(errors="replace")
    finally:
        code = ui.stop(signal.SIGTERM)
    assert code == 0, ui.output
    assert "stopped" in ui.output
    assert no_server_left(ui)
