"""The pipeline sends no usage data: MLflow's telemetry client is off in every process that imports the project,
unless the user turned it on explicitly; Dagster's is off in the instance configuration the project writes."""
from __future__ import annotations

import os
import subprocess
import sys

CHECK = "import fair_pipeline, mlflow.telemetry.client as c; print(c.get_telemetry_client() is None)"


def _telemetry_off(env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "CI") and not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-c", CHECK], env={**clean, **env}, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_mlflow_telemetry_is_off_unless_the_user_turns_it_on():
    assert _telemetry_off({}) == "True"
    assert _telemetry_off({"MLFLOW_DISABLE_TELEMETRY": "false"}) == "False"  # the user's explicit choice wins


def test_dagster_telemetry_is_off_in_the_instance_configuration_the_project_writes(tmp_path, monkeypatch):
    import yaml

    from fair_pipeline import runner

    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(tmp_path))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused"))  # put back after the test; the call sets it
    config = yaml.safe_load((runner.ensure_dagster_home() / "dagster.yaml").read_text())
    assert config["telemetry"] == {"enabled": False}
