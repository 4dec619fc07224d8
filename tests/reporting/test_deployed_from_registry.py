"""The report says what the registry serves when it is built, so a `promote` (a rollback included) after the
selection shows in every report built after it, and the selection's record only explains it."""
from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

from fair_pipeline.reporting.decision import deployed_text
from fair_pipeline.reporting.model import Serving

DAY = dt.date(2026, 1, 3)


def _deployed(version: str = "7") -> pd.DataFrame:
    return pd.DataFrame({"partition_date": [pd.Timestamp(DAY)], "model": ["2026-01-03/probability/lam=0/alpha=1"],
                         "family": ["eo_transform"], "rank": [1], "candidates": [12], "champion_version": [version],
                         "registered_model": ["fair-ranker"]})


def test_a_rollback_after_the_selection_is_what_the_report_says_is_deployed():
    serving = Serving("fair-ranker", "5", "2026-01-02", "2026-01-02/probability/lam=0.1/alpha=1", "2026-01-04 09:00 UTC")
    text = deployed_text(None, _deployed(), DAY, serving)
    assert text.startswith("**Deployed: `fair-ranker@champion` = version 5**, the candidate "
                           "`2026-01-02/probability/lam=0.1/alpha=1` chosen by the model selection of 2026-01-02 "
                           "(the MLflow registry when this report was built).")
    assert ("**Not what this report's selection left:** the selection of 2026-01-03 registered version 7 "
            "(`2026-01-03/probability/lam=0/alpha=1`); `fair-pipeline promote --force` rolled it back to an older day.") in text
    # Promoted forward again: the registry and the selection agree, and the selection explains the choice.
    again = deployed_text(None, _deployed(), DAY, Serving("fair-ranker", "7", "2026-01-03", "x", "2026-01-04 09:05 UTC"))
    assert again.startswith("**Deployed: `fair-ranker@champion` = version 7**, the candidate "
                            "`2026-01-03/probability/lam=0/alpha=1` (family eo_transform), ranked 1 of 12")
    assert again.endswith("(As the MLflow registry when this report was built.)")
    unset = deployed_text(None, _deployed(), DAY, Serving("fair-ranker", None, read_at="now"))
    assert unset.startswith("**Deployed: nothing.** `fair-ranker@champion` is not set (the MLflow registry")
    assert not any("09:0" in t for t in (text, again))  # the read time is the report's, not the finding's


def test_the_registry_read_time_is_in_the_header_and_findings_json_not_in_a_finding(tmp_path):
    from fair_pipeline.reporting import ReportInputs, build_report, write_report

    serving = Serving("fair-ranker", None, read_at="2026-01-04 09:00 UTC")
    report = build_report(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb", serving=serving))
    files = write_report(report, tmp_path / "reports")
    data = json.loads(files.findings.read_text())
    assert data["registry_read_at"] == "2026-01-04 09:00 UTC"
    assert not any("09:00" in f["text"] for f in data["findings"])
    header = "`fair-ranker@champion` read from the MLflow registry 2026-01-04 09:00 UTC"
    assert header in files.markdown.read_text()
    assert "<code>fair-ranker@champion</code> read from the MLflow registry 2026-01-04 09:00 UTC" in files.html.read_text()
    unread = build_report(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "none.duckdb"))
    assert unread.registry_read_at is None and "registry" not in unread.header


def test_the_asset_reads_the_alias_from_the_registry(tmp_path, monkeypatch):
    from fair_pipeline.platform import settings
    from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, TAG_MODEL_PARTITION, MLflowTracking, store_client
    from fair_pipeline.reporting.assets import serving_champion

    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracking = MLflowTracking()
    client = store_client(settings.mlflow_tracking_uri())
    client.create_registered_model(FAIR_RANKER)
    assert serving_champion(tracking).version is None
    for partition in ("2026-01-02", "2026-01-03"):
        client.create_model_version(FAIR_RANKER, (tmp_path / "model").as_uri(),
                                    tags={TAG_MODEL_PARTITION: partition, "candidate": f"{partition}/eo_weighted"})
    client.set_registered_model_alias(FAIR_RANKER, CHAMPION, "2")
    client.set_registered_model_alias(FAIR_RANKER, CHAMPION, "1")  # a rollback, after the selection moved it to 2
    serving = serving_champion(tracking)
    assert (serving.version, serving.partition, serving.candidate) == ("1", "2026-01-02", "2026-01-02/eo_weighted")


@pytest.mark.parametrize("error", [TypeError("a bug"), KeyError("tags"), AttributeError("no such field")])
def test_a_bug_while_reading_the_registry_fails_the_report(tmp_path, monkeypatch, error):
    from fair_pipeline.platform.tracking import MLflowTracking
    from fair_pipeline.reporting.assets import serving_champion

    def champion(self, name):
        raise error

    monkeypatch.setattr(MLflowTracking, "champion", champion)
    with pytest.raises(type(error)):
        serving_champion(MLflowTracking(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db"))


def _store_failures():
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import OperationalError

    from fair_pipeline.platform.tracking import TrackingUnavailableError

    return [TrackingUnavailableError("store locked past the retries"), MlflowException("internal server error"),
            ConnectionRefusedError("server down"), OperationalError("SELECT", {}, Exception("disk I/O error"))]


@pytest.mark.parametrize("index", range(4))
def test_a_store_that_cannot_be_read_leaves_the_report_on_the_selections_record(tmp_path, monkeypatch, index):
    from fair_pipeline.platform.tracking import MLflowTracking
    from fair_pipeline.reporting.assets import serving_champion

    def champion(self, name):
        raise _store_failures()[index]

    monkeypatch.setattr(MLflowTracking, "champion", champion)
    assert serving_champion(MLflowTracking(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")) is None


def test_the_alias_lookup_says_none_only_when_the_model_or_alias_is_missing(tmp_path, monkeypatch):
    from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, Store, store_client
    from fair_pipeline.platform.tracking.registry import version_by_alias

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    store = Store(uri, attempts=1)
    assert version_by_alias(store, FAIR_RANKER, CHAMPION) is None  # not registered
    store_client(uri).create_registered_model(FAIR_RANKER)
    assert version_by_alias(store, FAIR_RANKER, CHAMPION) is None  # registered, alias not set
    client_type = type(store_client(uri))

    def broken(self, name, alias):
        raise ValueError("a bug in the lookup")

    monkeypatch.setattr(client_type, "get_model_version_by_alias", broken)
    with pytest.raises(ValueError, match="a bug in the lookup"):
        version_by_alias(store, FAIR_RANKER, CHAMPION)
