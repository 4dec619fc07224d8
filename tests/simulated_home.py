"""A simulated home with every stage materialized, for module-scoped fixtures of the asset tests."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fair_pipeline.ingestion.simulator import SimulationConfig


def materialize_simulated_home(home: Path, config: SimulationConfig, start: dt.date, days: int):
    """Simulate `days` days into `home`, ingest them as one run and train/audit the newest partition (for
    module-scoped fixtures). Returns the partition run's result; the environment is restored afterwards, so tests
    address files through `home`."""
    import dagster as dg

    from fair_pipeline import runner
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing

    last = start + dt.timedelta(days=days - 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAIR_PIPELINE_HOME", str(home))
        patch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        simulate_to_landing(config, home / "landing", start, days)
        instance = dg.DagsterInstance.ephemeral()
        result = runner.ingest_range(str(start), str(last), instance=instance)
        assert result.success, runner.failure_summary(result)
        result = runner.train_and_audit(str(last), instance=instance)
        assert result.success, runner.failure_summary(result)
    return result
