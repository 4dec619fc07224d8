"""The position_bias asset: window of mart partitions, every estimator, tables, checks, not-estimable paths.

One simulated home (3 days, 20 slots, half shuffled / half swapped traffic) is ingested and its newest partition
trained and audited once; the tests then re-materialize only the position_bias asset for some partition with other
configs (partition D estimates over the partitions with data through D, rows keyed by D). Two hand-built warehouses hold
just the marts (no ingestion) for the missing-traffic and too-little-traffic paths.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from fair_pipeline import runner
from fair_pipeline.definitions import defs
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig, bias_curve
from fair_pipeline.platform.partitions import daily_partitions
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import MLflowTracking
from fair_pipeline.position_bias import PositionBiasInputError, estimate_position_bias
from fair_pipeline.position_bias.assets import (
    AGREEMENT_CHECK,
    CHOSEN_CHECK,
    POSITION_BIAS_KEY,
    chosen_curve_check,
    position_bias,
)
from fair_pipeline.position_bias.simulated_aggregates import simulated_aggregates
from fair_pipeline.position_bias.store import CURVES_TABLE, METHODS_TABLE, load_chosen_position_bias
from fair_pipeline.position_bias.window import training_window
from tests.figure_links import linked_figure
from tests.simulated_home import materialize_simulated_home
from tests.shared_home import restore_home_after_each_test

CONFIG = SimulationConfig(n_items=2_000, requests_per_day=1_500, shuffle_share=0.5, adjacent_swap_share=0.5, slots=20, seed=11)
START = dt.date(2026, 1, 1)
DAYS = [str(START + dt.timedelta(days=i)) for i in range(3)]
METHODS = ["adjacent_pairwise", "adjacent_swap", "direct_is", "naive", "randomized"]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A simulated home with its three partitions ingested and the newest one trained and audited (default config)."""
    home = tmp_path_factory.mktemp("position_bias_home")
    result = materialize_simulated_home(home, CONFIG, START, len(DAYS))
    home.joinpath("job_result").write_text(repr(_check_outcomes(result)))
    return home


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home")


def _check_outcomes(result) -> dict[str, tuple[bool, str]]:
    return {
        e.check_name: (e.passed, e.severity.value)
        for e in (ev.event_specific_data for ev in result.all_events if ev.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if e.asset_key == POSITION_BIAS_KEY
    }


def _tracking(home: Path) -> MLflowTracking:
    return MLflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", artifact_root=str(home / "mlartifacts"))


def _materialize(warehouse: Path, landing: Path, config: dict | None = None, partition: str | None = DAYS[-1], **kwargs):
    return dg.materialize(
        [position_bias],
        resources={"warehouse": DuckDBWarehouse(path=str(warehouse)), "landing": LandingZone(path=str(landing)),
                   "mlflow": _tracking(warehouse.parent)},
        run_config={"ops": {"marts__position_bias_curves": {"config": config or {}}}},
        instance=dg.DagsterInstance.ephemeral(),
        partition_key=partition,
        **kwargs,
    )


def _query(warehouse: Path, sql: str, params=None) -> pd.DataFrame:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql, params or []).df()


def _curves(warehouse: Path, partition: str = DAYS[-1]) -> pd.DataFrame:
    """Partition `partition`'s curve rows."""
    return _query(warehouse, f"SELECT * FROM {CURVES_TABLE} WHERE partition_date = ?::DATE ORDER BY method, position",
                  [partition])


def _window(warehouse: Path, partition: str, where: str = "TRUE") -> list[str]:
    window = _query(warehouse, f"SELECT DISTINCT window_start, window_end FROM {CURVES_TABLE} "
                               f"WHERE partition_date = ?::DATE AND {where}", [partition])
    assert len(window) == 1
    return [str(pd.Timestamp(x).date()) for x in window.iloc[0]]


def metadata_window(result) -> list[str]:
    return result.asset_materializations_for_node("marts__position_bias_curves")[0].metadata["window_partitions"].value


def _checks(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _impressions(warehouse: Path, days: list[str]) -> pd.DataFrame:
    sql = """SELECT request_id, policy, position, original_position, score, click FROM raw.observational_impressions
             WHERE partition_date IN (SELECT unnest(?::DATE[]))
             UNION ALL
             SELECT request_id, policy, position, original_position, score, click FROM raw.randomized_impressions
             WHERE partition_date IN (SELECT unnest(?::DATE[]))"""
    return _query(warehouse, sql, [days, days])


def test_daily_job_builds_every_curve_over_the_window_and_checks_pass(home):
    warehouse = home / "warehouse.duckdb"
    assert eval(home.joinpath("job_result").read_text()) == {CHOSEN_CHECK: (True, "ERROR"), AGREEMENT_CHECK: (True, "WARN")}
    assert _query(warehouse, f"SELECT DISTINCT partition_date::VARCHAR AS d FROM {CURVES_TABLE}")["d"].tolist() == DAYS[-1:]
    curves = _curves(warehouse)
    assert sorted(curves["method"].unique()) == METHODS
    assert curves.groupby("method")["position"].apply(sorted).map(lambda p: p == list(range(1, 21))).all()
    assert {str(d.date()) for d in pd.to_datetime(curves["window_start"])} == {DAYS[0]}
    assert {str(d.date()) for d in pd.to_datetime(curves["window_end"])} == {DAYS[-1]}
    assert set(curves.loc[curves["chosen"], "method"]) == {"adjacent_pairwise"}

    # Same numbers as the in-memory estimator on the raw rows of the window (the SQL path is wired to the window).
    impressions = _impressions(warehouse, DAYS)
    for method in ("adjacent_pairwise", "randomized", "adjacent_swap"):
        expected = estimate_position_bias(impressions, method=method)
        stored = curves[curves["method"] == method].sort_values("position")
        np.testing.assert_allclose(stored["weight"], expected["weight"], rtol=1e-9)
        np.testing.assert_allclose(stored["ci_high"], expected["ci_high"], rtol=1e-9)
        assert stored["impressions"].tolist() == expected["impressions"].tolist()

    # The reader hands later stages the chosen curve; 13,500 production requests make it close to the truth.
    with duckdb.connect(str(warehouse), read_only=True) as con:
        chosen = load_chosen_position_bias(con)
        pd.testing.assert_frame_equal(load_chosen_position_bias(con, DAYS[-1]), chosen)
    assert list(chosen.columns[:4]) == ["position", "weight", "ci_low", "ci_high"]
    assert chosen.attrs["method"] == "adjacent_pairwise" and chosen.attrs["window_end"] == DAYS[-1]
    assert chosen["weight"].iloc[0] == 1.0 and (chosen["ci_low"] <= chosen["weight"]).all()
    truth = bias_curve(CONFIG)
    assert np.max(np.abs(chosen["weight"] - truth)) < 0.06
    methods = _query(warehouse, f"SELECT * FROM {METHODS_TABLE} WHERE partition_date = ?::DATE ORDER BY method", [DAYS[-1]])
    assert len(methods) == len(METHODS) and methods["estimable"].all() and methods["partitions"].eq(3).all()
    assert methods.set_index("method").loc["randomized", "impressions"] == 3 * 750 * 20


def test_metadata_reports_table_plot_counts_and_errors_vs_truth(home):
    result = _materialize(home / "warehouse.duckdb", home / "landing")
    assert result.success
    metadata = result.asset_materializations_for_node("marts__position_bias_curves")[0].metadata
    assert metadata["chosen_method"].value == "adjacent_pairwise"
    assert metadata["window_partitions"].value == DAYS
    assert metadata["chosen_curve"].value.count("\n") == 21 and "true w" in metadata["chosen_curve"].value
    linked_figure(metadata["curves_plot"].value, _tracking(home))
    assert metadata["chosen_impressions"].value == 3 * 1_500 * 20
    # Errors vs truth are recomputed here from the stored curves and the simulator's curve.
    curves = _curves(home / "warehouse.duckdb")
    truth = bias_curve(CONFIG)
    for method, curve in curves.groupby("method"):
        error = np.nanmax(np.abs(curve.sort_values("position")["weight"].to_numpy() - truth))
        assert metadata[f"max_abs_error/{method}"].value == pytest.approx(error, rel=1e-9), method
    # The observational estimators need the ratios: naive is visibly worse than adjacent_pairwise.
    assert metadata["max_abs_error/naive"].value > 2 * metadata["max_abs_error/adjacent_pairwise"].value


def test_the_report_reads_every_curve_from_the_warehouse(home):
    """The report's `position_bias_curve` table, made from the stored curves of the partition: every method and
    position, the chosen curve marked, the same numbers as the warehouse."""
    from fair_pipeline.reporting import ReportInputs

    inputs = ReportInputs(home, home / "warehouse.duckdb", partition=DAYS[-1])
    try:
        logged = inputs.stored_table("position_bias_curve", ["position", "estimate", "ci_low", "ci_high"])
    finally:
        inputs.close()
    stored = _curves(home / "warehouse.duckdb")
    assert inputs.sources["position_bias_curve"] == f"warehouse marts.position_bias_curves, partition {DAYS[-1]}"
    assert {"method", "n_impressions", "chosen", "ci_low", "ci_high", "truncated"} <= set(logged.columns)
    assert set(logged.loc[logged["chosen"].astype(bool), "method"]) == {"adjacent_pairwise"}
    merged = logged.merge(stored, on=["method", "position"], suffixes=("", "_stored"))
    assert len(merged) == len(logged) == len(stored) == len(METHODS) * 20
    np.testing.assert_allclose(merged["estimate"], merged["weight"], rtol=1e-12)
    np.testing.assert_allclose(merged["ci_high"], merged["ci_high_stored"], rtol=1e-12)
    assert (merged["n_impressions"] == merged["impressions"]).all()
    assert (merged["truncated"] == merged["truncated_stored"]).all()


# Materializes position_bias for the newest day in a process whose definitions were built with the window length
# of $FAIR_PIPELINE_WINDOW_DAYS, and prints the mapping's offsets and the metadata's window.
WINDOW_SETTING_SCRIPT = """
import json, sys
import dagster as dg
from fair_pipeline.definitions import defs
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone
from fair_pipeline.platform.tracking import MLflowTracking
from fair_pipeline.position_bias.assets import MART_KEYS, POSITION_BIAS_KEY, position_bias

home, day = sys.argv[1], sys.argv[2]
mapping = defs.resolve_asset_graph().get_partition_mapping(POSITION_BIAS_KEY, MART_KEYS[0])
result = dg.materialize([position_bias], partition_key=day, instance=dg.DagsterInstance.ephemeral(), resources={
    "warehouse": DuckDBWarehouse(path=home + "/warehouse.duckdb"), "landing": LandingZone(path=home + "/landing"),
    "mlflow": MLflowTracking(tracking_uri="sqlite:///" + home + "/mlflow.db", artifact_root=home + "/mlartifacts")})
metadata = result.asset_materializations_for_node("marts__position_bias_curves")[0].metadata
print(json.dumps({"offsets": [mapping.start_offset, mapping.end_offset], "window": metadata["window"].value,
                  "partitions": metadata["window_partitions"].value}))
"""


def test_window_length_is_one_setting_for_the_mapping_and_the_days_read(home):
    import json
    import os
    import subprocess
    import sys

    warehouse = home / "warehouse.duckdb"
    newest = _curves(warehouse)
    env = {**os.environ, "FAIR_PIPELINE_WINDOW_DAYS": "2", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", WINDOW_SETTING_SCRIPT, str(home), DAYS[-1]], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown == {"offsets": [-1, 0], "window": f"{DAYS[1]}..{DAYS[2]}", "partitions": DAYS[1:]}
    assert _window(warehouse, DAYS[-1]) == DAYS[1:]
    randomized = _query(warehouse, f"SELECT sum(impressions) AS n FROM {CURVES_TABLE} WHERE method = 'randomized' "
                                   "AND partition_date = ?::DATE", [DAYS[-1]])
    assert randomized["n"].iloc[0] == 2 * 750 * 20
    assert _materialize(warehouse, home / "landing").success  # back to the default window for DAYS[-1]
    pd.testing.assert_frame_equal(_curves(warehouse).drop(columns="partition_date"), newest.drop(columns="partition_date"))
    with pytest.raises(dg.DagsterInvalidConfigError):  # the window is not run config: the lineage could not show it
        _materialize(warehouse, home / "landing", {"window_days": 2})


def test_window_is_the_calendar_days_through_the_partition(home):
    warehouse = home / "warehouse.duckdb"
    newest = _curves(warehouse)
    seven_days = [str(START - dt.timedelta(days=6 - i)) for i in range(7)]
    assert metadata_window(_materialize(warehouse, home / "landing")) == DAYS
    assert _window(warehouse, DAYS[-1]) == [DAYS[0], DAYS[-1]]  # the stored span is the days with data

    # An older partition estimates over the days through it, in its own rows: the newest partition's stay as they were.
    result = _materialize(warehouse, home / "landing", {"chosen_method": "randomized"}, partition=DAYS[0])
    assert result.success
    assert _window(warehouse, DAYS[0], "chosen") == [DAYS[0], DAYS[0]]
    metadata = result.asset_materializations_for_node("marts__position_bias_curves")[0].metadata
    assert metadata["window_missing_partitions"].value == seven_days[:-1]
    assert metadata["window_partitions"].value == DAYS[:1] and metadata["window"].value == f"{seven_days[0]}..{DAYS[0]}"
    expected = estimate_position_bias(_impressions(warehouse, DAYS[:1]), method="randomized")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        np.testing.assert_allclose(load_chosen_position_bias(con, DAYS[0])["weight"], expected["weight"], rtol=1e-9)
        # the reader's default is the newest stored partition, not the newest written
        assert load_chosen_position_bias(con).attrs["method"] == "adjacent_pairwise"
        assert load_chosen_position_bias(con).attrs["window_end"] == DAYS[-1]
    assert _materialize(warehouse, home / "landing", partition=DAYS[1]).success
    assert _window(warehouse, DAYS[1]) == DAYS[:2]
    pd.testing.assert_frame_equal(_curves(warehouse), newest)
    counts = _query(warehouse, f"SELECT partition_date::VARCHAR AS d, count(*) AS n FROM {CURVES_TABLE} GROUP BY 1 ORDER BY 1")
    assert counts["d"].tolist() == DAYS and counts["n"].iloc[-1] == len(METHODS) * 20

    # A range of partitions in one run is refused with what to do (each partition is its own run).
    range_tags = {ASSET_PARTITION_RANGE_START_TAG: DAYS[0], ASSET_PARTITION_RANGE_END_TAG: DAYS[1]}
    failed = _materialize(warehouse, home / "landing", partition=None, tags=range_tags, raise_on_error=False)
    assert not failed.success
    assert "materialize one partition per run" in failed.get_step_failure_events()[0].step_failure_data.error.message

    # A day whose window holds no data fails with "not enough data"; it never reaches back for older days.
    failed = _materialize(warehouse, home / "landing", partition="2026-02-01", raise_on_error=False)
    assert not failed.success
    assert ("not enough data in the window 2026-01-26..2026-02-01" in
            str(failed.get_step_failure_events()[0].step_failure_data.error.message))
    pd.testing.assert_frame_equal(_curves(warehouse), newest)


def test_biased_observational_estimator_fails_the_agreement_warning_but_not_the_run(home):
    result = _materialize(home / "warehouse.duckdb", home / "landing", {"agreement_method": "naive"})
    assert result.success  # WARN, not blocking
    checks = _checks(result)
    agreement = checks[AGREEMENT_CHECK]
    assert not agreement.passed and agreement.severity == dg.AssetCheckSeverity.WARN
    assert "naive vs randomized DISAGREE" in agreement.description
    assert len(agreement.metadata["disagreeing_positions_bonferroni"].value) >= 3
    assert checks[CHOSEN_CHECK].passed
    # The default (adjacent_pairwise) agrees on the same data.
    assert _checks(_materialize(home / "warehouse.duckdb", home / "landing"))[AGREEMENT_CHECK].passed


def _marts_warehouse(path: Path, config: SimulationConfig, days: int) -> Path:
    """A warehouse holding only the two position-bias marts, built from the core simulator day by day."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA marts")
        bins, swaps = [], []
        for offset in range(days):
            day = START + dt.timedelta(days=offset)
            b, s = simulated_aggregates(config, 1, start=day)
            bins.append(b.assign(partition_date=day))
            swaps.append(s.assign(partition_date=day))
        bins_frame, swaps_frame = pd.concat(bins), pd.concat(swaps)
        con.execute("CREATE TABLE marts.position_score_bins AS SELECT * FROM bins_frame")
        con.execute("CREATE TABLE marts.position_swap_cells AS SELECT * FROM swaps_frame")
    return path


def test_missing_traffic_is_reported_not_estimable_and_fails_only_when_chosen(tmp_path):
    config = SimulationConfig(n_items=2_000, requests_per_day=800, shuffle_share=0.5, adjacent_swap_share=0.0, slots=10, seed=3)
    warehouse = _marts_warehouse(tmp_path / "w.duckdb", config, 2)
    result = _materialize(warehouse, tmp_path / "no_landing", partition=str(START + dt.timedelta(days=1)))
    assert result.success
    assert metadata_window(result) == [str(START), str(START + dt.timedelta(days=1))]
    metadata = result.asset_materializations_for_node("marts__position_bias_curves")[0].metadata
    assert list(metadata["not_estimable_methods"].value) == ["adjacent_swap"]
    assert "no 'adjacent_swap' impressions" in metadata["not_estimable_methods"].value["adjacent_swap"]
    assert "truth_available" in metadata and metadata["truth_available"].value is False
    assert not any(key.startswith("max_abs_error/") for key in metadata)
    methods = _query(warehouse, f"SELECT method, estimable, reason, partition_date::VARCHAR AS d FROM {METHODS_TABLE}")
    assert set(methods["d"]) == {str(START + dt.timedelta(days=1))}  # partition D = the newest of the 2 days
    methods = methods.set_index("method")
    assert not methods.loc["adjacent_swap", "estimable"] and "adjacent_swap traffic" in methods.loc["adjacent_swap", "reason"]
    assert methods.drop(index="adjacent_swap")["estimable"].all()
    assert "adjacent_swap" not in set(_query(warehouse, f"SELECT DISTINCT method FROM {CURVES_TABLE}")["method"])

    before = _query(warehouse, f"SELECT * FROM {CURVES_TABLE} ORDER BY method, position")
    failed = _materialize(warehouse, tmp_path / "no_landing", {"chosen_method": "adjacent_swap"},
                          partition=str(START + dt.timedelta(days=1)), raise_on_error=False)
    assert not failed.success
    message = failed.get_step_failure_events()[0].step_failure_data.error.message
    assert "the chosen method 'adjacent_swap' is not estimable" in message and "adjacent_swap traffic" in message
    pd.testing.assert_frame_equal(_query(warehouse, f"SELECT * FROM {CURVES_TABLE} ORDER BY method, position"), before)


def test_chosen_curve_with_an_unestimable_position_fails_the_blocking_check(tmp_path):
    # 30 production requests over 12 slots: the bottom slots see no click, so the chain breaks.
    config = SimulationConfig(n_items=2_000, requests_per_day=30, shuffle_share=0.5, adjacent_swap_share=0.5, slots=12, seed=5)
    warehouse = _marts_warehouse(tmp_path / "w.duckdb", config, 1)
    result = _materialize(warehouse, tmp_path, partition=str(START), raise_on_error=False)
    assert not result.success
    chosen = _checks(result)[CHOSEN_CHECK]
    assert not chosen.passed and chosen.severity == dg.AssetCheckSeverity.ERROR
    assert "not estimable" in chosen.description and chosen.metadata["unusable_positions"].value
    with duckdb.connect(str(warehouse), read_only=True) as con:
        with pytest.raises(PositionBiasInputError, match="no usable weight at position"):
            load_chosen_position_bias(con, START)


def test_chosen_curve_check_on_hand_made_curves():
    good = pd.DataFrame({"position": [1, 2, 3], "weight": [1.0, 0.6, 0.4]})
    assert chosen_curve_check(good, "x").passed
    off = chosen_curve_check(good.assign(weight=[0.9, 0.6, 0.4]), "x")
    assert not off.passed and "ŵ_1 = 0.9" in off.description
    bad = chosen_curve_check(good.assign(weight=[1.0, np.nan, -0.1]), "x")
    assert not bad.passed and bad.metadata["unusable_positions"].value == [2, 3]
    assert not chosen_curve_check(good.assign(weight=[1.0, np.inf, 0.4]), "x").passed


def test_training_window_skips_days_without_data(tmp_path):
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute("CREATE SCHEMA marts")
        con.execute("CREATE TABLE marts.position_score_bins (partition_date DATE, policy VARCHAR)")
        con.execute("CREATE TABLE marts.position_swap_cells (partition_date DATE, policy VARCHAR)")
        con.execute("INSERT INTO marts.position_score_bins VALUES ('2026-01-01', 'p'), ('2026-01-05', 'p'), ('2026-01-09', 'p')")
        con.execute("INSERT INTO marts.position_swap_cells VALUES ('2026-01-07', 'adjacent_swap')")
        window = training_window(con, 2)
        assert (str(window.first), str(window.last)) == ("2026-01-07", "2026-01-09")
        window = training_window(con, 3, end="2026-01-08")
        assert [str(d) for d in window.dates] == ["2026-01-01", "2026-01-05", "2026-01-07"]
        with pytest.raises(PositionBiasInputError, match="window_days=0"):
            training_window(con, 0)


def test_reader_without_the_table_names_the_asset(tmp_path):
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        with pytest.raises(PositionBiasInputError, match="marts.position_bias_curves holds no results yet; materialize "
                                                         "the position_bias asset"):
            load_chosen_position_bias(con)


def test_asset_is_in_the_daily_job_downstream_of_the_marts():
    job = defs.resolve_job_def("daily_pipeline")
    assert "marts__position_bias_curves" in {node.name for node in job.graph.nodes}
    graph = defs.resolve_asset_graph()
    node = graph.get(POSITION_BIAS_KEY)
    assert node.partitions_def == daily_partitions and node.group_name == "position_bias"
    assert {k.to_user_string() for k in node.parent_keys} == {"marts/position_score_bins", "marts/position_swap_cells"}
    assert {c.name for c in node.check_keys} == {CHOSEN_CHECK, AGREEMENT_CHECK}
