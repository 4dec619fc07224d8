"""The main job end to end: `fair-pipeline run` simulates two small days and materializes the whole
current graph for both partitions in a temporary FAIR_PIPELINE_HOME."""
from __future__ import annotations

import dagster as dg
import duckdb

from fair_pipeline import cli, settings
from fair_pipeline.definitions import defs


def test_run_materializes_every_asset_for_every_partition(fp_home, capsys):
    code = cli.main(["run", "--start", "2026-01-01", "--days", "2", "--requests-per-day", "40", "--items", "2000", "--slots", "20"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "warehouse (DuckDB)" in out and "fair-pipeline ui" in out
    instance = dg.DagsterInstance.get()
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.partitions_def is None:
            assert instance.get_latest_materialization_event(key) is not None, key
        else:
            done = instance.get_materialized_partitions(key)
            assert {"2026-01-01", "2026-01-02"} <= done, (key, done)
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        volume = con.execute("SELECT CAST(partition_date AS VARCHAR), source, accepted_rows FROM marts.daily_volume ORDER BY 1, 2").fetchall()
    assert volume == [
        ("2026-01-01", "observational", 40 * 20), ("2026-01-01", "randomized", 16 * 20),
        ("2026-01-02", "observational", 40 * 20), ("2026-01-02", "randomized", 16 * 20),
    ]
    # Running again changes nothing: partitions are replaced, not appended.
    assert cli.main(["run", "--no-simulate"]) == 0
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM raw.observational_impressions").fetchone()[0] == 2 * 40 * 20


def test_open_bandit_sample_is_ingested_into_seven_partitions(fp_home):
    assert cli.main(["import-open-bandit"]) == 0
    assert cli.main(["run", "--no-simulate"]) == 0
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        rows = con.execute(
            "SELECT source, count(DISTINCT partition_date), sum(accepted_rows), sum(rejected_rows) FROM marts.daily_volume GROUP BY 1 ORDER BY 1"
        ).fetchall()
        extras = con.execute("SELECT count(*) FROM raw.observational_extras").fetchone()[0]
    assert rows == [("observational", 7, 10_000, 0), ("randomized", 7, 10_000, 0)]
    assert extras == 10_000
