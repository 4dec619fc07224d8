"""The fairness_audit asset on a small simulated home: two days ingested, partition DAYS[-1] trained (on DAYS[0])
and audited (on DAYS[-1]) once by the train_and_audit job.

The stored numbers are compared with the in-memory audit (compare_groups, xauc, pairwise_accuracies) on the
same rows read independently from the landing files; then the asset alone is re-materialized with other label
sources, a too-strict min_count (not-estimable groups), a fitted EO transform and a linear ranker candidate, and
for partitions without traffic or without models of their own.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.ingestion.catalogue_dates import delivery_on
from fair_pipeline import runner
from fair_pipeline.audit import VERDICTS, compare_groups, exposure_parity, pairwise_accuracies, xauc
from fair_pipeline.audit.assets import FAIRNESS_AUDIT_KEY, HELD_OUT_CHECK, SIMULATION_BANNER, fairness_audit
from fair_pipeline.audit.sql import UNKNOWN_GROUP
from fair_pipeline.eo.store import write_transforms
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import MLflowTracking
from fair_pipeline.position_bias.store import load_chosen_position_bias
from tests.audit.tables import assert_tables_close
from tests.figure_links import linked_figure
from tests.simulated_home import materialize_simulated_home
from tests.shared_home import restore_home_after_each_test

CONFIG = SimulationConfig(n_items=3_000, requests_per_day=400, shuffle_share=0.5, adjacent_swap_share=0.25, slots=20, seed=5)
START = dt.date(2026, 1, 1)
DAYS = [str(START + dt.timedelta(days=i)) for i in range(2)]
OP = FAIRNESS_AUDIT_KEY.to_python_identifier()
GROUP_COLUMNS = ["auc", "variance", "se", "ci_low", "ci_high", "auc_normalized", "mcclish", "n_pos", "n_neg"]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("audit_home")
    materialize_simulated_home(home, CONFIG, START, len(DAYS))
    return home


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home")


def _materialize(home: Path, config: dict | None = None, landing: Path | None = None, raise_on_error: bool = True,
                 partition: str = DAYS[-1]):
    return dg.materialize(
        [fairness_audit],
        resources={"warehouse": DuckDBWarehouse(path=str(home / "warehouse.duckdb")),
                   "landing": LandingZone(path=str(landing or home / "landing")),
                   "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}",
                                            artifact_root=str(home / "mlartifacts"))},
        run_config={"ops": {OP: {"config": config or {}}}},
        instance=dg.DagsterInstance.ephemeral(),
        partition_key=partition,
        raise_on_error=raise_on_error,
    )


def _query(home: Path, sql: str, params=None) -> pd.DataFrame:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or {}).df()


def _landing_rows(home: Path, source: str, day: str) -> pd.DataFrame:
    """The day's rows straight from the landing Parquet (not through the warehouse)."""
    return pd.read_parquet(home / "landing" / source / f"date={day}")


def _truth_rows(home: Path, day: str) -> pd.DataFrame:
    truth = pd.read_parquet(home / "landing" / "_truth" / f"date={DAYS[-1]}" / "items.parquet")[["item_id", "relevance"]]
    return _landing_rows(home, "observational", day).merge(truth, on="item_id", how="left")


def _stored(home: Path, table: str, output: str, label: str, partition: str = DAYS[-1]) -> pd.DataFrame:
    return _query(home, f"SELECT * FROM marts.{table} WHERE scored_output = $o AND label_source = $l AND partition_date = $d",
                  {"o": output, "l": label, "d": partition})


def _outputs(home: Path, where: str = "TRUE", partition: str = DAYS[-1]) -> pd.DataFrame:
    return _query(home, f"SELECT * FROM marts.fairness_audit_outputs WHERE partition_date = $d AND {where}", {"d": partition})


def _assert_groups_equal(stored: pd.DataFrame, expected: pd.DataFrame) -> None:
    stored = stored[~stored["is_overall"]].sort_values(["group", "cutoff"]).reset_index(drop=True)
    expected = expected.sort_values(["group", "cutoff"]).reset_index(drop=True)
    assert stored["group"].tolist() == expected["group"].astype(str).tolist()
    np.testing.assert_array_equal(stored["estimable"].to_numpy(bool), expected["estimable"].to_numpy(bool))
    for column in GROUP_COLUMNS:
        np.testing.assert_allclose(stored[column].to_numpy(float), expected[column].to_numpy(float), rtol=1e-12,
                                   atol=1e-15, equal_nan=True, err_msg=column)


def test_daily_job_audits_production_scores_on_truth_labels_like_in_memory(home):
    assert _query(home, "SELECT DISTINCT partition_date::VARCHAR AS d FROM marts.fairness_audit_groups")["d"].tolist() == DAYS[-1:]
    rows = _truth_rows(home, DAYS[-1])  # partition D evaluates day D
    expected = compare_groups(rows["score"], rows["relevance"], rows["group_id"], clusters=rows["item_id"])
    stored = _stored(home, "fairness_audit_groups", "production", "relevance")
    _assert_groups_equal(stored, expected.groups)
    assert (stored["variance_estimand"] == "item_clustered").all()
    assert (stored["clusters"] == rows["item_id"].nunique()).all()
    # items repeat within the day, so the population SE is wider than Lemma 3's (impressions independent)
    iid = compare_groups(rows["score"], rows["relevance"], rows["group_id"])
    assert (expected.pairs["se"].to_numpy() > 1.3 * iid.pairs["se"].to_numpy()).all()
    pairs = _stored(home, "fairness_audit_pairs", "production", "relevance").sort_values("cutoff")
    np.testing.assert_allclose(pairs[["diff", "se", "z", "p_value"]].to_numpy(float),
                               expected.pairs.sort_values("cutoff")[["diff", "se", "z", "p_value"]].to_numpy(float),
                               rtol=1e-10, atol=1e-300)
    # every comparison is stored with its effect size, δ, TOST p and verdict (default margins)
    np.testing.assert_allclose(pairs[["effect", "effect_ci_low", "effect_ci_high", "margin", "p_tost"]].to_numpy(float),
                               expected.pairs.sort_values("cutoff")[["effect", "effect_ci_low", "effect_ci_high", "margin",
                                                                     "p_tost"]].to_numpy(float), rtol=1e-9, atol=1e-300)
    assert pairs["verdict"].tolist() == expected.pairs.sort_values("cutoff")["verdict"].tolist()
    deltas = _stored(home, "fairness_audit_xauc_deltas", "production", "relevance")
    assert deltas["verdict"].notna().all() and (deltas["margin"] == 0.02).all()
    x = xauc(rows["score"], rows["relevance"], rows["group_id"], clusters=rows["item_id"]).pairs
    stored_x = _stored(home, "fairness_audit_xauc", "production", "relevance").sort_values(["group_a", "group_b"])
    np.testing.assert_allclose(stored_x[["xauc", "se", "n_pos_a", "n_neg_b"]].to_numpy(float),
                               x.sort_values(["group_a", "group_b"])[["xauc", "se", "n_pos_a", "n_neg_b"]].to_numpy(float),
                               rtol=1e-12)
    outputs = _outputs(home, "label_source = 'relevance'")
    prod = outputs.set_index("scored_output").loc["production"]
    assert prod["status"] == "audited" and bool(prod["held_out"]) and bool(prod["simulation_labels"])
    assert prod["rows"] == len(rows) and prod["n_pos"] == rows["relevance"].sum()
    assert str(prod["window_start"])[:10] == DAYS[-1]
    assert outputs.loc[outputs["status"] == "unavailable", "reason"].notna().all()
    # partition D's EO transforms and retrained rankers are fitted on the day before D: held out by construction
    for prefix in ("eo_", "ranker_"):
        fitted = outputs[outputs["scored_output"].str.startswith(prefix) & (outputs["status"] == "audited")]
        assert len(fitted), (prefix, outputs[["scored_output", "status", "reason"]])
        assert fitted["held_out"].astype(bool).all() and fitted["reason"].isna().all()
        assert (fitted["trained_from"].astype(str).str[:10] == DAYS[0]).all()
        assert (fitted["trained_through"].astype(str).str[:10] == DAYS[0]).all()


def test_logged_ranking_exposure_parity_is_stored_like_the_array_path(home):
    rows = _landing_rows(home, "observational", DAYS[-1])
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        curve = load_chosen_position_bias(con, dt.date.fromisoformat(DAYS[-1]))
    expected = exposure_parity(rows["position"], rows["click"], rows["group_id"].fillna(UNKNOWN_GROUP), curve,
                               clusters={"item_id": rows["item_id"], "request_id": rows["request_id"]})
    groups = _stored(home, "fairness_audit_exposure_groups", "production", "relevance").sort_values("group")
    pairs = _stored(home, "fairness_audit_exposure_pairs", "production", "relevance")
    assert groups["group"].tolist() == expected.per_group["group"].tolist()
    np.testing.assert_allclose(groups[["exposure", "merit", "exposure_over_merit", "se_log"]].to_numpy(float),
                               expected.per_group[["exposure", "merit", "exposure_over_merit", "se_log"]].to_numpy(float),
                               rtol=1e-9)
    assert groups["items"].tolist() == [rows.loc[rows["group_id"] == g, "item_id"].nunique() for g in groups["group"]]
    np.testing.assert_allclose(pairs[["ratio", "ci_low", "ci_high", "p_value"]].to_numpy(float),
                               expected.pairs[["ratio", "ci_low", "ci_high", "p_value"]].to_numpy(float), rtol=1e-9)
    assert pairs["verdict"].tolist() == expected.pairs["verdict"].tolist()
    assert (groups["ranking"] == "production (logged ranking)").all() and groups["examination"].str.contains("curve").all()
    assert "two-way" in groups["variance_estimand"].iloc[0] and "worst case" in groups["variance_estimand"].iloc[0]


def _check(result, name: str):
    return next(c for c in result.get_asset_check_evaluations() if c.check_name == name)


def test_daily_job_audit_is_held_out_and_says_on_which_windows(home):
    result = _materialize(home)
    check = _check(result, HELD_OUT_CHECK)
    assert check.passed and f"evaluation window {DAYS[-1]}..{DAYS[-1]}" in check.description
    metadata = result.asset_materializations_for_node(OP)[0].metadata
    assert metadata["evaluation_partitions"].value == DAYS[-1:]
    windows = metadata["training_windows"].value
    assert windows["production"] == "not fitted on the logs" and windows["eo_weighted"] == f"{DAYS[0]}..{DAYS[0]}"
    assert any(name.startswith("ranker_") and w == f"{DAYS[0]}..{DAYS[0]}" for name, w in windows.items())
    run = _newest_audit_run(home)
    assert run.data.tags["fair_pipeline.evaluation_window"] == f"{DAYS[-1]}..{DAYS[-1]}"
    assert f"eo_weighted: {DAYS[0]}..{DAYS[0]}" in run.data.tags["fair_pipeline.training_windows"]
    assert run.info.run_name.endswith(f"evaluated on {DAYS[-1]}..{DAYS[-1]}")
    pauc = _report_table(home, "partial_auc")
    assert set(pauc.loc[pauc["model"] == "eo_weighted", "training_window"]) == {f"{DAYS[0]}..{DAYS[0]}"}
    assert set(pauc.loc[pauc["model"] == "production", "training_window"]) == {"not fitted on the logs"}


def _newest_audit_run(home: Path):
    tracking = MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))
    return tracking.client().search_runs([tracking.experiment_id("audit")], "attributes.status = 'FINISHED'",
                                         order_by=["attributes.start_time DESC"], max_results=1)[0]


def _report_table(home: Path, name: str) -> pd.DataFrame:
    """Report table `name` as the fairness report makes it from the audit's store tables of the newest partition."""
    from fair_pipeline.reporting import ReportInputs

    inputs = ReportInputs(home, home / "warehouse.duckdb", partition=DAYS[-1])
    try:
        return inputs.stored_table(name, ["model"])
    finally:
        inputs.close()


def test_daily_job_logged_one_mlflow_run_with_figures_and_the_report_reads_the_stored_tables(home):
    tracking = MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))
    run = _newest_audit_run(home)
    assert run.data.tags["fair_pipeline.stage"] == "audit" and run.data.params["label_source"] == "relevance"
    audited = _outputs(home, "status = 'audited'")
    artifacts = {f.path for f in tracking.client().list_artifacts(run.info.run_id)}
    assert "tables" not in artifacts  # the results are written once, to the warehouse
    figures = {f.path for f in tracking.client().list_artifacts(run.info.run_id, "figures")}
    assert figures == {f"figures/curves_{name}.svg" for name in audited["scored_output"]}
    pauc = _report_table(home, "partial_auc")
    assert set(pauc["model"]) == set(audited["scored_output"]) and len(pauc) == 2 * 5 * len(audited)
    stored = _stored(home, "fairness_audit_groups", "production", "relevance")
    stored = stored[~stored["is_overall"]].sort_values(["group", "cutoff"])
    production = pauc[pauc["model"] == "production"].sort_values(["group", "fpr_high"])
    np.testing.assert_allclose(production["estimate"].to_numpy(float), stored["auc_normalized"].to_numpy(float), rtol=1e-12)


def test_pairwise_accuracies_and_curves_match_in_memory(home):
    result = _materialize(home, {"pairwise_max_queries": 100_000})
    assert result.success
    rows = _truth_rows(home, DAYS[-1])
    # the pipeline's estimand: two-way clustered by item and query (new items and new queries)
    expected = pairwise_accuracies(rows["score"], rows["relevance"], rows["group_id"], rows["query_id"],
                                   clusters=(rows["item_id"], rows["query_id"]))
    stored = _stored(home, "fairness_audit_pairwise", "production", "relevance")
    matrix = stored[stored["metric"].str.fullmatch(r"A_\{\d>\d\}")].sort_values(["group_a", "group_b"])
    want = expected.matrix.sort_values(["group_better", "group_worse"])
    np.testing.assert_allclose(matrix[["accuracy", "se", "n_pairs", "n_queries"]].to_numpy(float),
                               want[["accuracy", "se", "n_pairs", "n_queries"]].to_numpy(float), rtol=1e-12)
    assert matrix["n_queries"].max() == rows["query_id"].nunique()
    assert (stored["variance_estimand"][stored["kind"] != "parity"] == "two_way").all()
    np.testing.assert_allclose(matrix[["n_items", "df"]].to_numpy(float), want[["n_items", "df"]].to_numpy(float), rtol=1e-12)
    gap = stored[stored["metric"] == "A_{0>1} - A_{1>0}"].iloc[0]  # the cross-group gap row, with its verdict
    np.testing.assert_allclose(gap[["accuracy", "se", "p_value", "effect", "p_tost"]].to_numpy(float),
                               expected.gaps.iloc[0][["gap", "se", "p_value", "effect", "p_tost"]].to_numpy(float), rtol=1e-10)
    assert gap["verdict"] == expected.gaps.iloc[0]["verdict"]
    curves = _stored(home, "fairness_audit_curves", "production", "relevance")
    roc = curves[curves["kind"] == "roc"]
    assert set(roc["group_a"]) == {"0", "1"} and len(roc) == 2 * 101
    assert (roc["tpr_ci_low"] <= roc["tpr"] + 1e-12).all() and (roc["tpr"] <= roc["tpr_ci_high"] + 1e-12).all()
    assert (roc["tpr_ci_high"] - roc["tpr_ci_low"]).between(0, 0.5).all()
    metadata = result.asset_materializations_for_node(OP)[0].metadata
    assert metadata["labels"].value == SIMULATION_BANNER
    linked_figure(metadata["production/curves"].value,
                  MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts")))
    assert "EO transform" in metadata["transform_note"].value
    assert _check(result, "every_group_estimable").passed


def test_pairwise_sample_is_bounded(home):
    assert _materialize(home, {"pairwise_max_queries": 25}).success
    stored = _stored(home, "fairness_audit_pairwise", "production", "relevance")
    overall = stored[stored["metric"].str.startswith("pairwise accuracy")]
    assert overall["n_queries"].iloc[0] <= 25
    outputs = _outputs(home, "scored_output = 'production'")
    assert outputs["pairwise_queries"].iloc[0] == 25 and outputs["queries_in_window"].iloc[0] == CONFIG.requests_per_day


def test_randomized_click_labels_match_in_memory_on_shuffled_traffic(home):
    assert _materialize(home, {"label_source": "randomized_clicks", "window_days": 2}).success
    rows = pd.concat([_landing_rows(home, "randomized", d) for d in DAYS])
    rows = rows[rows["policy"] == "shuffle"]
    expected = compare_groups(rows["score"], rows["click"], rows["group_id"], clusters=rows["item_id"])
    _assert_groups_equal(_stored(home, "fairness_audit_groups", "production", "randomized_clicks"), expected.groups)
    outputs = _stored(home, "fairness_audit_outputs", "production", "randomized_clicks")
    assert not outputs["simulation_labels"].iloc[0] and outputs["rows"].iloc[0] == len(rows)
    # one audit per partition: re-auditing D with another label source replaces D's rows (the trend and the
    # selection read one row set per day); the default audit comes back with the default config
    assert _stored(home, "fairness_audit_groups", "production", "relevance").empty
    assert _materialize(home).success
    assert len(_stored(home, "fairness_audit_groups", "production", "relevance")) > 0
    assert _stored(home, "fairness_audit_groups", "production", "randomized_clicks").empty


def test_groups_too_small_are_not_estimable_never_fair(home):
    rows = _truth_rows(home, DAYS[-1])
    small = int(rows.loc[rows["group_id"] == "0", "relevance"].sum()) + 1  # group 0 has fewer positives than this
    assert small <= rows.loc[rows["group_id"] == "1", ["relevance"]].sum().iloc[0]
    result = _materialize(home, {"min_count": small})
    assert result.success
    groups = _stored(home, "fairness_audit_groups", "production", "relevance")
    g0 = groups[groups["group"] == "0"]
    assert not g0["estimable"].any() and g0["auc"].isna().all() and g0["se"].isna().all()
    assert g0["note"].str.contains("not estimable").all() and (g0["n_pos"] == small - 1).all()
    assert groups[groups["group"] == "1"]["estimable"].all()
    pairs = _stored(home, "fairness_audit_pairs", "production", "relevance")
    assert not pairs["estimable"].any() and pairs["diff"].isna().all()
    x = _stored(home, "fairness_audit_xauc", "production", "relevance").set_index("group_a")
    assert not x.at["0", "estimable"] and np.isnan(x.at["0", "xauc"])
    md = result.asset_materializations_for_node(OP)[0].metadata["production/groups"].value
    assert "n/a (not estimable)" in md
    check = _check(result, "every_group_estimable")
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "group '0'" in check.description and f"{small - 1} positives" in check.description


def test_an_older_partition_is_audited_with_its_own_models_only(home):
    """Partition DAYS[0] has no EO transform or ranker of its own (nothing before it to train on): the audit of
    day DAYS[0] lists them as unavailable, naming the partition, and never borrows partition DAYS[-1]'s models."""
    newest = _query(home, "SELECT * FROM marts.fairness_audit_groups WHERE partition_date = $d ORDER BY ALL", {"d": DAYS[-1]})
    assert _materialize(home, partition=DAYS[0]).success
    outputs = _outputs(home, partition=DAYS[0]).set_index("scored_output")
    assert outputs.at["production", "status"] == "audited" and str(outputs.at["production", "window_start"])[:10] == DAYS[0]
    assert not outputs.index.str.startswith("ranker_d").any() and not (outputs.index == "eo_weighted").any()
    reasons = outputs.loc[outputs["status"] == "unavailable", "reason"]
    assert f"marts.eo_transforms has no rows for partition {DAYS[0]}" in reasons.at["eo_transform"]
    assert f"marts.ranker_candidates has no rows for partition {DAYS[0]}" in reasons.at["ranker_candidates"]
    rows = _truth_rows(home, DAYS[0])
    expected = compare_groups(rows["score"], rows["relevance"], rows["group_id"], clusters=rows["item_id"])
    _assert_groups_equal(_stored(home, "fairness_audit_groups", "production", "relevance", DAYS[0]), expected.groups)
    after = _query(home, "SELECT * FROM marts.fairness_audit_groups WHERE partition_date = $d ORDER BY ALL", {"d": DAYS[-1]})
    pd.testing.assert_frame_equal(after, newest)


def _write_eo_transform(home: Path, model: WeightedCDFTransformer, window_end: str) -> None:
    """`model` as partition DAYS[-1]'s EO fit, trained on DAYS[0]..window_end."""
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute("DROP TABLE IF EXISTS marts.eo_transforms")
        write_transforms(con, dt.date.fromisoformat(DAYS[0]), dt.date.fromisoformat(window_end), 1,
                         {"weighted": model, "unweighted": "too few clicks"}, "adjacent_pairwise",
                         partition=dt.date.fromisoformat(DAYS[-1]))


def test_eo_transformed_scores_keep_within_group_auc_and_move_xauc(home):
    train = _landing_rows(home, "observational", DAYS[0])
    model = WeightedCDFTransformer().fit(train["score"], train["group_id"], clicks=train["click"])
    _write_eo_transform(home, model, window_end=DAYS[0])
    try:
        result = _materialize(home)
        assert result.success
        rows = _truth_rows(home, DAYS[-1])
        fair = model.transform(rows["score"].to_numpy(), rows["group_id"].to_numpy())
        expected = compare_groups(fair, rows["relevance"], rows["group_id"], clusters=rows["item_id"])
        stored = _stored(home, "fairness_audit_groups", "eo_weighted", "relevance")
        _assert_groups_equal(stored, expected.groups)
        production = _stored(home, "fairness_audit_groups", "production", "relevance")
        full = lambda f: f[(f["cutoff"] == 1.0) & ~f["is_overall"]].set_index("group")["auc"]  # noqa: E731
        np.testing.assert_allclose(full(stored), full(production), atol=1e-4)  # monotone within group
        x_eo = _stored(home, "fairness_audit_xauc", "eo_weighted", "relevance").set_index(["group_a", "group_b"])
        x_prod = _stored(home, "fairness_audit_xauc", "production", "relevance").set_index(["group_a", "group_b"])
        gap_before = abs(x_prod.at[("0", "1"), "xauc"] - x_prod.at[("1", "0"), "xauc"])
        gap_after = abs(x_eo.at[("0", "1"), "xauc"] - x_eo.at[("1", "0"), "xauc"])
        assert gap_after < gap_before - 0.1, (gap_before, gap_after)
        outputs = _outputs(home, "label_source = 'relevance'").set_index("scored_output")
        assert outputs.at["eo_weighted", "status"] == "audited" and bool(outputs.at["eo_weighted", "held_out"])
        assert outputs.at["eo_unweighted", "status"] == "unavailable"
        assert "too few clicks" in outputs.at["eo_unweighted", "reason"]
        note = result.asset_materializations_for_node(OP)[0].metadata["transform_note"].value
        assert "xAUC(0, 1)" in note and "AUC within group 0" in note
        # trained through the evaluated day: flagged in-sample
        _write_eo_transform(home, model, window_end=DAYS[-1])
        result = _materialize(home)
        assert result.success
        flagged = _stored(home, "fairness_audit_outputs", "eo_weighted", "relevance")
        assert not flagged["held_out"].iloc[0] and "in-sample" in flagged["reason"].iloc[0]
        check = _check(result, HELD_OUT_CHECK)
        assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
        assert "eo_weighted: in-sample" in check.description and f"({DAYS[0]}..{DAYS[-1]})" in check.description
    finally:
        with duckdb.connect(str(home / "warehouse.duckdb")) as con:
            con.execute("DROP TABLE IF EXISTS marts.eo_transforms")


def test_linear_ranker_candidate_is_audited_from_item_features(home):
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute("CREATE OR REPLACE TABLE marts.ranker_candidates AS SELECT 'd/merit/lam=0' AS candidate_id, "
                    "CAST(NULL AS DATE) AS window_start, CAST(NULL AS DATE) AS window_end, $f AS features, $c AS coefficients, 0.5 AS intercept, "
                    "CAST($d AS DATE) AS partition_date",
                    {"f": '["f0", "f1", "f2"]', "c": '{"f0": 1.0, "f1": 1.0, "f2": 0.0}', "d": DAYS[-1]})
    try:
        result = _materialize(home, {"pairwise_max_queries": 100_000})
        assert result.success
        rows = _truth_rows(home, DAYS[-1])
        items = pd.read_parquet(delivery_on(home / "landing", DAYS[-1]).files[0])
        rows = rows.merge(items[["item_id", "f0", "f1"]], on="item_id")
        score = rows["f0"] + rows["f1"] + 0.5
        expected = compare_groups(score, rows["relevance"], rows["group_id"], clusters=rows["item_id"])
        _assert_groups_equal(_stored(home, "fairness_audit_groups", "ranker_d_merit_lam_0", "relevance"), expected.groups)
        pw = pairwise_accuracies(score, rows["relevance"], rows["group_id"], rows["query_id"],
                                 clusters=(rows["item_id"], rows["query_id"])).overall
        assert (pw["variance_estimand"] == "two_way").all()
        stored = _stored(home, "fairness_audit_pairwise", "ranker_d_merit_lam_0", "relevance")
        overall = stored[stored["metric"].str.startswith("pairwise accuracy")]
        np.testing.assert_allclose(overall[["accuracy", "se"]].to_numpy(float), pw[["accuracy", "se"]].to_numpy(float), rtol=1e-12)
        outputs = _stored(home, "fairness_audit_outputs", "ranker_d_merit_lam_0", "relevance")
        assert outputs["held_out"].isna().iloc[0]  # no training window recorded: unknown, not claimed held out
        check = _check(result, HELD_OUT_CHECK)
        assert not check.passed and "ranker_d_merit_lam_0: training window unknown" in check.description
    finally:
        with duckdb.connect(str(home / "warehouse.duckdb")) as con:
            con.execute("DROP TABLE IF EXISTS marts.ranker_candidates")


def test_bad_configuration_fails_with_a_clear_message(home, tmp_path):
    result = _materialize(home, {"label_source": "relevance"}, landing=tmp_path, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.message
    assert "truth file" in failure and "randomized_clicks" in failure
    result = _materialize(home, {"outputs": ["nope"]}, raise_on_error=False)
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.message
    assert "'nope'" in failure and "production" in failure
    result = _materialize(home, {"margins": {"auc": 0.1}}, raise_on_error=False)
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.message
    assert "margins" in failure and "unknown margin metric 'auc'" in failure and "xauc" in failure


def test_a_partition_without_traffic_fails_naming_it_and_writes_nothing(home):
    before = _query(home, "SELECT * FROM marts.fairness_audit_groups ORDER BY ALL")
    day = str(START + dt.timedelta(days=len(DAYS)))  # the day after the newest ingested one
    for partition, newest in ((day, DAYS[-1]), ("2025-12-31", None)):
        result = _materialize(home, raise_on_error=False, partition=partition)
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.message
        # neither day was simulated, so it has no truth of its own: "auto" audits randomized clicks
        assert (f"partition {partition} has no randomized_clicks traffic to evaluate (newest before it: {newest}); "
                f"ingest day {partition} first") in failure
    pd.testing.assert_frame_equal(_query(home, "SELECT * FROM marts.fairness_audit_groups ORDER BY ALL"), before)


class _RecordingRun:
    def __init__(self):
        self.run_id, self.url, self.params, self.metrics, self.tables, self.figures = "run-1", "http://x", {}, {}, {}, []

    def log_params(self, params):
        self.params.update(params)

    def log_metrics(self, metrics):
        self.metrics.update(metrics)

    def log_table(self, frame, name):
        self.tables[name] = frame

    def log_figure(self, figure, name):
        self.figures.append(name)
        return f"http://x/{name}.svg"


class _RecordingTracking:
    """Stands in for MLflowTracking: records what one audit run logs."""

    def __init__(self):
        self.run, self.stages = _RecordingRun(), []

    def start_run(self, context, stage, run_name=None, window=None, tags=None):
        import contextlib

        self.stages.append((stage, window))
        return contextlib.nullcontext(self.run)


def test_one_tracked_run_logs_figures_and_the_report_tables_come_from_the_stored_rows(home):
    from fair_pipeline.audit import sql as aw
    from fair_pipeline.audit.evaluation import EvaluationData, audit_output
    from fair_pipeline.audit.outputs import production_scores
    from fair_pipeline.audit.report import report_tables, warehouse_tables
    from fair_pipeline.audit.tracking import log_audit

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        window = aw.evaluation_window(con, "relevance")
        source = aw.label_source("relevance", home / "landing", window, ["shuffle"])
        data = EvaluationData(aw.score_counts(con, source), None, *aw.query_rows(con, source, 50))
    audits = [audit_output(production_scores(None)[0], data, window.first, [0.1, 1.0], min_count=10, confidence=0.95)]
    tracking = _RecordingTracking()
    run_id, _, figure_urls = log_audit(tracking, None, audits, {"label_source": "relevance"},
                                       (str(window.first), str(window.last)))
    assert tracking.run.tables == {}  # the results are the warehouse rows, written once
    rows = warehouse_tables(audits)
    tables = report_tables(rows)
    assert run_id == "run-1" and tracking.stages == [("audit", (DAYS[-1], DAYS[-1]))]
    assert figure_urls == {"production": "http://x/curves_production.svg"}  # linked from the Dagster metadata
    contract = {  # fair_pipeline.reporting.sections: name -> required columns
        "partial_auc": ["model", "group", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"],
        "roc_curves": ["model", "group", "fpr", "tpr", "tpr_ci_low", "tpr_ci_high"],
        "xauc": ["model", "direction", "estimate", "ci_low", "ci_high", "n_pos", "n_neg", "p_value"],
        "xroc_curves": ["model", "direction", "fpr", "tpr"],
        "pairwise_accuracy": ["model", "group_a", "group_b", "estimate", "ci_low", "ci_high", "n_pairs"],
    }
    for name, columns in contract.items():
        assert set(columns) <= set(tables[name].columns), name
    pauc = tables["partial_auc"].set_index(["group", "fpr_high"])
    groups = audits[0].report.groups.set_index(["group", "cutoff"])
    np.testing.assert_allclose(pauc["estimate"], groups["auc"] / groups.index.get_level_values(1))
    assert np.isnan(pauc.loc[("0", 1.0), "p_value"])  # the reference group: no test
    assert pauc.loc[("1", 1.0), "p_value"] == audits[0].report.pairs.set_index("cutoff").at[1.0, "p_value"]
    # The report's findings quote the difference from the reference group and ΔxAUC, each with its CI.
    for cutoff in (0.1, 1.0):
        one, ref = pauc.loc[("1", cutoff)], pauc.loc[("0", cutoff)]
        assert one["reference"] == "0" and one["diff"] == pytest.approx(one["estimate"] - ref["estimate"], abs=1e-12)
        assert one["diff_ci_low"] < one["diff"] < one["diff_ci_high"] and np.isnan(ref["diff"])
    # ... and the verdict of each comparison against δ (the sign of the difference does not change it)
    assert one["verdict"] == audits[0].report.pairs.set_index("cutoff").at[1.0, "verdict"] and one["margin"] == 0.02
    assert ref["verdict"] is None or pd.isna(ref["verdict"])
    xauc = tables["xauc"].set_index("direction")
    assert xauc.at["0>1", "verdict"] == xauc.at["1>0", "verdict"] == audits[0].report.xauc.deltas["verdict"].iloc[0]
    # the cross-group pairwise gap A(0>1) - A(1>0) with its clustered SE and verdict, from the warehouse rows
    gaps = tables["pairwise_gaps"].iloc[0]
    matrix = audits[0].pairwise.matrix.set_index(["group_better", "group_worse"])["accuracy"]
    assert gaps["estimate"] == pytest.approx(matrix[("0", "1")] - matrix[("1", "0")], abs=1e-12)
    assert gaps["ci_low"] < gaps["estimate"] < gaps["ci_high"] and gaps["verdict"] in VERDICTS and gaps["margin"] == 0.02
    stored = rows["fairness_audit_pairwise"]
    assert stored.loc[stored["kind"] == "gap", "verdict"].tolist() == [gaps["verdict"]]
    assert stored.loc[stored["kind"] == "gap", "metric"].tolist() == ["A_{0>1} - A_{1>0}"]
    assert xauc.at["0>1", "delta"] == pytest.approx(xauc.at["0>1", "estimate"] - xauc.at["1>0", "estimate"], abs=1e-12)
    assert xauc.at["1>0", "delta"] == -xauc.at["0>1", "delta"] and xauc.at["1>0", "delta_ci_high"] == -xauc.at["0>1", "delta_ci_low"]
    assert xauc.at["0>1", "delta_ci_low"] < xauc.at["0>1", "delta"] < xauc.at["0>1", "delta_ci_high"]
    assert tracking.run.figures == ["curves_production"]
    assert "production.delta_xauc" in tracking.run.metrics and "production.auc_gap_se" in tracking.run.metrics


def test_cluster_pass_in_batches_stores_the_tables_of_one_batch(home, monkeypatch):
    """Memory: the held-out rows, each output's scores, its blocks and the cluster-robust pass stream through
    DuckDB in batches of `audit.streamed.BATCH_ROWS` rows (a cluster may span batches; the per-item path of the
    ranker outputs runs in batches of CLUSTER_BATCH_ROWS). Forcing many batches on this small warehouse stores
    what one batch stores: labels and counts exactly, estimates to 1e-12 (of their column's scale)."""
    from fair_pipeline.audit import streamed
    from fair_pipeline.audit.stats import grid_audit
    from fair_pipeline.audit.store import TABLES

    def stored() -> dict[str, pd.DataFrame]:
        out = {}
        for table in TABLES:
            frame = _query(home, f"SELECT * FROM {table} WHERE partition_date = $d", {"d": DAYS[-1]})
            frame = frame[[c for c in frame.columns if "run" not in c and not c.endswith("_at")]]
            keys = [c for c in frame.columns if frame[c].dtype.kind not in "f"]
            out[table] = frame.sort_values(keys).reset_index(drop=True)
        return out

    assert _materialize(home).success
    one = stored()
    assert len(one["marts.fairness_audit_groups"]) and one["marts.fairness_audit_outputs"]["rows"].max() > 2_000
    monkeypatch.setattr(grid_audit, "CLUSTER_BATCH_ROWS", 500)
    monkeypatch.setattr(streamed, "BATCH_ROWS", 500)
    assert _materialize(home).success
    batched = stored()
    for table, a in one.items():
        assert_tables_close(batched[table], a, table)
