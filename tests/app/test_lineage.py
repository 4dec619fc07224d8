"""Every asset reads well in the UI: a stage group, a description, kinds, owners, a code version;
asset checks are declared on the asset they guard (so the UI shows them next to it)."""
from fair_pipeline.definitions import defs

GROUPS = {"ingestion", "staging", "marts", "position_bias", "eo_transform", "training", "audit", "reporting", "selection", "elicitation"}
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


def test_report_runs_after_every_other_asset():
    graph = defs.resolve_asset_graph()
    report = next(k for k in graph.get_all_asset_keys() if k.to_user_string() == "reporting/fairness_report")
    upstream = graph.upstream_key_iterator(report)
    ancestors, stack = set(), list(upstream)
    while stack:
        key = stack.pop()
        if key not in ancestors:
            ancestors.add(key)
            stack.extend(graph.get(key).parent_keys)
    assert ancestors == set(graph.get_all_asset_keys()) - {report}
