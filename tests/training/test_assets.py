"""The training assets: benchmark_models (Adult / COMPAS) and ranker_candidates (click logs).

One simulated home (3 days, 20 slots, half shuffled / half swapped traffic) is ingested, its newest partition
trained and audited by the real train_and_audit job (MLflow included), and the static benchmarks materialized by
their own job; the tests read its tables and MLflow store and recompute figures by brute force from the impression
rows. Partition D of ranker_candidates trains on the days before D. The failure paths and an older partition
re-materialize only ranker_candidates.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from fair_pipeline import runner
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import MLflowTracking
from fair_pipeline.position_bias.assets import position_bias
from fair_pipeline.position_bias.store import load_chosen_position_bias
from fair_pipeline.training.assets import ranker_candidates
from fair_pipeline.training.rankers import feature_columns, partition_window, training_data
from fair_pipeline.platform.tracking import point_fluent_api_at
from tests.simulated_home import materialize_simulated_home
from tests.shared_home import restore_home_after_each_test

CONFIG = SimulationConfig(n_items=2_000, requests_per_day=1_500, shuffle_share=0.5, adjacent_swap_share=0.5, slots=20, seed=23)
START = dt.date(2026, 1, 1)
DAYS = [str(START + dt.timedelta(days=i)) for i in range(3)]
CUTOFFS = [0.1, 0.2, 0.5, 1.0]
FEATURES = [f"f{k}" for k in range(CONFIG.n_features)]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("training_home")
    materialize_simulated_home(home, CONFIG, START, len(DAYS))
    with pytest.MonkeyPatch.context() as patch:  # the benchmarks are not part of the daily jobs: their own job
        patch.setenv("FAIR_PIPELINE_HOME", str(home))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        result = runner.run_benchmarks(instance=dg.DagsterInstance.ephemeral())
        assert result.success, runner.failure_summary(result)
    return home


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home")


def _query(home: Path, sql: str, params=None) -> pd.DataFrame:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or {}).df()


def _candidates(home: Path, partition: str = DAYS[-1]) -> pd.DataFrame:
    return _query(home, "SELECT * FROM marts.ranker_candidates WHERE partition_date = $day ORDER BY lam", {"day": partition})


def _scores(frame: pd.DataFrame, coefficients: str, intercept: float) -> np.ndarray:
    coef = json.loads(coefficients)
    return frame[list(coef)].to_numpy(float) @ np.array(list(coef.values())) + intercept


# ----------------------------------------------------------------------------- benchmark_models
def test_benchmark_tables_hold_every_fit_and_audit_row(home):
    models = _query(home, "SELECT * FROM marts.benchmark_models")
    audits = _query(home, "SELECT * FROM marts.benchmark_model_audits")
    lams = [0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
    for dataset, groups in (("adult", {"Female", "Male"}), ("compas", {"African-American", "Caucasian"})):
        fits = models[models["dataset"] == dataset]
        assert sorted(fits.loc[fits["model"] == "penalized", "lam"]) == lams
        assert (fits["model"] == "vanilla").sum() == 1
        rows = audits[audits["dataset"] == dataset]
        assert len(rows) == len(fits) * (len(groups) + 1) * len(CUTOFFS)  # per group + one gap row per cutoff
        per_group = rows[rows["row_type"] == "group"]
        assert set(per_group["group"]) == groups and sorted(per_group["cutoff"].unique()) == CUTOFFS
        assert (per_group["n_pos"] > 0).all() and (per_group["n_neg"] > 0).all()
        ok = per_group[per_group["estimable"]]
        assert ((ok["ci_low"] < ok["auc"]) & (ok["auc"] < ok["ci_high"]) & (ok["se"] > 0)).all()
        gaps = rows[rows["row_type"] == "gap"]
        assert gaps["p_value"].between(0, 1).all() and (gaps["n_a"] + gaps["n_b"] == fits["n_test"].iloc[0]).all()
    assert models["mlflow_run_id"].notna().all()


def test_lambda_zero_equals_the_vanilla_fit(home):
    models = _query(home, "SELECT * FROM marts.benchmark_models")
    audits = _query(home, "SELECT * FROM marts.benchmark_model_audits WHERE row_type = 'group' AND cutoff = 1")
    for dataset in ("adult", "compas"):
        vanilla = models[(models["dataset"] == dataset) & (models["model"] == "vanilla")].iloc[0]
        zero = models[(models["dataset"] == dataset) & (models["model"] == "penalized") & (models["lam"] == 0)].iloc[0]
        assert abs(vanilla["auc"] - zero["auc"]) < 1e-3
        a = audits[(audits["dataset"] == dataset) & (audits["model"] == "vanilla")].set_index("group")["auc"]
        b = audits[(audits["dataset"] == dataset) & (audits["model"] == "penalized") & (audits["lam"] == 0)].set_index("group")["auc"]
        np.testing.assert_allclose(a.sort_index(), b.sort_index(), atol=5e-3)
    compas = models[models["dataset"] == "compas"]
    coef = [json.loads(c) for c in compas.sort_values(["model", "lam"], ascending=[False, True])["coefficients"].iloc[:2]]
    np.testing.assert_allclose(list(coef[0].values()), list(coef[1].values()), atol=2e-3)


def test_mi_proxy_falls_with_lambda_and_adult_gap_closes(home):
    models = _query(home, "SELECT * FROM marts.benchmark_models WHERE model = 'penalized' ORDER BY dataset, lam")
    for _, fits in models.groupby("dataset"):
        assert np.all(np.diff(fits["mi_proxy_train"].to_numpy()) < 0)
    gaps = _query(home, "SELECT model, lam, p_value, auc FROM marts.benchmark_model_audits "
                        "WHERE dataset = 'adult' AND row_type = 'gap' AND cutoff = 0.1 ORDER BY lam")
    assert gaps[gaps["model"] == "vanilla"]["p_value"].iloc[0] < 1e-6  # female vs male gap significant
    assert gaps[gaps["model"] == "penalized"]["p_value"].iloc[-1] > 0.05  # closed at the largest lambda
    adult = models[models["dataset"] == "adult"]
    assert adult["auc"].iloc[0] - adult["auc"].iloc[-1] < 0.05  # at a small AUC cost


def test_mlflow_run_per_fit_with_model_and_audit_table(home):
    import mlflow

    models = _query(home, "SELECT * FROM marts.benchmark_models WHERE dataset = 'compas' AND model = 'penalized' AND lam = 3")
    row = models.iloc[0]
    point_fluent_api_at(f"sqlite:///{home / 'mlflow.db'}")
    run = mlflow.get_run(row["mlflow_run_id"])
    assert run.data.params["lam"] == "3.0" and run.data.params["dataset"] == "compas"
    assert run.data.metrics["auc"] == pytest.approx(row["auc"], abs=1e-12)
    assert run.data.tags["dagster.asset_key"] == "marts/benchmark_models"
    model = mlflow.sklearn.load_model(row["model_uri"])
    X = np.eye(len(json.loads(row["coefficients"])))
    np.testing.assert_allclose(model.decision_function(X), _scores(pd.DataFrame(X, columns=list(json.loads(row["coefficients"]))),
                                                                    row["coefficients"], row["intercept"]))
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(row["mlflow_run_id"], "tables")}
    assert "tables/audit.json" in artifacts
    assert mlflow.get_experiment(run.info.experiment_id).name == "fair_pipeline/benchmarks"


def test_lambda_frontier_table_for_the_report(home):
    from fair_pipeline.reporting import ReportInputs

    inputs = ReportInputs(home, home / "warehouse.duckdb", partition=dt.date.fromisoformat(DAYS[-1]))
    try:
        frontier = inputs.stored_table("lambda_frontier", ["lambda", "utility", "unfairness"])
    finally:
        inputs.close()
    assert inputs.sources["lambda_frontier"].endswith(f"partition {DAYS[-1]}")
    candidates = _candidates(home)
    gaps = _query(home, "SELECT candidate_id, auc, ci_low, ci_high FROM marts.ranker_candidate_audits "
                        "WHERE label_source = 'click_shuffle' AND row_type = 'gap' AND cutoff = 0.1 AND partition_date = $day",
                  {"day": DAYS[-1]})
    merged = frontier.merge(candidates, left_on="lambda", right_on="lam").merge(gaps, on="candidate_id")
    assert len(merged) == len(candidates)
    np.testing.assert_allclose(merged["utility"], merged["heldout_auc"])
    np.testing.assert_allclose(merged["unfairness"], merged["auc"].abs())
    assert (merged["unfairness_ci_low"] <= merged["unfairness"]).all() and (merged["unfairness"] <= merged["unfairness_ci_high"]).all()
    assert (merged["utility_ci_low"] < merged["utility"]).all()


# ----------------------------------------------------------------------------- ranker_candidates
def test_ranker_candidates_table_and_mi_proxy_path(home):
    assert _query(home, "SELECT DISTINCT partition_date::VARCHAR AS d FROM marts.ranker_candidates")["d"].tolist() == DAYS[-1:]
    candidates = _candidates(home)
    assert candidates["lam"].tolist() == [0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
    assert np.all(np.diff(candidates["mi_proxy_train"].to_numpy()) < 0)
    assert (candidates["window_start"].astype(str).str[:10] == DAYS[0]).all()
    assert (candidates["window_end"].astype(str).str[:10] == DAYS[-2]).all()  # partition D is the audit's
    assert candidates["mlflow_run_id"].notna().all() and candidates["converged"].all()
    first = candidates.iloc[0]
    assert json.loads(first["features"]) == FEATURES
    coef = json.loads(first["coefficients"])
    # The simulator's relevance acts through R = f0 + f1; the distractors f2.. carry nothing.
    assert coef["f0"] + coef["f1"] > 0 and min(coef["f0"], coef["f1"]) > 5 * max(abs(coef[f]) for f in FEATURES[2:])
    by_group = json.loads(first["heldout_pauc_by_group"])
    assert set(by_group) == {"0", "1"} and set(by_group["0"]) == {"0.1", "0.2", "0.5", "1"}


def test_ipw_training_aggregates_match_the_impression_rows(home):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        day = dt.date.fromisoformat(DAYS[-1])  # the span of the asset's partition mapping: D-7..D-1
        window = partition_window(con, day - dt.timedelta(days=7), day - dt.timedelta(days=1), day)
        assert [str(d) for d in window.dates] == DAYS[:-1] and [str(d) for d in window.held_out] == DAYS[-1:]
        curve = load_chosen_position_bias(con, DAYS[-1])
        data = training_data(con, window, curve, feature_columns(con))
        rows = con.execute("SELECT item_id, position, click FROM staging.stg_observational_impressions "
                           "WHERE policy = 'production' AND partition_date < $held_out", {"held_out": DAYS[-1]}).df()
    weight = curve.set_index("position")["weight"]
    rows["ipw"] = rows["click"] / rows["position"].map(weight)
    brute = rows.groupby("item_id").agg(impressions=("click", "size"), clicks=("click", "sum"), relevant=("ipw", "sum"))
    got = data.items.set_index("item_id").loc[brute.index]
    np.testing.assert_array_equal(got["impressions"], brute["impressions"])
    np.testing.assert_allclose(got["relevant_weight"], brute["relevant"], rtol=1e-12)
    assert data.impressions == len(rows) and data.clicks == rows["click"].sum()
    # Every item contributes its impressions once: positive weight + unclipped negative weight = N (or R when clipped).
    total = data.rows.sample_weight.sum()
    assert total == pytest.approx(np.maximum(brute["impressions"], brute["relevant"]).sum(), rel=1e-12)


def test_heldout_audits_match_brute_force_aucs(home):
    candidates = _candidates(home)
    audits = _query(home, "SELECT * FROM marts.ranker_candidate_audits WHERE partition_date = $day", {"day": DAYS[-1]})
    assert set(audits["label_source"]) == {"click_shuffle", "truth_relevance"}
    shuffle = _query(home, "SELECT r.click, r.group_id, i.* EXCLUDE (group_id) FROM staging.stg_randomized_impressions r "
                           "JOIN staging.stg_items i USING (item_id) WHERE r.policy = 'shuffle' AND r.partition_date < $held_out",
                     {"held_out": DAYS[-1]})  # the shuffle traffic of the training window
    truth = pd.read_parquet(home / "landing" / "_truth" / f"date={DAYS[-1]}" / "items.parquet").merge(
        _query(home, "SELECT * EXCLUDE (group_id) FROM staging.stg_items"), on="item_id")
    for row in candidates.iloc[[0, 3]].itertuples():
        mine = audits[audits["candidate_id"] == row.candidate_id]
        clicks = mine[(mine["label_source"] == "click_shuffle") & (mine["row_type"] == "group") & (mine["cutoff"] == 1)]
        for group, part in shuffle.groupby("group_id"):
            auc = roc_auc_score(part["click"], _scores(part, row.coefficients, row.intercept))
            got = clicks[clicks["group"] == group].iloc[0]
            assert got["auc"] == pytest.approx(auc, abs=1e-6)  # JSON-recomputed scores differ in the last bits
            assert got["n_pos"] == part["click"].sum() and got["n_neg"] == len(part) - part["click"].sum()
        assert row.heldout_auc == pytest.approx(roc_auc_score(shuffle["click"], _scores(shuffle, row.coefficients, row.intercept)), abs=1e-6)
        assert row.truth_auc == pytest.approx(roc_auc_score(truth["relevance"], _scores(truth, row.coefficients, row.intercept)), abs=1e-6)
        gap = mine[(mine["label_source"] == "truth_relevance") & (mine["row_type"] == "gap")]
        assert sorted(gap["cutoff"]) == CUTOFFS and gap["p_value"].between(0, 1).all()
    # The unpenalized ranker recovers relevance far better than chance; the penalty costs AUC.
    assert candidates["truth_auc"].iloc[0] > 0.75 and candidates["truth_auc"].iloc[-1] < candidates["truth_auc"].iloc[0]


# ----------------------------------------------------------------------------- failure paths
def _materialize_ranker(home: Path, config: dict, partition: str = DAYS[-1], with_position_bias: bool = False):
    return dg.materialize(
        [position_bias, ranker_candidates] if with_position_bias else [ranker_candidates],
        resources={"warehouse": DuckDBWarehouse(path=str(home / "warehouse.duckdb")),
                   "landing": LandingZone(path=str(home / "landing")),
                   "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))},
        run_config={"ops": {"marts__ranker_candidates": {"config": config}}},
        instance=dg.DagsterInstance.ephemeral(),
        partition_key=partition,
        raise_on_error=False,
    )


def _failure(result) -> str:
    """The step's failure text: a dg.Failure's description, else the error message."""
    events = [e for e in result.all_events if e.is_step_failure]
    assert events, "the run should have failed"
    data = events[0].step_failure_data
    return data.user_failure_data.description if data.user_failure_data else data.error.message


def _stored(home: Path) -> pd.DataFrame:
    return _query(home, "SELECT * FROM marts.ranker_candidates ORDER BY partition_date, lam")


@pytest.mark.parametrize(
    ("partition", "config", "message"),
    [
        ("2025-12-01", {}, "partition 2025-12-01 has nothing to train on: not enough data in the window "
                           "2025-11-24..2025-11-30: staging.stg_observational_impressions has no day with data"),
        # ten months later: the window 2026-11-13..19 is empty, and older days are never reached for
        ("2026-11-20", {}, "partition 2026-11-20 has nothing to train on: not enough data in the window "
                           "2026-11-13..2026-11-19"),
        (DAYS[0], {}, f"partition {DAYS[0]} has nothing to train on"),
        (DAYS[-1], {"feature_columns": ["f0", "nope"]}, "'nope'"),
        (DAYS[-1], {"lambdas": [0.0, -1.0]}, "lambdas=[0.0, -1.0]"),
    ],
)
def test_bad_partition_or_configuration_fails_with_a_clear_message(home, partition, config, message):
    before = _stored(home)
    result = _materialize_ranker(home, config, partition)
    assert not result.success
    assert message in _failure(result)
    pd.testing.assert_frame_equal(_stored(home), before)  # nothing half-written


def test_an_older_partition_trains_on_its_own_days_and_keeps_its_own_rows(home):
    newest = _candidates(home)
    assert _materialize_ranker(home, {}, DAYS[1], with_position_bias=True).success  # the curve of partition D too
    older = _candidates(home, DAYS[1])
    assert older["lam"].tolist() == newest["lam"].tolist()
    assert (older["window_start"].astype(str).str[:10] == DAYS[0]).all()
    assert (older["window_end"].astype(str).str[:10] == DAYS[0]).all()
    # trained on one day instead of two: other coefficients, fewer held-out shuffle clicks behind its audit
    assert not older["coefficients"].equals(newest["coefficients"])
    pd.testing.assert_frame_equal(_candidates(home), newest)
    audits = _query(home, "SELECT partition_date::VARCHAR AS d, sum(n_pos) AS n FROM marts.ranker_candidate_audits "
                          "WHERE label_source = 'click_shuffle' AND row_type = 'group' GROUP BY 1 ORDER BY 1")
    shuffle = _query(home, "SELECT partition_date::VARCHAR AS d, sum(click) AS n FROM staging.stg_randomized_impressions "
                           "WHERE policy = 'shuffle' GROUP BY 1 ORDER BY 1").set_index("d")["n"]
    n_per_candidate_cutoff = audits.set_index("d")["n"] / (len(newest) * len(CUTOFFS))
    assert n_per_candidate_cutoff.loc[DAYS[1]] == shuffle.loc[DAYS[0]]
    assert n_per_candidate_cutoff.loc[DAYS[-1]] == shuffle.loc[DAYS[0]] + shuffle.loc[DAYS[1]]


def test_missing_or_one_class_heldout_traffic_is_reported_not_audited():
    from sklearn.linear_model import LogisticRegression

    from fair_pipeline.training.rankers import HELDOUT_CLICKS, audit_model

    model = LogisticRegression().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
    empty = pd.DataFrame({"item_id": [], "group": [], "f0": [], "n_pos": [], "n_neg": []})
    audit, summary = audit_model(model, ["f0"], empty, None)
    assert audit.empty and np.isnan(summary[HELDOUT_CLICKS]["auc"])
    assert summary[HELDOUT_CLICKS]["note"] == "not audited: no shuffle traffic in the window"
    no_clicks = pd.DataFrame({"item_id": ["a", "b"], "group": ["0", "1"], "f0": [0.5, 1.5], "n_pos": [0, 0], "n_neg": [40, 30]})
    audit, summary = audit_model(model, ["f0"], no_clicks, None)
    assert audit.empty and summary[HELDOUT_CLICKS]["n_neg"] == 70 and "single class" in summary[HELDOUT_CLICKS]["note"]
