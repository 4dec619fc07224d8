"""Every asset reads well in the UI: a stage group, a description, kinds, owners, a code version;
asset checks are declared on the asset they guard (so the UI shows them next to it)."""
from fair_pipeline.definitions import defs

import dagster as dg

GROUPS = {"ingestion", "staging", "marts", "position_bias", "eo_transform", "training", "audit", "reporting", "selection",
          "elicitation", "benchmarks"}
KINDS = {"duckdb", "mlflow", "python", "sql", "parquet", "view", "table", "html"}


def test_every_asset_is_documented_and_grouped():
    specs = list(defs.resolve_all_asset_specs())
    assert len(specs) >= 10
    for spec in specs:
        name = spec.key.to_user_string()
        assert spec.group_name in GROUPS, f"{name}: group {spec.group_name!r}"
        assert spec.description and len(spec.description) > 30, f"{name}: description"
        assert spec.kinds and spec.kinds <= KINDS and spec.kinds & {"duckdb", "mlflow", "python"}, f"{name}: kinds {spec.kinds}"
        assert spec.owners, f"{name}: owners"
        assert spec.code_version, f"{name}: code_version"


def test_asset_checks_sit_on_the_assets_they_guard():
    graph = defs.resolve_asset_graph()
    checks = list(graph.asset_check_keys)
    assert any(c.name == "rejected_share_below_threshold" and c.asset_key.to_user_string() == "raw/observational_impressions" for c in checks)
    for check in checks:
        assets_def = graph.assets_def_for_key(check.asset_key)
        assert check in assets_def.check_keys, f"{check} is not declared with {check.asset_key.to_user_string()}"


def _ancestors(graph, key) -> set:
    ancestors, stack = set(), list(graph.upstream_key_iterator(key))
    while stack:
        parent = stack.pop()
        if parent not in ancestors:
            ancestors.add(parent)
            stack.extend(graph.get(parent).parent_keys)
    return ancestors


def test_report_runs_after_every_other_daily_asset():
    graph = defs.resolve_asset_graph()
    report = next(k for k in graph.get_all_asset_keys() if k.to_user_string() == "reporting/fairness_report")
    benchmarks = {k for k in graph.get_all_asset_keys() if graph.get(k).group_name == "benchmarks"}
    # The static benchmark models have their own job: never an input of a daily report (nor of anything else).
    assert {k.to_user_string() for k in benchmarks} == {"marts/benchmark_models"}
    assert _ancestors(graph, report) == set(graph.get_all_asset_keys()) - {report} - benchmarks
    assert not any(graph.get(k).child_keys for k in benchmarks)


def _upstream_days(graph, child: str, parent: str, day: str) -> list[str]:
    """The parent partitions that partition `day` of `child` reads, through the declared partition mapping."""
    child_key, parent_key = dg.AssetKey(child.split("/")), dg.AssetKey(parent.split("/"))
    child_def, parent_def = graph.get(child_key).partitions_def, graph.get(parent_key).partitions_def
    mapping = graph.get_partition_mapping(child_key, parent_key)
    subset = child_def.empty_subset().with_partition_keys([day])
    result = mapping.get_upstream_mapped_partitions_result_for_partitions(subset, child_def, parent_def)
    return sorted(result.partitions_subset.get_partition_keys())


def test_partition_mappings_read_the_window_before_or_through_the_partition():
    graph = defs.resolve_asset_graph()
    week_before = [f"2026-01-{d:02d}" for d in range(1, 8)]
    # trained stages: partition D reads D-7..D-1 (day D is what its audit evaluates)
    assert _upstream_days(graph, "marts/eo_transforms", "marts/eo_score_click_counts", "2026-01-08") == week_before
    for staging in ("staging/stg_observational_impressions", "staging/stg_randomized_impressions"):
        assert _upstream_days(graph, "marts/ranker_candidates", staging, "2026-01-08") == week_before
    # position bias (a nuisance curve of positions alone) may use day D itself: D-6..D
    for mart in ("marts/position_score_bins", "marts/position_swap_cells"):
        assert _upstream_days(graph, "marts/position_bias_curves", mart, "2026-01-08") == [*week_before[1:], "2026-01-08"]
    # the audited stages of D read the models of partition D
    for child, parent in (("marts/fairness_audit", "marts/eo_transforms"), ("marts/model_selection", "marts/fairness_audit"),
                          ("marts/model_selection", "marts/ranker_candidates")):
        assert _upstream_days(graph, child, parent, "2026-01-08") == ["2026-01-08"]
