"""MLflowTracking against a temp FAIR_PIPELINE_HOME: experiments, tags, tables, registry, faults."""
import os
import sqlite3
import threading
import time

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from fair_pipeline.platform import tracking
from fair_pipeline.platform.tracking import registry
from fair_pipeline.platform.tracking import (
    CANDIDATE,
    CHAMPION,
    FAIR_RANKER,
    MLflowTracking,
    TrackingUnavailableError,
    TrackingUsageError,
)
from tests.platform.mlflow_reading import logged_table
from tests.shared_home import restore_home_after_each_test


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("fp_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAIR_PIPELINE_HOME", str(path))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield path


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home", built_by=("tr",))


@pytest.fixture(scope="module")
def tr(home):
    resource = MLflowTracking(retry_delay_s=0.05)
    resource.ensure_experiments()
    return resource


def test_store_and_experiments_live_under_home(home, tr):
    assert tr.uri == f"sqlite:///{home / 'mlflow.db'}"
    ids = tr.ensure_experiments()
    assert set(ids) == set(tracking.STAGES)
    client = tr.client()
    for stage, experiment_id in ids.items():
        experiment = client.get_experiment(experiment_id)
        assert experiment.name == f"fair_pipeline/{stage}"
        assert experiment.artifact_location == (home / "mlartifacts" / stage).as_uri()
    # Idempotent: a second resource (another step process) finds the same experiments.
    assert MLflowTracking().ensure_experiments() == ids


def test_concurrent_initialisation_of_a_fresh_store_is_serialised(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results, errors = [], []

    def init():
        try:
            results.append(tracking.ensure_experiments(uri, tmp_path / "art", stages=("audit", "training")))
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=init) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 3 and all(r == results[0] for r in results)


def test_run_is_tagged_and_ends_failed_when_the_block_raises(tr):
    frame = pd.DataFrame({"position": [1, 2, 3], "estimate": [1.0, 0.6, np.nan], "ci_low": [1.0, 0.5, np.nan],
                          "ci_high": [1.0, 0.7, np.nan], "day": pd.to_datetime(["2024-01-01"] * 3)})
    with tr.start_run(None, "position_bias", run_name="pb", window=("2024-01-01", "2024-01-07"), tags={"k": 1}) as run:
        run.log_table(frame, "position_bias_curve")
        run.log_metrics({"w2": 0.6})
        run.log_dict({"a": 1}, "config.json")
    data = tr.client().get_run(run.run_id)
    assert data.info.status == "FINISHED"
    assert data.data.tags[tracking.TAG_STAGE] == "position_bias"
    assert data.data.tags[tracking.TAG_WINDOW] == "2024-01-01..2024-01-07"
    assert data.data.tags["k"] == "1" and data.data.metrics["w2"] == 0.6
    table = logged_table(tr.client(), run.run_id, "position_bias_curve")
    assert table["estimate"].tolist()[:2] == [1.0, 0.6] and np.isnan(table["estimate"].iloc[2])
    assert table["day"].iloc[0].startswith("2024-01-01")

    with pytest.raises(RuntimeError, match="boom"):
        with tr.start_run(None, "position_bias", run_name="bad") as bad:
            raise RuntimeError("boom")
    assert tr.client().get_run(bad.run_id).info.status == "FAILED"


def test_a_run_exports_no_mlflow_variable_to_later_processes(tr, monkeypatch):
    """mlflow.set_tracking_uri / set_registry_uri / set_experiment export MLFLOW_*_URI / MLFLOW_EXPERIMENT_ID;
    a later subprocess (or command for another home) would then log to this store's experiment."""
    names = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_EXPERIMENT_ID")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    with tr.start_run(None, "audit", run_name="no exports"):
        pass
    assert {name: os.environ.get(name) for name in names} == dict.fromkeys(names)


def test_tables_round_trip_exactly_including_subnormal_p_values(tr):
    # A p-value of 1e-308 (z ≈ 37 on a million-row audit) once made the report fail to read the audit's table.
    frame = pd.DataFrame({"model": ["a", "b", "c"], "p_value": [1.07306696522443e-308, 5e-324, np.nan],
                          "estimate": [0.1234567890123, 1.0, 0.5], "n_pos": [3, 4, 5], "estimable": [True, False, True],
                          "diff": [np.nan] * 3, "ci_low": [np.nan, 0.2, np.nan]})
    with tr.start_run(None, "audit", run_name="tiny p") as run:
        run.log_table(frame, "subnormal_check")
    table = logged_table(tr.client(), run.run_id, "subnormal_check")
    assert table["p_value"].iloc[0] == 1.07306696522443e-308 and table["p_value"].iloc[1] == 5e-324
    assert np.isnan(table["p_value"].iloc[2])
    assert table["estimate"].tolist() == frame["estimate"].tolist()


def test_unknown_stage_and_bad_names_are_rejected(tr):
    with pytest.raises(TrackingUsageError, match="unknown pipeline stage 'trainning'"):
        with tr.start_run(None, "trainning"):
            pass
    with pytest.raises(TrackingUsageError, match="registered model name"):
        tr.register_model("models:/x", "bad name'; --")


def test_register_sets_candidate_and_champion_moves(tr):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    y = (x[:, 0] > 0).astype(int)
    versions = []
    with tr.start_run(None, "training", run_name="fit") as run:
        for i, c in enumerate((0.1, 1.0)):
            uri = run.log_sklearn_model(LogisticRegression(C=c).fit(x, y), f"ranker_{i}")
            versions.append(tr.register_model(uri, FAIR_RANKER, run=run, tags={"C": c}))
    assert [str(v.version) for v in versions] == ["1", "2"]
    assert str(tr.version_by_alias(FAIR_RANKER, CANDIDATE).version) == "2"  # the alias moved to the newest candidate
    assert tr.champion(FAIR_RANKER) is None
    assert tr.set_champion(FAIR_RANKER, "1") is None
    assert tr.set_champion(FAIR_RANKER, 2) == "1"
    assert str(tr.champion(FAIR_RANKER).version) == "2"
    assert tr.client().get_model_version(FAIR_RANKER, "1").tags["C"] == "0.1"
    with pytest.raises(Exception, match="(?i)not found|does not exist"):
        tr.set_champion(FAIR_RANKER, 99)
    assert str(tr.champion(FAIR_RANKER).version) == "2"


def test_metrics_logged_with_a_model_belong_to_the_run_and_to_the_model_and_tags_go_in_one_batch(tr, monkeypatch):
    model = LogisticRegression().fit(np.eye(2), [0, 1])
    client_class, batches = type(tr.client()), []
    original = client_class.log_batch
    with tr.start_run(None, "training", run_name="fit") as run:
        monkeypatch.setattr(client_class, "log_batch", lambda self, *a, **k: batches.append(k) or original(self, *a, **k))
        run.set_tags({"a": 1, "b": "two"})
        monkeypatch.undo()
        uri = run.log_sklearn_model(model, "ranker", metrics={"auc": 0.75, "gap": -0.01})
    assert len(batches) == 1 and {t.key for t in batches[0]["tags"]} == {"a", "b"}
    logged = tr.client().get_run(run.run_id)
    assert logged.data.metrics == {"auc": 0.75, "gap": -0.01} and logged.data.tags["b"] == "two"
    attached = {m.key: m.value for m in tr.client().get_logged_model(uri.removeprefix("models:/")).metrics}
    assert attached == {"auc": 0.75, "gap": -0.01}


def test_failed_alias_rolls_back_the_new_version(tr, monkeypatch):
    with tr.start_run(None, "training", run_name="rollback") as run:
        uri = run.log_sklearn_model(LogisticRegression().fit(np.eye(2), [0, 1]), "ranker")
        before = {v.version for v in tr.client().search_model_versions(f"name = '{FAIR_RANKER}'")}
        client_cls = type(tr.client())

        def locked(self, *args, **kwargs):
            raise RuntimeError("(sqlite3.OperationalError) database is locked")

        monkeypatch.setattr(client_cls, "set_registered_model_alias", locked)
        with pytest.raises(TrackingUnavailableError, match="database is locked.*tried 4 times"):
            tr.register_model(uri, FAIR_RANKER, run=run)
        monkeypatch.undo()
    after = {v.version for v in tr.client().search_model_versions(f"name = '{FAIR_RANKER}'")}
    assert after == before  # no version left without its alias


def test_locked_database_fails_with_a_clear_message_after_retries(home, tr):
    quick = MLflowTracking(attempts=1, retry_delay_s=0.05)  # one MLflow call on a locked sqlite file takes ~20 s
    quick.ensure_experiments()  # as in a step: the resource set itself up before the lock was taken
    holder = sqlite3.connect(home / "mlflow.db")
    holder.execute("BEGIN EXCLUSIVE")
    began = time.monotonic()
    try:
        pattern = r"mlflow\.db unavailable while trying to create a run in experiment \d+: .*database is locked \(tried once"
        with pytest.raises(TrackingUnavailableError, match=pattern):
            with quick.start_run(None, "audit"):
                pass
    finally:
        holder.rollback()
        holder.close()
    assert time.monotonic() - began < 60  # bounded: fails instead of hanging
    # Once the lock is gone the same call works.
    with quick.start_run(None, "audit", run_name="after-lock") as run:
        run.log_metrics({"x": 1.0})


def test_a_run_whose_creation_landed_before_a_transient_error_is_created_once(tr, monkeypatch):
    client_class = type(tr.client())
    original, calls = client_class.create_run, []

    def lands_then_fails(self, *args, **kwargs):
        calls.append(original(self, *args, **kwargs))
        if len(calls) == 1:
            raise RuntimeError("database is locked")  # the write committed; the reply was lost
        return calls[-1]

    monkeypatch.setattr(client_class, "create_run", lands_then_fails)
    quick = MLflowTracking(retry_delay_s=0.01)
    with quick.start_run(None, "audit", run_name="once") as run:
        pass
    assert len(calls) == 1 and run.run_id == calls[0].info.run_id  # the retry found it instead of creating another
    found = quick.client().search_runs([quick.experiment_id("audit")], filter_string="attributes.run_name = 'once'")
    assert len(found) == 1


def test_a_model_version_whose_registration_landed_before_a_transient_error_is_registered_once(tr, monkeypatch):
    import mlflow

    original, calls = mlflow.register_model, []

    def lands_then_fails(*args, **kwargs):
        calls.append(original(*args, **kwargs))
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return calls[-1]

    with tr.start_run(None, "training", run_name="fit") as run:
        uri = run.log_sklearn_model(LogisticRegression().fit(np.eye(2), [0, 1]), "ranker")
        monkeypatch.setattr(mlflow, "register_model", lands_then_fails)
        version = MLflowTracking(retry_delay_s=0.01).register_model(uri, FAIR_RANKER, run=run)
    assert len(calls) == 1 and str(version.version) == "1" and CANDIDATE in version.aliases
    assert len(tr.client().search_model_versions(f"name = '{FAIR_RANKER}'")) == 1


def test_unreachable_server_fails_fast_with_a_clear_message(tmp_path):
    from fair_pipeline.ui import free_port

    port = free_port()
    resource = MLflowTracking(tracking_uri=f"http://127.0.0.1:{port}")
    began = time.monotonic()
    with pytest.raises(TrackingUnavailableError, match=f"127.0.0.1:{port} is unreachable"):
        resource.ensure_experiments()
    assert time.monotonic() - began < 10


def test_transient_classification():
    assert tracking.is_transient(RuntimeError("sqlite3.OperationalError: database is locked"))
    try:
        try:
            raise ConnectionRefusedError("Connection refused")
        except ConnectionRefusedError as inner:
            raise RuntimeError("API request failed") from inner
    except RuntimeError as outer:
        assert tracking.is_transient(outer)
    assert not tracking.is_transient(ValueError("RESOURCE_DOES_NOT_EXIST"))


def test_registering_versions_prints_no_registry_chatter_and_models_have_descriptions(home, capfd):
    tr = MLflowTracking(retry_delay_s=0.05)
    name = tracking.benchmark_model_name("chatter")
    with tr.start_run(None, "benchmarks", run_name="chatter") as run:
        uris = [run.log_sklearn_model(LogisticRegression().fit(np.eye(2), [0, 1]), f"m{i}") for i in range(3)]
    capfd.readouterr()
    versions = [tr.register_model(uri, name, run=run) for uri in uris]
    assert [str(v.version) for v in versions] == ["1", "2", "3"]
    err = capfd.readouterr().err
    # MLflow printed "Registered model ... already exists" and "Created version ..." once per version (16 per run).
    assert "already exists" not in err and "Created version" not in err, err
    model = tr.client().get_registered_model(name)
    assert model.description == tracking.registered_model_description(name)
    assert "chatter benchmark" in model.description


def test_other_stderr_output_of_a_registry_call_is_passed_on(capfd):
    import sys

    with registry.without_registry_chatter():
        print("Created version '7' of model 'fair-ranker'.", file=sys.stderr)
        print("something else went wrong", file=sys.stderr)
    assert capfd.readouterr().err == "something else went wrong\n"


def test_every_experiment_has_a_description_also_in_an_older_store(home, tr):
    client = tr.client()
    ids = tr.ensure_experiments()
    for stage, experiment_id in ids.items():
        assert client.get_experiment(experiment_id).tags["mlflow.note.content"] == tracking.STAGE_DESCRIPTIONS[stage]
    client.delete_experiment_tag(ids["audit"], "mlflow.note.content")  # a store created before descriptions
    tracking.ensure_experiments()
    assert client.get_experiment(ids["audit"]).tags["mlflow.note.content"] == tracking.STAGE_DESCRIPTIONS["audit"]


def test_mlflow_links_follow_the_configured_ui_and_open_the_classic_view(monkeypatch):
    monkeypatch.delenv(tracking.UI_URL_ENV, raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    resource = MLflowTracking()
    assert resource.run_url("3", "abc") == "http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:8080/")  # a tracking server is its own UI
    assert resource.run_url("3", "abc").startswith("http://mlflow.internal:8080/#/experiments/3/runs/abc?")
    monkeypatch.setenv(tracking.UI_URL_ENV, "https://mlflow.example.org/")
    assert resource.run_url("3", "abc").startswith("https://mlflow.example.org/#/experiments/3/runs/abc?")
    assert MLflowTracking(ui_url="http://h:1").run_url("3", "abc").startswith("http://h:1/#/")


def test_fair_pipeline_ui_passes_its_mlflow_url_to_dagster(tmp_path, monkeypatch):
    from fair_pipeline import ui
    from fair_pipeline.commands.parser import build_parser

    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv(tracking.UI_URL_ENV, "http://127.0.0.1:5123")
    started = {}

    def fake_start(name, command, env, url, health_url, log_dir):
        started[name] = (command, env)
        return ui.Server(name, None, url, health_url, log_dir / f"{name}.log")

    monkeypatch.setattr(ui, "_start", fake_start)
    monkeypatch.setattr(ui, "_wait_ready", lambda *args, **kwargs: None)
    args = build_parser().parse_args(["ui"])
    assert args.mlflow_port == 5123  # the default follows the configured URL, so links and server agree
    dagster_port = ui.free_port()
    ui.start_ui(dagster_port=dagster_port, mlflow_port=ui.free_port())
    mlflow_command, _ = started["mlflow"]
    port = mlflow_command[mlflow_command.index("--port") + 1]
    assert started["dagster"][1][tracking.UI_URL_ENV] == f"http://127.0.0.1:{port}"
