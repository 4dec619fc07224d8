"""benchmark_models registers every fit as a version of `fair-benchmark-<dataset>` and moves `champion` by its rule.

One temp home, the asset materialized alone (it reads only the shipped benchmark files). The champion is
recomputed here from the audit tables logged to MLflow, independently of `fair_pipeline.training.reference.registry`.
"""
from __future__ import annotations

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from fair_pipeline.platform.resources import DuckDBWarehouse
from fair_pipeline.platform.tracking import CANDIDATE, CHAMPION, MLflowTracking, benchmark_model_name
from fair_pipeline.training.reference import fits as bm
from fair_pipeline.training.assets import benchmark_models
from fair_pipeline.training.reference.registry import choose_champion
from fair_pipeline.platform.tracking import point_fluent_api_at
from tests.platform.mlflow_reading import logged_table
from tests.shared_home import restore_home_after_each_test

DATASETS = ("adult", "compas")
N_FITS = 1 + len(bm.DEFAULT_LAMBDAS)  # vanilla + the probability-penalized path


def _resources(home):
    return {"warehouse": DuckDBWarehouse(path=str(home / "warehouse.duckdb")),
            "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"),
                                     retry_delay_s=0.01)}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("benchmark_registry")
    result = dg.materialize([benchmark_models], resources=_resources(home), instance=dg.DagsterInstance.ephemeral())
    assert result.success
    home.joinpath("metadata.txt").write_text(repr(result.asset_materializations_for_node("marts__benchmark_models")[0].metadata))
    return home


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home")


@pytest.fixture(scope="module")
def tracking(home) -> MLflowTracking:
    return _resources(home)["mlflow"]


def _models(home) -> pd.DataFrame:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute("SELECT * FROM marts.benchmark_models").df()


def _versions(tracking, name):
    return sorted(tracking.client().search_model_versions(f"name = '{name}'"), key=lambda v: int(v.version))


def _rule(fits: list[dict]) -> int | None:
    """The documented rule, recomputed: smallest λ (then highest AUC) among fits whose gap is estimable and whose
    Holm-adjusted p-values over the cutoffs are all >= 0.05; else the smallest max |z| among fully estimable fits;
    else none. Returns the fit's position."""
    def gaps(f):
        return f["audit"][f["audit"]["row_type"] == "gap"]

    def holm_adjusted(p):  # full step-down Holm, not the shortcut the module uses
        order = np.argsort(p)
        adjusted = np.maximum.accumulate(np.minimum(1.0, (len(p) - np.arange(len(p))) * np.asarray(p)[order]))
        return adjusted

    ok = [i for i, f in enumerate(fits) if gaps(f)["estimable"].all() and (holm_adjusted(gaps(f)["p_value"].to_numpy()) >= 0.05).all()]
    if ok:
        return min(ok, key=lambda i: (fits[i]["lam"], -fits[i]["auc"], i))
    full = [i for i, f in enumerate(fits) if gaps(f)["estimable"].all()]
    if full:
        return min(full, key=lambda i: (gaps(fits[i])["z"].abs().max(), fits[i]["lam"], i))
    return None


@pytest.mark.parametrize("dataset", DATASETS)
def test_one_version_per_fit_tagged_with_its_audit(home, tracking, dataset):
    name = benchmark_model_name(dataset)
    versions = _versions(tracking, name)
    rows = _models(home).query("dataset == @dataset")
    assert len(versions) == len(rows) == N_FITS
    assert sorted(rows["model_version"].astype(int)) == [int(v.version) for v in versions]
    client = tracking.client()
    for row in rows.itertuples():
        v = client.get_model_version(name, row.model_version)
        run = client.get_run(row.mlflow_run_id)
        assert v.run_id == row.mlflow_run_id and v.tags["fair_pipeline.run_id"] == row.mlflow_run_id
        assert float(v.tags["fair_pipeline.lambda"]) == pytest.approx(row.lam)
        assert v.tags["fair_pipeline.model"] == row.model and v.tags["fair_pipeline.penalty_score"] == row.penalty_score
        assert float(v.tags["fair_pipeline.heldout_auc"]) == pytest.approx(run.data.metrics["auc"], abs=1e-6)
        audit = logged_table(tracking.client(), row.mlflow_run_id, "audit")
        for gap in audit[audit["row_type"] == "gap"].itertuples():
            assert float(v.tags[f"fair_pipeline.gap/{gap.cutoff:g}"]) == pytest.approx(gap.auc, abs=1e-6)
            assert float(v.tags[f"fair_pipeline.gap_p_value/{gap.cutoff:g}"]) == pytest.approx(gap.p_value, rel=1e-5)
        assert v.tags["fair_pipeline.gap_groups"] == {"adult": "Female - Male", "compas": "African-American - Caucasian"}[dataset]
    # `candidate` ends on the newest version; every version of this run has been registered
    assert str(tracking.version_by_alias(name, CANDIDATE).version) == str(versions[-1].version)


@pytest.mark.parametrize("dataset", DATASETS)
def test_champion_is_the_rule_recomputed_from_the_logged_audits(home, tracking, dataset):
    name = benchmark_model_name(dataset)
    rows = _models(home).query("dataset == @dataset").reset_index(drop=True)
    client = tracking.client()
    fits = [{"lam": r.lam, "auc": client.get_run(r.mlflow_run_id).data.metrics["auc"],
             "audit": logged_table(client, r.mlflow_run_id, "audit")} for r in rows.itertuples()]
    chosen = _rule(fits)
    assert chosen is not None
    champion = tracking.champion(name)
    assert champion is not None and str(champion.version) == str(rows.loc[chosen, "model_version"])
    assert rows["champion"].sum() == 1 and rows.loc[chosen, "champion"]
    assert champion.tags["fair_pipeline.champion_selected"] == "true" and "smallest λ" in champion.tags["fair_pipeline.champion_reason"]
    assert "least-penalized" in champion.tags["fair_pipeline.champion_rule"]
    others = [v for v in _versions(tracking, name) if str(v.version) != str(champion.version)]
    assert not any("fair_pipeline.champion_selected" in v.tags for v in others)
    # On the shipped data (README, training): Adult's vanilla gap is significant and a penalized fit removes it; COMPAS's
    # vanilla gaps are not significant after Holm over the cutoffs (as the paper finds), so an unpenalized fit is champion.
    vanilla = rows.index[rows["model"] == "vanilla"][0]
    if dataset == "adult":
        assert rows.loc[chosen, "model"] == "penalized" and rows.loc[chosen, "lam"] > 0
        assert rows.loc[vanilla, "champion_rule_qualifies"] == False  # noqa: E712 - numpy bool
    else:
        assert rows.loc[vanilla, "champion_rule_qualifies"] and rows.loc[chosen, "lam"] == 0
    metadata = home.joinpath("metadata.txt").read_text()
    assert f"{dataset}_champion_version" in metadata and "registration_seconds" in metadata


@pytest.mark.parametrize("dataset", DATASETS)
def test_loaded_champion_reproduces_the_logged_heldout_auc(tracking, dataset):
    import mlflow

    name = benchmark_model_name(dataset)
    champion = tracking.champion(name)
    point_fluent_api_at(tracking.uri)
    model = mlflow.sklearn.load_model(f"models:/{name}@{CHAMPION}")
    split = bm.BENCHMARKS[dataset].load()
    auc = roc_auc_score(split.y_test, model.decision_function(split.X_test))
    logged = tracking.client().get_run(champion.run_id).data.metrics["auc"]
    assert auc == pytest.approx(logged, abs=1e-9)


def test_choose_champion_fallbacks():
    def audit(ps, zs, estimable=True):
        return pd.DataFrame({"row_type": "gap", "cutoff": [0.1, 1.0][: len(ps)], "p_value": ps, "z": zs,
                             "estimable": estimable})

    # nobody passes: the smallest max |z| wins, flagged as not qualified
    choice = choose_champion([audit([0.01, 0.2], [2.6, 1.3]), audit([0.04, 0.02], [2.05, 2.33])], [0.0, 1.0], [0.9, 0.8])
    assert choice.index == 1 and not choice.qualified and "no fit" in choice.reason
    # p = 0.03 at one of two cutoffs is significant alone but not after Holm (0.06): the fit qualifies
    choice = choose_champion([audit([0.01, 0.2], [2.6, 1.3]), audit([0.03, 0.5], [2.17, 0.67])], [0.0, 1.0], [0.9, 0.8])
    assert choice.index == 1 and choice.qualified and "Holm" in choice.reason
    # λ ties go to the higher AUC
    choice = choose_champion([audit([0.3, 0.2], [1.0, 1.3]), audit([0.5, 0.6], [0.6, 0.5])], [0.0, 0.0], [0.80, 0.81])
    assert choice.index == 1 and choice.qualified
    # a non-estimable gap never qualifies, even with a large p-value elsewhere
    choice = choose_champion([audit([0.9, np.nan], [0.1, np.nan], estimable=[True, False]), audit([0.01, 0.01], [2.6, 2.6])],
                             [0.0, 1.0], [0.9, 0.8])
    assert choice.index == 1 and not choice.qualified
    choice = choose_champion([audit([np.nan], [np.nan], estimable=False)], [0.0], [0.5])
    assert choice.index is None


def _state(tracking, dataset):
    name = benchmark_model_name(dataset)
    return ([str(v.version) for v in _versions(tracking, name)], str(tracking.champion(name).version),
            str(tracking.version_by_alias(name, CANDIDATE).version))


def test_rerun_with_unchanged_code_and_config_registers_nothing(home, tracking):
    """Static data: the versions carry a fingerprint of the code version and config; an equal one skips the fits."""
    from fair_pipeline import runner

    before = {d: _state(tracking, d) for d in DATASETS}
    models_before = _models(home)
    instance = dg.DagsterInstance.ephemeral()
    assert runner.benchmarks_outdated(instance)  # never materialized in this instance
    result = dg.materialize([benchmark_models], resources=_resources(home), instance=instance)
    assert result.success
    metadata = result.asset_materializations_for_node("marts__benchmark_models")[0].metadata
    assert metadata["unchanged"].value is True
    assert metadata["registered_versions"].value == {d: [int(v) for v in before[d][0]] for d in DATASETS}
    assert {d: _state(tracking, d) for d in DATASETS} == before
    assert all(len(before[d][0]) == N_FITS for d in DATASETS)
    pd.testing.assert_frame_equal(_models(home), models_before)
    assert not runner.benchmarks_outdated(instance)  # materialized with the current code version


def test_failed_registration_rolls_back_versions_and_aliases(home, tracking, monkeypatch):
    def state(d):
        return _state(tracking, d)

    before = {d: state(d) for d in DATASETS}
    models_before = _models(home)
    original = MLflowTracking.set_champion

    def flaky(self, name, version):
        if name == benchmark_model_name("compas"):  # adult's champion has already moved by then
            raise RuntimeError("registry exploded")
        return original(self, name, version)

    monkeypatch.setattr(MLflowTracking, "set_champion", flaky)
    # another λ grid: another fingerprint, so this run fits and registers (an unchanged one would register nothing)
    result = dg.materialize([benchmark_models], resources=_resources(home), instance=dg.DagsterInstance.ephemeral(),
                            run_config={"ops": {"marts__benchmark_models": {"config": {"lambdas": [0.0, 1.0]}}}},
                            raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
    assert "registry exploded" in failure.message or "registry exploded" in str(failure.cause)
    for d in DATASETS:
        assert state(d) == before[d]
    pd.testing.assert_frame_equal(_models(home), models_before)  # the warehouse was not written either
