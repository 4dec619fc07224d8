"""The main job end to end: `fair-pipeline run` simulates two small days, ingests both and trains, audits and
reports the partitions that have an earlier day to train on (here the second), plus the static benchmarks once,
in a temporary FAIR_PIPELINE_HOME.

200 production requests a day over 50 slots: enough that the chosen position-bias curve (adjacent_pairwise,
truncated at 30) has clicks at every position it needs and its blocking check passes (40 requests a day over
20 slots leave position 20 without a click, which rightly fails the run)."""
from __future__ import annotations

import re

import dagster as dg
import duckdb

from fair_pipeline.commands import main
from fair_pipeline.definitions import defs
from fair_pipeline.platform import settings
from fair_pipeline.platform.tracking import FAIR_RANKER, TAG_MODEL_PARTITION, MLflowTracking
from fair_pipeline.position_bias.assets import POSITION_BIAS_KEY
from fair_pipeline.schedules import DAILY_STAGES, LOG_TABLES


def test_run_ingests_every_partition_and_trains_those_with_earlier_days(fp_home, capsys):
    # --benchmarks: the static benchmark models too, so every unpartitioned asset is materialized
    code = main(["run", "--start", "2026-01-01", "--days", "2", "--requests-per-day", "200", "--items", "2000",
                 "--benchmarks"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "fairness report:" in out and re.search(r"open the UIs: +fair-pipeline (--home \S+ )?ui ", out)
    instance = dg.DagsterInstance.get()
    graph = defs.resolve_asset_graph()
    log_tables, daily_stages = LOG_TABLES.resolve(graph), DAILY_STAGES.resolve(graph)
    assert daily_stages and log_tables and not log_tables & daily_stages
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.partitions_def is None:
            assert instance.get_latest_materialization_event(key) is not None, key
        elif key in log_tables:
            done = instance.get_materialized_partitions(key)
            assert {"2026-01-01", "2026-01-02"} <= done, (key, done)
        else:  # partition D trains on the days before D: 2026-01-01 has none
            assert key in daily_stages
            assert instance.get_materialized_partitions(key) == {"2026-01-02"}, key
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        volume = con.execute("SELECT CAST(partition_date AS VARCHAR), source, accepted_rows FROM marts.daily_volume ORDER BY 1, 2").fetchall()
    assert volume == [
        ("2026-01-01", "observational", 200 * 50), ("2026-01-01", "randomized", 80 * 50),
        ("2026-01-02", "observational", 200 * 50), ("2026-01-02", "randomized", 80 * 50),
    ]
    # Model selection of the newest partition moved the registry alias: fair-ranker @champion is its top-ranked
    # ranking model (a decision-rule family may rank above it; fair-ranker registers rankers + EO transforms).
    champion = MLflowTracking().champion(FAIR_RANKER)
    assert champion is not None and champion.tags[TAG_MODEL_PARTITION] == "2026-01-02"
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        ranking = con.execute("SELECT rank, model, family, champion_version FROM marts.model_ranking "
                              "WHERE partition_date = '2026-01-02' AND estimable ORDER BY rank").df()
    rankers = ranking[ranking["family"].isin(["eo_transform", "mi_penalty"])]
    assert (rankers.iloc[0]["model"], rankers.iloc[0]["champion_version"]) == (champion.tags["candidate"],
                                                                               str(champion.version))
    assert ranking["champion_version"].notna().sum() == 1
    benchmark_versions = _benchmark_versions()
    assert benchmark_versions and all(benchmark_versions.values())
    # Running again changes nothing: partitions are replaced, not appended.
    assert main(["run", "--no-simulate"]) == 0
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM raw.observational_impressions").fetchone()[0] == 2 * 200 * 50
        assert con.execute("SELECT partition_date::VARCHAR, count(*) FROM marts.model_ranking GROUP BY 1").fetchall() == [
            ("2026-01-02", len(con.execute("SELECT * FROM marts.model_ranking").fetchall()))]
    # ... and the static benchmarks are not re-run or re-registered (nor asked for)
    assert _benchmark_versions() == benchmark_versions


def _benchmark_versions() -> dict[str, int]:
    from fair_pipeline.platform.tracking import benchmark_model_name
    from fair_pipeline.training.reference import fits as bm

    client = MLflowTracking().client()
    return {d: len(client.search_model_versions(f"name = '{benchmark_model_name(d)}'")) for d in bm.BENCHMARKS}


def test_open_bandit_sample_is_ingested_into_seven_partitions(fp_home):
    assert main(["import-open-bandit"]) == 0
    assert main(["run", "--no-simulate"]) == 0
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        rows = con.execute(
            "SELECT source, count(DISTINCT partition_date), sum(accepted_rows), sum(rejected_rows) FROM marts.daily_volume GROUP BY 1 ORDER BY 1"
        ).fetchall()
        extras = con.execute("SELECT count(*) FROM raw.observational_extras").fetchone()[0]
    assert rows == [("observational", 7, 10_000, 0), ("randomized", 7, 10_000, 0)]
    assert extras == 10_000
    # Position bias over the whole week: the randomized estimate with honest, wide intervals (38 clicks over
    # 3 slots); no adjacent-swap traffic, so that estimator is reported as not estimable instead of failing.
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        randomized = con.execute(
            "SELECT position, weight, ci_low, ci_high, impressions, clicks FROM marts.position_bias_curves"
            " WHERE method = 'randomized' AND partition_date = '2019-11-30' ORDER BY position"
        ).df()
        swap = con.execute("SELECT estimable, reason FROM marts.position_bias_methods WHERE method = 'adjacent_swap' "
                           "AND partition_date = '2019-11-30'").fetchone()
        trained = con.execute("SELECT DISTINCT partition_date::VARCHAR FROM marts.position_bias_curves ORDER BY 1").fetchall()
    assert trained == [("2019-11-30",)]  # `run` trains and audits the newest partition
    assert randomized["position"].tolist() == [1, 2, 3] and randomized["impressions"].sum() == 10_000
    assert randomized["clicks"].sum() == 38
    assert ((randomized["ci_high"] / randomized["ci_low"]).iloc[1:] > 4).all()
    assert ((randomized["ci_low"].iloc[1:] < 1) & (randomized["ci_high"].iloc[1:] > 1)).all()
    assert swap[0] is False and "no 'adjacent_swap' impressions" in swap[1]
    event = dg.DagsterInstance.get().get_latest_materialization_event(POSITION_BIAS_KEY).asset_materialization
    assert event.partition == "2019-11-30"
    metadata = event.metadata
    assert "| randomized" in metadata["all_curves"].value and metadata["window_partitions"].value[0] == "2019-11-24"
    assert list(metadata["not_estimable_methods"].value) == ["adjacent_swap"]
