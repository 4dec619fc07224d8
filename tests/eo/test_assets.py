"""EO assets on a small simulated home: the stored transforms are exact and monotone, use the chosen
position-bias curve, the fair-ranker is registered, and the evaluation is labelled a simulation (or skipped
with a reason when there is no ground truth or no estimable transform). Partition D is fitted on the days before D;
an older partition keeps its own rows and registers a version without moving @candidate."""
from __future__ import annotations

import datetime as dt
import re

import dagster as dg
import duckdb
import mlflow
import numpy as np
import pytest

from fair_pipeline.eo import WeightedCDFTransformer, fit_from_click_counts, read_click_counts
from fair_pipeline.eo.sql import read_weighted_sums
from fair_pipeline.eo.transform import fit_from_weighted_sums
from fair_pipeline.eo.assets import (
    EO_EVALUATION_KEY,
    EO_TRANSFORM_KEY,
    ESTIMABLE_CHECK,
    VALID_CHECK,
    eo_assets,
    eo_evaluation,
    eo_transform,
)
from fair_pipeline.eo.figures import SIMULATION_LABEL
from fair_pipeline.eo.store import TRANSFORMS_TABLE, load_latest_transforms
from fair_pipeline.ingestion.assets import ingestion_assets
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform import settings
from fair_pipeline.platform.resources import LandingZone, default_resources
from fair_pipeline.platform.sql_assets import build_sql_assets
from fair_pipeline.platform.tracking import (TAG_ASSET, TAG_DAGSTER_RUN, TAG_HELD_OUT, TAG_MODEL_PARTITION,
                                           TAG_PARTITION, TAG_WINDOW, point_fluent_api_at)
from fair_pipeline.position_bias.assets import position_bias
from fair_pipeline.position_bias.store import load_chosen_position_bias
from tests.figure_links import linked_figure
from tests.shared_home import restore_home_after_each_test

CONFIG = SimulationConfig(n_items=2_000, requests_per_day=300, slots=20, seed=3)
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """Three simulated days ingested and aggregated, then partition DAYS[-1] of position_bias (chosen:
    adjacent_pairwise) and both EO assets."""
    root = tmp_path_factory.mktemp("eo_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAIR_PIPELINE_HOME", str(root))
        patch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        simulate_to_landing(CONFIG, settings.landing_dir(), dt.date.fromisoformat(DAYS[0]), len(DAYS))
        instance = dg.DagsterInstance.ephemeral()
        upstream = [a for a in [*ingestion_assets, *build_sql_assets()] if a.partitions_def is not None]
        for day in DAYS:
            assert dg.materialize(upstream, partition_key=day, resources=default_resources(), instance=instance).success
        result = dg.materialize([position_bias, *eo_assets], resources=default_resources(), instance=instance,
                                partition_key=DAYS[-1])
        assert result.success
        yield {"root": root, "instance": instance, "run_id": result.run_id}


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home", root_of=lambda home: home["root"])


def _metadata(instance, key):
    return {k: v.value for k, v in instance.get_latest_materialization_event(key).asset_materialization.metadata.items()}


def _checks(result):
    return {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    }


def _transform_rows(partition=DAYS[-1]):
    return _read(f"SELECT * FROM {TRANSFORMS_TABLE} WHERE partition_date = $day ORDER BY variant", {"day": partition})


def _read(sql, params=None):
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        return con.execute(sql, params or {}).df()


def test_stored_transforms_round_trip_and_equal_a_refit_from_the_warehouse(home):
    assert _read(f"SELECT DISTINCT partition_date::VARCHAR AS d FROM {TRANSFORMS_TABLE}")["d"].tolist() == DAYS[-1:]
    rows = _transform_rows()
    assert rows["variant"].tolist() == ["unweighted", "weighted"]
    assert rows["window_start"].dt.date.astype(str).tolist() == [DAYS[0]] * 2
    # partition D trains on the days before D: D itself is the fairness audit's
    assert rows["window_end"].dt.date.astype(str).tolist() == [DAYS[-2]] * 2
    assert rows["partitions"].tolist() == [2, 2] and rows["estimable"].all()
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        first, last = dt.date.fromisoformat(DAYS[0]), dt.date.fromisoformat(DAYS[-2])
        counts = read_click_counts(con, first, last)
        curve = load_chosen_position_bias(con)
        sums = read_weighted_sums(con, first, last, curve[["position", "weight"]])
        stored = load_latest_transforms(con)
    refit = fit_from_weighted_sums(sums, score_bin_width=1e-3)
    json_text = rows.set_index("variant").loc["weighted", "transform_json"]
    assert json_text == refit.to_json()  # exact: same knots, same counts, same params
    # the per-position counts weighted in numpy: the same fit (the weighted sums added in another order)
    per_position = fit_from_click_counts(counts, curve[["position", "weight"]], score_bin_width=1e-3)
    for group in refit.groups_:
        np.testing.assert_allclose(refit.group_quantiles_[group], per_position.group_quantiles_[group], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(refit.reference_quantiles_, per_position.reference_quantiles_)
    assert WeightedCDFTransformer.from_json(json_text).to_json() == json_text
    assert stored["weighted"].position_bias_method == "adjacent_pairwise" and stored["unweighted"].position_bias_method is None


def test_weights_come_from_the_chosen_curve(home):
    """Independent of the EO code: per group, the sum of 1 / w_position over clicked raw rows (and Kish's n)."""
    raw = _read(
        "SELECT o.group_id, sum(1.0 / c.weight) AS w, sum(1.0 / (c.weight * c.weight)) AS w2, count(*) AS clicks"
        " FROM raw.observational_impressions o JOIN marts.position_bias_curves c ON o.position = c.position"
        " WHERE o.click = 1 AND c.chosen AND c.partition_date = $day AND o.partition_date < $day GROUP BY 1 ORDER BY 1",
        {"day": DAYS[-1]}
    ).set_index("group_id")
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        stored = load_latest_transforms(con)
    weighted, unweighted = stored["weighted"].transform, stored["unweighted"].transform
    for group, row in raw.iterrows():
        assert weighted.n_positives_[group] == unweighted.n_positives_[group] == row["clicks"]
        assert weighted.positive_weight_[group] == pytest.approx(row["w"], rel=1e-12)
        assert weighted.n_effective_[group] == pytest.approx(row["w"] ** 2 / row["w2"], rel=1e-12)
        assert unweighted.positive_weight_[group] == pytest.approx(row["clicks"], rel=1e-12)
    # The weighting moves group 0's CDF (its clicks sit lower in the ranking than group 1's).
    assert not np.allclose(weighted.group_quantiles_["0"], unweighted.group_quantiles_["0"])


def test_stored_transform_is_monotone_in_each_group(home):
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        stored = load_latest_transforms(con)
    for variant, entry in stored.items():
        model = entry.transform
        for group in model.groups_:
            x, _ = model.knots_[group]
            grid = np.linspace(x[0] - 1.0, x[-1] + 1.0, 20_001)
            fair = model.transform(grid, np.full(len(grid), group))
            assert np.all(np.diff(fair) > 0), (variant, group)  # "shift" keeps it strictly increasing outside too


def test_transform_metadata_and_checks(home):
    meta = _metadata(home["instance"], EO_TRANSFORM_KEY)
    assert meta["estimable"] is True and meta["window_partitions"] == DAYS[:-1]
    assert meta["held_out_partitions"] == DAYS[-1:]
    # the calendar window 2025-12-27..2026-01-02 of the mapping (-7, -1): the five days before the logs are named
    assert meta["window"] == "2025-12-27..2026-01-02"
    assert meta["window_missing_partitions"] == [f"2025-12-{d}" for d in range(27, 32)]
    assert meta["position_bias_method"] == "adjacent_pairwise"
    assert set(meta["n_positives"]) == {"0", "1"} and min(meta["n_positives"].values()) >= 30
    assert "| weighted" in meta["knots_summary"] and "n_effective" in meta["knots_summary"]
    linked_figure(meta["transforms_plot"])
    assert meta["serving_model"] == "fair-ranker v1 @candidate"


def test_fair_ranker_is_registered_as_candidate_and_scores_like_the_transform(home):
    point_fluent_api_at(settings.mlflow_tracking_uri())
    client = mlflow.MlflowClient(settings.mlflow_tracking_uri(), settings.mlflow_tracking_uri())
    version = client.get_model_version_by_alias("fair-ranker", "candidate")
    run = client.get_run(version.tags["fair_pipeline.run_id"])
    assert run.data.tags[TAG_DAGSTER_RUN] == home["run_id"]
    assert run.data.tags[TAG_ASSET] == EO_TRANSFORM_KEY.to_user_string()
    assert run.data.tags[TAG_WINDOW] == f"{DAYS[0]}..{DAYS[-2]}" and run.data.tags[TAG_HELD_OUT] == DAYS[-1]
    assert run.data.tags[TAG_PARTITION] == DAYS[-1] and version.tags[TAG_MODEL_PARTITION] == DAYS[-1]
    assert _metadata(home["instance"], EO_TRANSFORM_KEY)["mlflow_run_id"] == run.info.run_id
    model = mlflow.pyfunc.load_model("models:/fair-ranker@candidate")
    items = simulate_items(CONFIG).head(200)
    fair = model.predict(items[[f"f{k}" for k in range(CONFIG.n_features)] + ["group_id"]])
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        weighted = load_latest_transforms(con)["weighted"].transform
    expected = weighted.transform(items["f0"] + items["f1"], items["group_id"])
    np.testing.assert_array_equal(np.asarray(fair, dtype=float), expected)


def test_evaluation_is_labelled_simulation_with_tables_and_figures(home):
    meta = _metadata(home["instance"], EO_EVALUATION_KEY)
    assert meta["label"] == SIMULATION_LABEL and meta["label"].startswith("SIMULATION")
    assert meta["evaluated"] is True and meta["held_out_day"] == DAYS[-1] and meta["n_requests"] == 300
    for name in ("per_group", "summary"):
        assert meta[name].startswith(f"**{SIMULATION_LABEL}**")
    assert "| weighted_alpha=0.5" in meta["summary"] and "KS distance" in meta["summary"]
    assert "exposure / merit" in meta["per_group"] and re.search(r"\|\s+p1\s+\|", meta["positions_of_relevant_items"])
    for figure in ("figure_1", "figure_3"):
        linked_figure(meta[figure])
    ratios = meta["exposure_over_merit_ratio"]
    # Raw scores under-expose group 0 (ratio well below 1); the weighted transform brings it to ~1.
    assert ratios["raw"]["ratio"] + 3 * ratios["raw"]["se"] < 1
    assert abs(ratios["weighted"]["ratio"] - 1) < 3 * ratios["weighted"]["se"]
    table = _read("SELECT method, \"group\", simulation, held_out_day::VARCHAR AS held_out_day, "
                  "partition_date::VARCHAR AS partition_date FROM marts.eo_evaluation")
    assert len(table) == 2 * (3 + 5) and table["simulation"].all()
    assert set(table["held_out_day"]) == set(table["partition_date"]) == {DAYS[-1]}
    assert set(table["method"]) >= {"raw", "unweighted", "weighted", "weighted_alpha=0", "weighted_alpha=1"}


def test_report_tables_are_made_from_the_stored_results_with_their_contract_columns(home):
    """The fairness report makes `eo_transform_cdf` and `exposure_merit` from the newest partition's store tables."""
    from fair_pipeline.reporting import ReportInputs

    inputs = ReportInputs(home["root"], settings.warehouse_path())
    try:
        cdf = inputs.stored_table("eo_transform_cdf", ["group", "score", "cdf"])
        merit = inputs.stored_table("exposure_merit", ["ranking", "group", "exposure", "merit"])
        summary = inputs.stored_table("eo_evaluation_summary", ["method", "exposure_over_merit_ratio"])
    finally:
        inputs.close()
    assert set(cdf["group"].astype(str)) == {"0", "1"} and len(cdf) == 2 * 1001
    for _, part in cdf.groupby("group"):
        assert np.all(np.diff(part["score"]) >= 0) and np.all(np.diff(part["cdf"]) > 0)
        assert (part["cdf_ci_low"] <= part["cdf"]).all() and (part["cdf"] <= part["cdf_ci_high"]).all()
    assert sorted(merit["ranking"].unique()) == ["after", "before", "unweighted"] and merit["simulation"].all()
    assert {"raw", "unweighted", "weighted"} <= set(summary["method"])
    merit["group"] = merit["group"].astype(str)
    before = merit[merit["ranking"] == "before"].set_index("group")
    after = merit[merit["ranking"] == "after"].set_index("group")
    # Same held-out requests: merit is the same before and after; only exposure moves (toward group 0).
    np.testing.assert_array_equal(before["merit"], after["merit"])
    assert after.loc["0", "exposure"] > before.loc["0", "exposure"]


def test_evaluation_is_skipped_without_ground_truth(home, tmp_path):
    """Open Bandit style logs: no landing/_truth, so nothing to draw new clicks from."""
    instance = dg.DagsterInstance.ephemeral()  # its own: the latest materializations of the module's stay as built
    resources = {**default_resources(), "landing": LandingZone(path=str(tmp_path / "landing"))}
    result = dg.materialize([eo_evaluation], resources=resources, instance=instance, partition_key=DAYS[-1])
    assert result.success
    meta = _metadata(instance, EO_EVALUATION_KEY)
    assert meta["evaluated"] is False and "not a simulation: no ground truth" in meta["status"]
    # the report of that partition says the evaluation ran and why it stored nothing, not that it never ran
    from fair_pipeline.reporting import ReportInputs, StageMissing

    inputs = ReportInputs(home["root"], settings.warehouse_path(), partition=DAYS[-1])
    try:
        with pytest.raises(StageMissing, match=f"ran for partition {DAYS[-1]} and stored nothing: skipped: not a "
                                               "simulation: no ground truth"):
            inputs.stored_table("exposure_merit", ["ranking"])
    finally:
        inputs.close()


def _failure(result) -> str:
    assert not result.success
    return next(e for e in result.all_events if e.is_step_failure).step_failure_data.user_failure_data.description


@pytest.mark.parametrize("partition", ["2025-12-31", DAYS[0]])
def test_a_partition_without_earlier_days_fails_with_a_clear_message(home, partition):
    instance = dg.DagsterInstance.ephemeral()  # its own: the latest materializations of the module's stay as built
    before = _read(f"SELECT * FROM {TRANSFORMS_TABLE} ORDER BY partition_date, variant")
    result = dg.materialize([eo_transform], resources=default_resources(), instance=instance,
                            partition_key=partition, raise_on_error=False)
    assert f"partition {partition} has nothing to train on: not enough data in the window " in _failure(result)
    assert "marts.eo_score_click_counts has no day with data" in _failure(result)
    assert _read(f"SELECT * FROM {TRANSFORMS_TABLE} ORDER BY partition_date, variant").equals(before)


def test_an_older_partition_registers_its_own_version_and_never_moves_candidate(home):
    """A backfilled day: fitted on the days before it, stored as its own rows, registered without the alias."""
    instance = dg.DagsterInstance.ephemeral()  # its own: the latest materializations of the module's stay as built
    client = mlflow.MlflowClient(settings.mlflow_tracking_uri(), settings.mlflow_tracking_uri())
    candidate = client.get_model_version_by_alias("fair-ranker", "candidate")
    newest = _transform_rows()
    result = dg.materialize([position_bias, eo_transform], resources=default_resources(), instance=instance,
                            partition_key=DAYS[1])
    assert result.success
    rows = _transform_rows(DAYS[1])
    assert rows["window_start"].dt.date.astype(str).tolist() == rows["window_end"].dt.date.astype(str).tolist() == [DAYS[0]] * 2
    assert rows["partitions"].tolist() == [1, 1] and rows["estimable"].all()
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        curve = load_chosen_position_bias(con, DAYS[1])
        day = dt.date.fromisoformat(DAYS[0])
        refit = fit_from_weighted_sums(read_weighted_sums(con, day, day, curve[["position", "weight"]]),
                                       score_bin_width=1e-3)
    assert rows.set_index("variant").loc["weighted", "transform_json"] == refit.to_json()
    assert _transform_rows().equals(newest)  # the newest partition's fit is untouched
    assert client.get_model_version_by_alias("fair-ranker", "candidate").version == candidate.version
    versions = client.search_model_versions("name = 'fair-ranker'")
    older = [v for v in versions if v.tags.get(TAG_MODEL_PARTITION) == DAYS[1]]
    assert len(versions) == 2 and len(older) == 1 and older[0].version != candidate.version
    assert "alias @candidate not moved" in _metadata(instance, EO_TRANSFORM_KEY)["serving_model"]


def test_too_few_clicks_is_reported_not_estimable_and_the_evaluation_skips(home):
    """It replaces partition DAYS[-1]'s stored transforms with 'not estimable' rows."""
    instance = dg.DagsterInstance.ephemeral()  # its own: the latest materializations of the module's stay as built
    result = dg.materialize(
        eo_assets, resources=default_resources(), instance=instance, partition_key=DAYS[-1],
        run_config={"ops": {"marts__eo_transforms": {"config": {"min_positives": 1_000_000}}}},
    )
    assert result.success
    checks = _checks(result)
    assert not checks[ESTIMABLE_CHECK].passed and checks[ESTIMABLE_CHECK].severity == dg.AssetCheckSeverity.WARN
    assert checks[VALID_CHECK].passed
    meta = _metadata(instance, EO_TRANSFORM_KEY)
    assert meta["estimable"] is False
    assert re.search(r"group '0': \d+ clicks, group '1': \d+ clicks", meta["not_estimable"])
    rows = _transform_rows()
    assert len(rows) == 2 and not rows["estimable"].any() and rows["transform_json"].isna().all()
    evaluation = _metadata(instance, EO_EVALUATION_KEY)
    assert evaluation["evaluated"] is False and "no transform to evaluate" in evaluation["status"]
