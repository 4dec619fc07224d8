"""elicited_metric and model_selection on a small simulated home: three days ingested, partition DAYS[-1] trained
and audited once by the train_and_audit job (model_selection of D evaluates day D with the models of partition D).

The winner's cost is recomputed by brute force: the champion pyfunc loaded back from MLflow scores every
held-out impression (truth labels joined from the landing files), the threshold is found by sorting the
impressions, and the cost is Definition 4 written out by hand. Then the assets alone are re-materialized:
re-running moves the alias, a failing alias rolls the new version back, an older partition registers its winner
without moving the alias (promotion is explicit), and bad oracle configs or partitions fail clearly.
"""
from __future__ import annotations

import datetime as dt
import json
import warnings
from pathlib import Path

import dagster as dg
import duckdb
import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from fair_pipeline.ingestion.catalogue_dates import delivery_on
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import CHAMPION, FAIR_RANKER, TAG_MODEL_PARTITION, MLflowTracking
from fair_pipeline.selection.assets import (
    ELICITED_METRIC_KEY,
    ESTIMABLE_CHECK,
    MODEL_SELECTION_KEY,
    SEPARATED_CHECK,
    SIMULATED_LABEL,
    elicited_metric,
    model_selection,
)
from fair_pipeline.selection.elicitation import (
    FairQuadraticMetric,
    SimulatedOracle,
    elicit_fair_quadratic_metric,
    metric_from_dict,
)
from fair_pipeline.selection.elicitation.paired import paired_cost_difference
from fair_pipeline.selection.session import SessionConfig, SessionStore
from fair_pipeline.platform.tracking import point_fluent_api_at
from tests.simulated_home import materialize_simulated_home
from tests.shared_home import restore_home_after_each_test

CONFIG = SimulationConfig(n_items=2_000, requests_per_day=150, shuffle_share=0.5, adjacent_swap_share=0.5, slots=20, seed=11)
START = dt.date(2026, 1, 1)
DAYS = [str(START + dt.timedelta(days=i)) for i in range(3)]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("selection_home")
    materialize_simulated_home(home, CONFIG, START, len(DAYS))
    # This module checks the ranker + EO candidates, whose winner is registered and promoted; the decision-rule
    # families (which may rank first and are never registered) are tested in test_families_asset.py.
    assert _materialize(home, model_selection).success
    return home


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home")


def _resources(home: Path) -> dict:
    return {"warehouse": DuckDBWarehouse(path=str(home / "warehouse.duckdb")),
            "landing": LandingZone(path=str(home / "landing")),
            "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))}


def _materialize(home: Path, asset, config: dict | None = None, raise_on_error: bool = True, partition: str = DAYS[-1]):
    if asset is model_selection:
        config = {"families": [], **(config or {})}
    op = asset.key.to_python_identifier()
    partitioned = asset.partitions_def is not None  # the elicited metric is not: one metric for every day
    return dg.materialize([asset], resources=_resources(home), run_config={"ops": {op: {"config": config or {}}}},
                          instance=dg.DagsterInstance.ephemeral(), raise_on_error=raise_on_error,
                          partition_key=partition if partitioned else None)


def _query(home: Path, sql: str, params=None) -> pd.DataFrame:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or {}).df()


def _client(home: Path) -> MlflowClient:
    uri = f"sqlite:///{home / 'mlflow.db'}"
    point_fluent_api_at(uri)
    return MlflowClient(uri, uri)


def _versions(home: Path) -> list[str]:
    return sorted(v.version for v in _client(home).search_model_versions(f"name = '{FAIR_RANKER}'"))


def _ranking(home: Path, partition: str = DAYS[-1]) -> pd.DataFrame:
    return _query(home, "SELECT * FROM marts.model_ranking WHERE partition_date = $d ORDER BY rank NULLS LAST",
                  {"d": partition})


def _candidate(home: Path, candidate_id: str, partition: str = DAYS[-1]) -> pd.Series:
    return _query(home, "SELECT * FROM marts.ranker_candidates WHERE candidate_id = $c AND partition_date = $d",
                  {"c": candidate_id, "d": partition}).iloc[0]


def _metric(home: Path) -> FairQuadraticMetric:
    row = _query(home, "SELECT metric_json FROM marts.elicited_metrics ORDER BY elicited_at DESC LIMIT 1")
    return metric_from_dict(json.loads(row["metric_json"].iloc[0]))


def _cost_by_hand(metric: FairQuadraticMetric, rates: np.ndarray) -> float:
    """Definition 4 for m = 2, k = 2, written out: (1-lam) <a, 1 - r> + lam/2 (r0 - r1)^T B (r0 - r1)."""
    overall = metric.group_weights[0] * rates[0] + metric.group_weights[1] * rates[1]
    d = rates[0] - rates[1]
    return float((1 - metric.lam) * (metric.a[0] * (1 - overall[0]) + metric.a[1] * (1 - overall[1]))
                 + metric.lam / 2 * (d[0] * (metric.B[0, 1] @ d)[0] + d[1] * (metric.B[0, 1] @ d)[1]))


def test_elicited_metric_is_stored_labelled_simulated_and_close_to_the_truth(home):
    row = _query(home, "SELECT * FROM marts.elicited_metrics").iloc[-1]
    assert row["oracle_kind"] == "simulated" and row["simulated"]
    assert list(row["group_labels"]) == ["0", "1"]
    assert max(row["error_a"], row["error_B"], row["error_lam"]) < 0.05
    assert abs(row["lam"] - 0.5) < 0.01 and 50 < row["n_queries"] < 400
    runs = _client(home).search_runs([_client(home).get_experiment_by_name("fair_pipeline/selection").experiment_id],
                                     filter_string="tags.`fair_pipeline.oracle` = 'simulated'")
    assert runs and all(r.data.tags["fair_pipeline.simulation"] == "true" for r in runs)


def test_ranking_matches_brute_force_from_the_champion_model(home):
    ranking, metric = _ranking(home), _metric(home)
    estimable = ranking[ranking["estimable"]]
    assert len(estimable) >= 2 and (np.diff(estimable["cost"]) >= 0).all()
    assert ranking["estimable"].tolist() == sorted(ranking["estimable"].tolist(), reverse=True)  # not estimable last
    # every top candidate's cost from its stored group rates, by hand
    for _, row in estimable.head(3).iterrows():
        rates = np.array([[row[f"{s}[{g}]"] for s in ("tpr", "tnr")] for g in ("0", "1")])
        assert _cost_by_hand(metric, rates) == pytest.approx(row["cost"], rel=1e-12)
    # the winner's rates from scratch: champion pyfunc on every held-out impression of the last day
    winner = estimable.iloc[0]
    version = _client(home).get_model_version_by_alias(FAIR_RANKER, CHAMPION)
    assert str(version.version) == str(winner["champion_version"])
    assert version.tags["candidate"] == winner["model"] and version.tags[TAG_MODEL_PARTITION] == DAYS[-1]
    model = mlflow.pyfunc.load_model(f"models:/{FAIR_RANKER}@{CHAMPION}")
    rows = _heldout_rows(home)
    score = model.predict(rows.drop(columns=["item_id", "relevance"])).to_numpy()
    _assert_brute_force(score, rows, winner, metric)
    assert ranking["held_out"].all()  # randomized requests: no fit used them
    _assert_paired_difference(home, ranking, metric, rows, score)


def _assert_paired_difference(home: Path, ranking: pd.DataFrame, metric, rows: pd.DataFrame, winner_score) -> None:
    """The paired difference of an alpha = 0 candidate (its ranker's linear score, from marts.ranker_candidates)
    vs the winner (champion pyfunc), recomputed from the per-item held-out table: thresholds by sorting the
    impressions, costs by counting, the SE by a delta method on per-item sums (fixed thresholds) and by a
    bootstrap over items (thresholds re-placed in every resample)."""
    estimable = ranking[ranking["estimable"]]
    winner = estimable.iloc[0]
    assert winner["diff_vs_winner"] == 0 and np.isnan(winner[["diff_se", "diff_ci_low", "diff_ci_high", "diff_p"]].astype(float)).all()
    other = estimable[(estimable["alpha"] == 0.0) & (estimable["model"] != winner["model"])].iloc[0]
    cand = _candidate(home, other["ranker"])
    features, weights = json.loads(cand["features"]), json.loads(cand["coefficients"])
    other_score = rows[features].to_numpy(float) @ np.array([weights[f] for f in features]) + cand["intercept"]
    # per item: group, relevant and not-relevant showings, both candidates' scores (fixed per item)
    items = (rows.assign(a=other_score, w=np.asarray(winner_score, dtype=float), pos=rows["relevance"] == 1)
             .groupby("item_id").agg(group=("group_id", "first"), n_pos=("pos", "sum"), n=("pos", "size"),
                                     a=("a", "first"), w=("w", "first")))
    items["n_neg"] = items["n"] - items["n_pos"]

    def costs(frame: pd.DataFrame) -> tuple[float, float]:
        out = []
        for col in ("a", "w"):
            s = np.repeat(frame[col].to_numpy(), frame["n"].to_numpy())  # impressions, sorted for the threshold
            t = np.sort(s)[::-1][int(np.ceil(0.4 * s.size)) - 1]
            sel = frame[col] >= t
            rates = [[frame["n_pos"][sel & (frame["group"] == g)].sum() / frame["n_pos"][frame["group"] == g].sum(),
                      frame["n_neg"][~sel & (frame["group"] == g)].sum() / frame["n_neg"][frame["group"] == g].sum()]
                     for g in ("0", "1")]
            out.append(_cost_by_hand(metric, np.array(rates)))
        return out[0], out[1]

    cost_a, cost_w = costs(items)
    assert cost_a == pytest.approx(other["cost"], rel=1e-12) and cost_w == pytest.approx(winner["cost"], rel=1e-12)
    assert other["diff_vs_winner"] == pytest.approx(cost_a - cost_w, rel=1e-10)
    assert other["paired_clusters"] == len(items) and other["paired_rows"] == len(items)  # one held-out row per item
    rng = np.random.default_rng(0)
    boot = [np.subtract(*costs(items.iloc[rng.integers(0, len(items), len(items))])) for _ in range(300)]
    assert other["diff_se"] == pytest.approx(np.std(boot, ddof=1), rel=0.25)  # 0.0092 vs 0.0105 when written
    # every item decides all-or-nothing at the estimated thresholds: the CI is the cells' weighted-binomial interval
    # there, its half-widths scaled by the thresholds' share of the SE, and p the level at which it reaches 0
    # (`paired_binomial`), the same as the library gives on the per-item table built above
    labels = ("0", "1")
    by_hand = paired_cost_difference(metric, items[["group", "n_pos", "n_neg"]], items["a"].to_numpy(),
                                     items["w"].to_numpy(), labels, selection_rate=0.4, clusters=items.index.to_numpy())
    assert by_hand.estimate == pytest.approx(other["diff_vs_winner"], rel=1e-10)
    assert (other["diff_ci_low"], other["diff_ci_high"]) == pytest.approx((by_hand.ci_low, by_hand.ci_high), rel=1e-9)
    assert other["diff_p"] == pytest.approx(by_hand.p_value, rel=1e-6)
    assert other["diff_ci_low"] < other["diff_vs_winner"] < other["diff_ci_high"]
    assert (other["diff_p"] < 0.05) == (other["diff_ci_low"] > 0 or other["diff_ci_high"] < 0)


def _heldout_rows(home: Path) -> pd.DataFrame:
    """Every shuffle impression of the evaluated day with its item's features, group and true relevance."""
    rows = pd.read_parquet(home / "landing" / "randomized" / f"date={DAYS[-1]}")
    rows = rows[rows["policy"] == "shuffle"]
    items = pd.read_parquet(delivery_on(home / "landing", DAYS[-1]).files[0])
    truth = pd.read_parquet(home / "landing" / "_truth" / f"date={DAYS[-1]}" / "items.parquet")[["item_id", "relevance"]]
    return rows[["item_id"]].merge(items, on="item_id").merge(truth, on="item_id")


def _assert_brute_force(score: np.ndarray, rows: pd.DataFrame, stored: pd.Series, metric) -> None:
    """Threshold by sorting the impressions (top 40%), group rates by counting, cost by hand = the stored row."""
    order = np.sort(score)[::-1]
    threshold = order[int(np.ceil(0.4 * len(order))) - 1]
    assert threshold == pytest.approx(stored["threshold"], abs=1e-12)
    h, y = score >= threshold, rows["relevance"].to_numpy() == 1
    rates, n_pos = [], []
    for g in ("0", "1"):
        mine = (rows["group_id"] == g).to_numpy()
        rates.append([(h & y & mine).sum() / (y & mine).sum(), (~h & ~y & mine).sum() / (~y & mine).sum()])
        n_pos.append((y & mine).sum())
    np.testing.assert_allclose(rates, [[stored["tpr[0]"], stored["tnr[0]"]], [stored["tpr[1]"], stored["tnr[1]"]]], rtol=1e-12)
    assert [stored["n_pos[0]"], stored["n_pos[1]"]] == n_pos
    assert _cost_by_hand(metric, np.array(rates)) == pytest.approx(stored["cost"], rel=1e-12)


def test_eo_candidate_matches_an_independent_refit_from_the_landing_files(home):
    """alpha = 1 of the best ranker: the transform re-fitted in numpy on the ranker's scores of the raw
    production impressions (clicks weighted 1/w of the chosen curve), then scored and counted by brute force."""
    ranking, metric = _ranking(home), _metric(home)
    stored = ranking[(ranking["alpha"] == 1.0) & ranking["estimable"]].iloc[0]
    cand = _candidate(home, stored["ranker"])
    features, weights = json.loads(cand["features"]), json.loads(cand["coefficients"])
    coef = np.array([weights[f] for f in features])
    items = pd.read_parquet(delivery_on(home / "landing", DAYS[-1]).files[0])
    days = pd.date_range(cand["window_start"], cand["window_end"]).strftime("%Y-%m-%d")
    train = pd.concat([pd.read_parquet(home / "landing" / "observational" / f"date={d}") for d in days])
    train = train[train["policy"] == "production"].merge(items[["item_id", *features]], on="item_id")
    curve = _query(home, "SELECT position, weight FROM marts.position_bias_curves WHERE chosen AND partition_date = $d",
                   {"d": DAYS[-1]})
    w = train["position"].map(dict(zip(curve["position"], curve["weight"]))).to_numpy()
    template = _query(home, "SELECT transform_json FROM marts.eo_transforms WHERE variant = 'weighted' "
                            "AND partition_date = $d", {"d": DAYS[-1]})["transform_json"].iloc[0]
    params = WeightedCDFTransformer.from_json(template).get_params() | {"alpha": 1.0}
    fitted = WeightedCDFTransformer(**params).fit(train[features].to_numpy(float) @ coef + cand["intercept"],
                                                  train["group_id"], 1.0 / w, clicks=train["click"])
    rows = _heldout_rows(home)
    score = fitted.transform(rows[features].to_numpy(float) @ coef + cand["intercept"], rows["group_id"])
    _assert_brute_force(score, rows, stored, metric)


def test_rerun_moves_the_champion_to_the_new_version_of_the_same_winner(home):
    before = _ranking(home)
    old = _client(home).get_model_version_by_alias(FAIR_RANKER, CHAMPION).version
    result = _materialize(home, model_selection)
    assert result.success
    after = _ranking(home)
    new = _client(home).get_model_version_by_alias(FAIR_RANKER, CHAMPION)
    assert new.tags[TAG_MODEL_PARTITION] == DAYS[-1]  # the newest partition with data: the alias moves
    assert int(new.version) > int(old) and str(new.version) == str(after["champion_version"].dropna().iloc[0])
    assert new.tags["candidate"] == before["model"].iloc[0] == after["model"].iloc[0]
    pd.testing.assert_series_equal(before["cost"], after["cost"])
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks[ESTIMABLE_CHECK].passed
    # the runner-up check reads the paired, item-clustered difference of the stored ranking
    runner = after[after["estimable"]].iloc[1]
    check = checks[SEPARATED_CHECK]
    meta = {k: v.value for k, v in check.metadata.items()}
    assert check.passed == bool(runner["diff_ci_low"] > 0)
    assert meta["runner_up"] == runner["model"] and meta["winner"] == after["model"].iloc[0]
    assert meta["diff_runner_up_minus_winner"] == pytest.approx(runner["diff_vs_winner"])
    assert [meta["diff_ci_low"], meta["diff_ci_high"]] == pytest.approx([runner["diff_ci_low"], runner["diff_ci_high"]])
    assert meta["n_clusters_items"] == runner["paired_clusters"] > 100 and meta["n_rows"] == runner["paired_rows"]
    assert "clustered by item" in meta["interval"] and "clustered by item" in check.description
    # the report reads the stored ranking of the partition, with the metric it was ranked by
    from fair_pipeline.reporting import ReportInputs

    inputs = ReportInputs(home, home / "warehouse.duckdb", partition=DAYS[-1])
    try:
        shown = inputs.stored_table("model_ranking", ["rank", "model"]).set_index("model").loc[after["model"]]
        metric = inputs.stored_table("elicited_metric", ["oracle", "parameter", "elicited"])
    finally:
        inputs.close()
    for column in ("diff_vs_winner", "diff_se", "diff_ci_low", "diff_ci_high", "diff_p", "paired_clusters"):
        np.testing.assert_allclose(shown[column].astype(float), after[column].astype(float), rtol=0, equal_nan=True)
    assert metric["oracle"].iloc[0] == SIMULATED_LABEL and "lam" in set(metric["parameter"])


def test_failed_alias_rolls_back_the_new_version(home, monkeypatch):
    versions, champion = _versions(home), _client(home).get_model_version_by_alias(FAIR_RANKER, CHAMPION).version
    original = MlflowClient.set_registered_model_alias

    def refuse_champion(self, name, alias, version):
        if alias == CHAMPION:
            raise RuntimeError("injected: alias store unavailable")
        return original(self, name, alias, version)

    monkeypatch.setattr(MlflowClient, "set_registered_model_alias", refuse_champion)
    result = _materialize(home, model_selection, raise_on_error=False)
    monkeypatch.undo()
    assert not result.success
    assert _versions(home) == versions  # the version registered for the winner was deleted again
    assert _client(home).get_model_version_by_alias(FAIR_RANKER, CHAMPION).version == champion


def _failure(result) -> str:
    return " ".join(str(e.event_specific_data.error.message) for e in result.all_events if e.event_type_value == "STEP_FAILURE")


def test_an_older_partition_registers_its_winner_without_moving_the_champion(home, monkeypatch):
    """A backfilled day: its own rankers, transform and curve (trained on the days before it), its own ranking, a
    version tagged with its partition; @champion stays until promoted explicitly (forward only, unless forced)."""
    from fair_pipeline.eo.assets import eo_transform
    from fair_pipeline.position_bias.assets import position_bias
    from fair_pipeline.selection.promotion import PromotionError, promote
    from fair_pipeline.training.assets import ranker_candidates

    client = _client(home)
    champion = client.get_model_version_by_alias(FAIR_RANKER, CHAMPION)
    newest = _ranking(home)
    upstream = dg.materialize([position_bias, eo_transform, ranker_candidates], resources=_resources(home),
                              instance=dg.DagsterInstance.ephemeral(), partition_key=DAYS[1])
    assert upstream.success
    result = _materialize(home, model_selection, partition=DAYS[1])
    assert result.success
    meta = result.asset_materializations_for_node(MODEL_SELECTION_KEY.to_python_identifier())[0].metadata
    assert meta["promoted"].value is False and f"@{CHAMPION} unchanged ({DAYS[1]} is not the newest" in meta["champion_version"].value
    assert client.get_model_version_by_alias(FAIR_RANKER, CHAMPION).version == champion.version
    older = _ranking(home, DAYS[1])
    assert len(older) == len(newest) and older["held_out"].all()
    assert (_candidate(home, older["ranker"].iloc[0], DAYS[1])[["window_start", "window_end"]].astype(str).str[:10]
            == DAYS[0]).all()  # partition DAYS[1] trained on DAYS[0] only
    pd.testing.assert_frame_equal(_ranking(home), newest)  # the newest partition's ranking is untouched
    registered = [v for v in client.search_model_versions(f"name = '{FAIR_RANKER}'")
                  if v.tags.get(TAG_MODEL_PARTITION) == DAYS[1] and "selection_run" in v.tags]
    assert len(registered) == 1 and str(registered[0].version) == str(older["champion_version"].dropna().iloc[0])
    assert registered[0].tags["candidate"] == older["model"].iloc[0]

    monkeypatch.setenv("FAIR_PIPELINE_HOME", str(home))  # promote reads the newest partition from the warehouse
    tracking = _resources(home)["mlflow"]
    with pytest.raises(PromotionError, match=rf"partition {DAYS[1]} is older than the newest partition with data "
                                             rf"\({DAYS[-1]}\).*--force"):
        promote(dt.date.fromisoformat(DAYS[1]), tracking=tracking)
    assert client.get_model_version_by_alias(FAIR_RANKER, CHAMPION).version == champion.version
    with pytest.raises(PromotionError, match=f"no {FAIR_RANKER} version was selected for partition {DAYS[0]}"):
        promote(dt.date.fromisoformat(DAYS[0]), force=True, tracking=tracking)
    line = promote(dt.date.fromisoformat(DAYS[1]), force=True, tracking=tracking)
    assert line.startswith(f"{FAIR_RANKER}@{CHAMPION} -> v{registered[0].version} (partition {DAYS[1]}")
    assert line.endswith(f"was v{champion.version}")
    assert client.get_model_version_by_alias(FAIR_RANKER, CHAMPION).version == registered[0].version
    promote(dt.date.fromisoformat(DAYS[-1]), tracking=tracking)  # forward again: the newest partition's newest version
    back = client.get_model_version_by_alias(FAIR_RANKER, CHAMPION)
    assert back.tags[TAG_MODEL_PARTITION] == DAYS[-1] and int(back.version) >= int(champion.version)


def test_a_partition_without_traffic_fails_naming_it(home):
    before = _ranking(home)
    day = str(START + dt.timedelta(days=len(DAYS)))  # after the newest ingested day: no models, no traffic
    failure = _failure(_materialize(home, model_selection, partition=day, raise_on_error=False))
    assert f"marts.ranker_candidates has no rows for partition {day}" in failure
    pd.testing.assert_frame_equal(_ranking(home), before)


def test_unknown_oracle_and_bad_truth_fail_clearly(home):
    result = _materialize(home, elicited_metric, {"oracle": "psychic"}, raise_on_error=False)
    assert not result.success and "unknown oracle 'psychic'" in _failure(result)
    result = _materialize(home, elicited_metric, {"truth_B": [[[1.0, 2.0], [0.0, 1.0]]]}, raise_on_error=False)
    assert not result.success and "symmetric positive semi-definite" in _failure(result)


def _record_session(db: Path, session_id: str, oracle) -> None:
    """A stored `fair-pipeline elicit` session whose answers come from `oracle` (as a person would type them)."""
    # The paper's questions (the call below), stored as such: a replay asks them again.
    config = SessionConfig(group_labels=("0", "1"), tolerance=1e-2, method="qpme")
    store = SessionStore(db)
    store.create(session_id, config)
    answers = []

    def recording(r1, r2):
        answer = bool(oracle(r1, r2))
        store.record_answer(session_id, len(answers), r1, r2, "A", "A" if answer else "B", answer)
        answers.append(answer)
        return answer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        elicit_fair_quadratic_metric(recording, 2, 2, tolerance=config.tolerance, radius=config.radius,
                                     on_inconsistency="ignore")
    store.close()


def test_recorded_oracle_bad_input_fails_clearly(home, tmp_path):
    missing = _materialize(home, elicited_metric, {"oracle": "recorded", "elicitation_db": str(tmp_path / "none.duckdb")},
                           raise_on_error=False)
    assert not missing.success and "does not exist" in _failure(missing)
    empty_db = tmp_path / "empty.duckdb"
    SessionStore(empty_db).close()  # the tables exist, no session answered anything
    empty = _materialize(home, elicited_metric, {"oracle": "recorded", "elicitation_db": str(empty_db)}, raise_on_error=False)
    assert not empty.success and "no elicitation session with answers" in _failure(empty)
    noisy_db = tmp_path / "noisy.duckdb"
    rng = np.random.default_rng(0)
    _record_session(noisy_db, "coin", lambda r1, r2: bool(rng.random() < 0.5))  # a person answering at random
    noisy = _materialize(home, elicited_metric, {"oracle": "recorded", "elicitation_db": str(noisy_db)}, raise_on_error=False)
    assert not noisy.success and "inconsistent" in _failure(noisy) and "preference cycle" in _failure(noisy)


def test_recorded_session_drives_selection(home, tmp_path):
    """A consistent recorded session replays to the metric its answers imply, and model selection uses it."""
    db = tmp_path / "person.duckdb"
    truth = FairQuadraticMetric.from_pairs([0.8, 0.6], [np.eye(2) * np.sqrt(2)], 0.3)
    _record_session(db, "alice", SimulatedOracle(truth))
    assert _materialize(home, elicited_metric, {"oracle": "recorded", "elicitation_db": str(db)}).success
    row = _query(home, "SELECT * FROM marts.elicited_metrics ORDER BY elicited_at DESC LIMIT 1").iloc[0]
    assert row["oracle_kind"] == "recorded" and not row["simulated"] and row["session_id"] == "alice"
    assert abs(row["lam"] - 0.3) < 0.01 and pd.isna(row["error_lam"])
    assert _materialize(home, model_selection).success
    ranking, metric = _ranking(home), _metric(home)
    best = ranking.iloc[0]
    rates = np.array([[best["tpr[0]"], best["tnr[0]"]], [best["tpr[1]"], best["tnr[1]"]]])
    assert _cost_by_hand(metric, rates) == pytest.approx(best["cost"], rel=1e-12) and metric.lam == row["lam"]


def test_a_metric_weighing_exposure_ranks_by_the_total_with_paired_differences_of_the_totals(home):
    """mu > 0: the ranking's cost is cost(rates) + mu · D and every estimable loser has a paired CI of the totals'
    difference (the held-out rows and the logged requests joined by item)."""
    assert _materialize(home, elicited_metric, {"exposure_weight": 5.0}).success
    assert _materialize(home, model_selection).success
    ranking = _ranking(home)
    fitted = ranking[ranking["estimable"].astype(bool)]
    assert len(fitted) >= 2 and (fitted["exposure_weight"] == 5.0).all()
    assert fitted["selected_by"].str.contains("5 x exposure disparity").all()
    losers = fitted.iloc[1:]
    assert losers["diff_vs_winner"].to_numpy() == pytest.approx((losers["cost"] - fitted["cost"].iloc[0]).to_numpy())
    assert losers[["diff_se", "diff_ci_low", "diff_ci_high", "diff_df"]].notna().all().all()
    assert ((losers["diff_ci_low"] <= losers["diff_vs_winner"]) & (losers["diff_vs_winner"] <= losers["diff_ci_high"])).all()
    # each own CI is the total's, rates and exposure joined by item (clustered: the same as cost_se_clustered)
    assert (fitted["cost_se"] > 0).all() and fitted["cost_se"].to_numpy() == pytest.approx(
        fitted["cost_se_clustered"].to_numpy())
    assert ((fitted["ci_low"] < fitted["cost"]) & (fitted["cost"] < fitted["ci_high"])).all()
