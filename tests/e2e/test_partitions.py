"""Partition-true orchestration: the mappings the lineage shows, and a backfill of older days that never moves a
registry alias (issue "Partition-true orchestration")."""
from __future__ import annotations

import dataclasses
import re
import datetime as dt
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest

from fair_pipeline.commands import main
from fair_pipeline.ingestion.catalogue_dates import delivery_on
from fair_pipeline.platform.tracking import store_client
from fair_pipeline.ingestion.simulator import SimulationConfig
from tests.landing_reads import watch

DAYS = [dt.date(2026, 3, 1) + dt.timedelta(days=k) for k in range(4)]
CONFIG = SimulationConfig(requests_per_day=300, n_items=5_000, seed=3)


def _key(text: str) -> dg.AssetKey:
    return dg.AssetKey(text.split("/"))


def test_partition_mappings_declare_the_training_and_evaluation_windows():
    from fair_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()

    def offsets(child: str, parent: str):
        mapping = graph.get_partition_mapping(_key(child), _key(parent))
        if isinstance(mapping, dg.TimeWindowPartitionMapping):
            return mapping.start_offset, mapping.end_offset
        return type(mapping).__name__

    # Trained stages: partition D reads the 7 days before D; position bias may read D itself.
    assert offsets("marts/eo_transforms", "marts/eo_score_click_counts") == (-7, -1)
    assert offsets("marts/ranker_candidates", "staging/stg_observational_impressions") == (-7, -1)
    assert offsets("marts/ranker_candidates", "staging/stg_randomized_impressions") == (-7, -1)
    assert offsets("marts/position_bias_curves", "marts/position_score_bins") == (-6, 0)
    # The audit and selection of D evaluate day D with the models of D.
    for child, parent in [("marts/fairness_audit", "staging/stg_observational_impressions"),
                          ("marts/fairness_audit", "marts/eo_transforms"),
                          ("marts/fairness_audit", "marts/ranker_candidates"),
                          ("marts/model_selection", "marts/fairness_audit"),
                          ("marts/eo_transforms", "marts/position_bias_curves")]:
        assert offsets(child, parent) in ("IdentityPartitionMapping", "TimeWindowPartitionMapping", (0, 0)), (child, parent)
    # Upstream partitions of one day, as Dagster computes them for the lineage view.
    def parents(child: str, parent: str, day: str) -> list[str]:
        mapping = graph.get_partition_mapping(_key(child), _key(parent))
        partitions = graph.get(_key(child)).partitions_def
        subset = partitions.subset_with_partition_keys([day])
        result = mapping.get_upstream_mapped_partitions_result_for_partitions(
            subset, partitions, graph.get(_key(parent)).partitions_def)
        return sorted(result.partitions_subset.get_partition_keys())

    assert parents("marts/eo_transforms", "marts/eo_score_click_counts", "2026-03-10") == [
        f"2026-03-0{d}" for d in range(3, 10)]
    assert parents("marts/fairness_audit", "marts/ranker_candidates", "2026-03-10") == ["2026-03-10"]
    # Every trained stage is partitioned; the static benchmarks are not, and no daily job contains them.
    for key in ["marts/position_bias_curves", "marts/eo_transforms", "marts/ranker_candidates", "marts/fairness_audit",
                "marts/model_selection", "reporting/fairness_report"]:
        assert graph.get(_key(key)).partitions_def is not None, key
    for job in ("daily_pipeline", "ingest_logs", "train_and_audit"):
        selected = defs.resolve_job_def(job).asset_layer.selected_asset_keys
        assert _key("marts/benchmark_models") not in selected, job


def _champion(home: Path):
    client = store_client(f"sqlite:///{home / 'mlflow.db'}")
    try:
        version = client.get_model_version_by_alias("fair-ranker", "champion")
    except Exception:  # noqa: BLE001 (no alias yet)
        return None
    return version.version, version.tags.get("fair_pipeline.partition")


def _versions(home: Path, name: str) -> list:
    client = store_client(f"sqlite:///{home / 'mlflow.db'}")
    return client.search_model_versions(f"name = '{name}'")


def _partitions(home: Path, table: str) -> list[str]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return [str(r[0]) for r in con.execute(f"SELECT DISTINCT partition_date FROM {table} ORDER BY 1").fetchall()]


def test_landing_sensor_warns_about_a_missing_day(fp_home: Path):
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
    from fair_pipeline.schedules import landing_files_sensor

    yesterday = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)
    result = landing_files_sensor(dg.build_sensor_context())
    assert isinstance(result, dg.SkipReason)
    assert f"no landing files for partition {yesterday} from observational, randomized" in result.skip_message
    simulate_to_landing(CONFIG, fp_home / "landing", yesterday, 1)
    assert "present for every source" in landing_files_sensor(dg.build_sensor_context()).skip_message


# Columns that name a run or time one, not a finding: they differ between two materializations of the same day.
RUN_SPECIFIC = ("run_id", "run", "_at", "seconds", "cpu", "version", "uri", "url", "path", "time")
NOVEMBER = [dt.date(2026, 11, 23) + dt.timedelta(days=k) for k in range(4)]


def _findings(home: Path, day: dt.date) -> dict[str, pd.DataFrame]:
    """Every marts table's rows of partition `day`, without the run-specific columns, in a stable order."""
    found = {}
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        tables = con.execute("SELECT table_name FROM information_schema.columns WHERE table_schema = 'marts' "
                             "AND column_name = 'partition_date' ORDER BY 1").fetchall()
        for (table,) in tables:
            frame = con.execute(f'SELECT * FROM marts."{table}" WHERE partition_date = $d', {"d": day}).df()
            keep = [c for c in frame.columns if not any(part in c.lower() for part in RUN_SPECIFIC)]
            frame = frame[keep]
            found[table] = frame.sort_values(keep).reset_index(drop=True) if len(frame) else frame
    return found


def _without_versions(findings: list[dict]) -> list[dict]:
    """Findings without what a re-run legitimately changes: the registry's version numbers."""
    return [{**f, "text": re.sub(r"version \d+", "version N", f["text"])} for f in findings]


def _report(home: Path, day: dt.date) -> dict:
    """The day's findings.json without the trend section (it covers every audited day <= D, so it may grow)."""
    import json

    data = json.loads((home / "reports" / str(day) / "findings.json").read_text())
    return {"findings": [f for f in data["findings"] if not f["section"].startswith("Audit trend")],
            "metrics": {k: v for k, v in data["metrics"].items() if not k.startswith("audit_trend.")}}


def _nothing_new_then_one_changed_day(home: Path, capsys) -> None:
    """A run with nothing new materializes nothing, opens no landing file (their content hashes are cached) and says
    so in one line; the ingestion recorded each day's landing fingerprint as Dagster's data version, a rewritten day is the one to ingest again, and once it is, the newest
    day (whose window holds it) is no longer up to date."""
    from fair_pipeline import runner
    from fair_pipeline.ingestion.assets import FINGERPRINTS
    from fair_pipeline.ingestion.fingerprints import combined, source_day_fingerprint

    instance = runner.current_instance()
    runs = len(instance.get_run_records())
    capsys.readouterr()
    assert main(["run", "--no-simulate"]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("[fair-pipeline] nothing new:"), said
    # That run hashed again only files last hashed within 2 s of their writing (hash_cache.RACY_NS); the next one
    # finds every hash in the cache and opens no landing file.
    with watch(home / "landing") as reads:
        assert main(["run", "--no-simulate"]) == 0
    assert reads.files == set()
    assert "nothing new:" in capsys.readouterr().out
    assert len(instance.get_run_records()) == runs
    # Old days ingested again (as `dg launch` or a UI backfill does; the unchanged catalogue is materialized with
    # them): outside the newest day's window and the catalogue's fingerprint the same, so the newest day stays up to
    # date and the next run finds nothing new.
    assert runner.ingest_range(str(DAYS[0]), str(DAYS[1])).success
    assert runner.landing_changes([str(d) for d in DAYS[:2] + NOVEMBER]) == ([], False)
    assert runner.up_to_date(str(NOVEMBER[-1]))
    changed = NOVEMBER[1]
    key = dg.AssetKey(["raw", "observational_impressions"])
    record = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=[str(changed)]),
                                             limit=1).records[0].asset_materialization
    # A run that loaded a range of days records each day's fingerprint, and their combination as the data version.
    recorded = record.metadata[FINGERPRINTS].value
    assert record.tags["dagster/data_version"] == combined(recorded)
    assert recorded[str(changed)] == source_day_fingerprint(home / "landing", "observational", changed)
    path = next((home / "landing" / "observational" / f"date={changed}").glob("*.parquet"))
    rows = pd.read_parquet(path)
    rows.loc[0, "click"] = 1 - rows.loc[0, "click"]
    rows.to_parquet(path, index=False)
    assert source_day_fingerprint(home / "landing", "observational", changed) != recorded[str(changed)]
    days = [str(d) for d in NOVEMBER]
    assert runner.landing_changes(days) == ([str(changed)], False) and runner.up_to_date(str(NOVEMBER[-1]))
    trained = ["marts/ranker_candidates", "marts/eo_transforms", "marts/position_bias_curves"]
    assert {key: _staleness(instance, key, NOVEMBER[-1])[0] for key in trained} == dict.fromkeys(trained, "FRESH")
    assert runner.ingest_range(str(changed), str(changed)).success
    assert runner.landing_changes(days) == ([], False) and not runner.up_to_date(str(NOVEMBER[-1]))
    # What the UI shows: every stage of the newest day, whose window holds the re-ingested day, is stale because
    # of that day; a partition whose window does not hold it stays fresh.
    for key in trained:
        status, causes = _staleness(instance, key, NOVEMBER[-1])
        assert status == "STALE" and any(str(changed) in cause for cause in causes), (key, status, causes)
    assert _staleness(instance, "marts/ranker_candidates", DAYS[1])[0] == "FRESH"


def _staleness(instance: dg.DagsterInstance, key: str, day: dt.date) -> tuple[str, list[str]]:
    """Dagster's stale status of an asset partition and its root causes, as the UI computes them."""
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._core.loader import LoadingContextForTest

    from fair_pipeline.definitions import defs

    resolver = CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))
    causes = resolver.get_stale_root_causes(_key(key), str(day))
    return (resolver.get_status(_key(key), str(day)).value,
            [f"{cause.asset_key.to_user_string()}[{cause.partition_key}] {cause.reason} "
             f"{cause.dependency_asset_key.to_user_string() if cause.dependency else ''}[{cause.dependency_partition_key}]"
             for cause in causes])


def _benchmark_versions(home: Path) -> dict[str, list]:
    return {name: sorted(v.version for v in _versions(home, name)) for name in ("fair-benchmark-adult", "fair-benchmark-compas")}


@pytest.mark.slow
@pytest.mark.timeout(2400)  # five Dagster runs of every stage; slow on a loaded 2-core machine
def test_backfill_of_older_days_moves_no_alias_and_a_rerun_of_the_newest_day_has_identical_findings(fp_home: Path, capsys):
    """The README's sequence on one home: train the newest day (the static benchmarks registered, as after every
    first run); simulate and backfill days months older with another simulation config: they get their own
    partitions, and no registry alias, benchmark version or reports/latest moves; re-run the newest day: its window,
    its truth and every finding stay the same (1e-12). Then promotion of an older partition is explicit, and a
    backfill of days without landing files stops before any run."""
    from fair_pipeline import runner
    from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
    from fair_pipeline.audit.cell_audit import CELL_TABLES
    from fair_pipeline.audit.exposure_attributes import TABLE as EXPOSURE_CELLS

    simulate_to_landing(CONFIG, fp_home / "landing", NOVEMBER[0], len(NOVEMBER))
    runner.ensure_dagster_home()
    benchmarks = runner.run_benchmarks()
    assert benchmarks.success, runner.failure_summary(benchmarks)
    assert runner.ingest_range(str(NOVEMBER[0]), str(NOVEMBER[-1])).success
    first = runner.train_and_audit(str(NOVEMBER[-1]))
    assert first.success, runner.failure_summary(first)
    before, report_before = _findings(fp_home, NOVEMBER[-1]), _report(fp_home, NOVEMBER[-1])
    # The audits by protected attribute (cells) are filled only when FAIR_PIPELINE_GROUP_COLUMNS names some.
    by_cells = {EXPOSURE_CELLS} | {name for name, _ in CELL_TABLES.values()}
    empty = [name for name, frame in before.items() if not len(frame) and name not in by_cells]
    assert len(before) >= 5 and not empty, empty
    champion = _champion(fp_home)
    assert champion is not None and champion[1] == str(NOVEMBER[-1])
    candidate_before = store_client(f"sqlite:///{fp_home / 'mlflow.db'}").get_model_version_by_alias(
        "fair-ranker", "candidate").version
    benchmark_versions = _benchmark_versions(fp_home)
    assert all(benchmark_versions.values()), benchmark_versions

    # A backfill of older days: their own partitions (the first has no earlier day to train on), no alias moves,
    # no benchmark registered, reports/latest stays.
    # Another seed: another catalogue, delivered for DAYS[0]; then a changed catalogue delivered for DAYS[1].
    older = dataclasses.replace(CONFIG, requests_per_day=200, seed=4)
    simulate_to_landing(older, fp_home / "landing", DAYS[0], 2)
    march = pd.read_parquet(delivery_on(fp_home / "landing", DAYS[0]).files[0])
    # It also delivers a feature the other catalogues lack: the features of each day are its own catalogue's.
    changed = march.assign(group_id=march["group_id"].iloc[::-1].to_numpy(), f0=-march["f0"], f_new=march["f0"] / 3)
    (fp_home / "landing" / "items" / f"date={DAYS[1]}").mkdir()
    changed.to_parquet(fp_home / "landing" / "items" / f"date={DAYS[1]}" / "items.parquet", index=False)
    capsys.readouterr()
    assert main(["backfill", "--start", str(DAYS[0]), "--end", str(DAYS[1])]) == 0
    out = capsys.readouterr().out
    assert f"partition {DAYS[0]}: not enough data to train on in its window" in out and "registry aliases move only" in out
    assert _champion(fp_home) == champion
    assert store_client(f"sqlite:///{fp_home / 'mlflow.db'}").get_model_version_by_alias(
        "fair-ranker", "candidate").version == candidate_before
    assert _benchmark_versions(fp_home) == benchmark_versions
    days = [str(DAYS[1]), str(NOVEMBER[-1])]
    for table in ("marts.fairness_audit_outputs", "marts.model_ranking", "marts.ranker_candidates",
                  "marts.eo_transforms", "marts.position_bias_curves"):
        assert _partitions(fp_home, table) == days, table
    tagged = {v.tags.get("fair_pipeline.partition") for v in _versions(fp_home, "fair-ranker") if "selection_run" in v.tags}
    assert tagged == set(days)
    assert (fp_home / "reports" / "latest").resolve().name == str(NOVEMBER[-1])
    assert sorted(p.name for p in (fp_home / "reports").iterdir() if p.name[0].isdigit()) == days

    # The newest day again: the older days are outside its window, so nothing it found changes.
    again = runner.train_and_audit(str(NOVEMBER[-1]))
    assert again.success, runner.failure_summary(again)
    after = _findings(fp_home, NOVEMBER[-1])
    assert after.keys() == before.keys()
    for table, frame in before.items():
        pd.testing.assert_frame_equal(after[table], frame, check_exact=False, rtol=1e-12, atol=1e-12, obj=table)  # df ~1e5: relative
    window = after["eo_transforms"][["window_start", "window_end"]].drop_duplicates()
    assert [str(pd.Timestamp(x).date()) for x in window.iloc[0]] == [str(NOVEMBER[0]), str(NOVEMBER[-2])]
    with duckdb.connect(str(fp_home / "warehouse.duckdb"), read_only=True) as con:
        delivered = con.execute("SELECT DISTINCT catalogue_date FROM raw.items ORDER BY 1").fetchall()
    assert [str(d) for (d,) in delivered] == [str(DAYS[0]), str(DAYS[1]), str(NOVEMBER[0])]
    # Every section of the day's report but the trend (which covers every audited day <= D) says the same.
    report_after = _report(fp_home, NOVEMBER[-1])
    # The re-run registered the same candidate again: only the registry's version number may differ.
    assert _without_versions(report_after["findings"]) == _without_versions(report_before["findings"])
    assert report_after["metrics"].keys() == report_before["metrics"].keys()
    for key, value in report_before["metrics"].items():
        assert report_after["metrics"][key] == pytest.approx(value, rel=0, abs=1e-12, nan_ok=True), key
    _nothing_new_then_one_changed_day(fp_home, capsys)

    # Promotion: an older partition is refused without --force (champion unchanged), then rolled back with it.
    champion = _champion(fp_home)
    assert champion[1] == str(NOVEMBER[-1])
    capsys.readouterr()
    assert main(["promote", "--partition", str(DAYS[1])]) == 2
    assert "older than the newest partition with data" in capsys.readouterr().out
    assert _champion(fp_home) == champion
    assert main(["promote", "--partition", str(DAYS[1]), "--force"]) == 0
    assert _champion(fp_home)[1] == str(DAYS[1])
    assert main(["promote", "--partition", str(NOVEMBER[-1])]) == 0
    assert _champion(fp_home)[1] == str(NOVEMBER[-1])

    # A backfill of days without landing files stops before any run, with the cause in one line.
    versions = len(_versions(fp_home, "fair-ranker"))
    capsys.readouterr()
    assert main(["backfill", "--start", "2026-02-01", "--end", "2026-02-02"]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("[fair-pipeline] error: no landing files for partition 2026-02-01")
    assert len(_versions(fp_home, "fair-ranker")) == versions
