"""SQL model discovery: every file becomes an asset, dependencies come from ref()/source(), order is topological."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from fair_pipeline.platform import sql_models
from fair_pipeline.platform.sql_assets import build_partition, build_sql_asset


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_repository_models_are_discovered_with_their_dependencies():
    models = sql_models.discover_models()
    assert {"stg_observational_impressions", "stg_randomized_impressions", "stg_items", "daily_ctr_by_position"} <= set(models)
    order = sql_models.topological_order(models)
    for name, model in models.items():
        for ref in model.refs:
            assert order.index(ref) < order.index(name), f"{ref} must build before {name}"
    _, deps = sql_models.render_sql(models["daily_ctr_by_position"].text, models)
    assert deps == [("staging", "stg_observational_impressions"), ("staging", "stg_randomized_impressions")]
    assert sql_models.is_partitioned(models["daily_ctr_by_position"], models)
    assert not sql_models.is_partitioned(models["stg_items"], models)


def test_new_file_becomes_an_asset_without_python_changes(tmp_path):
    _write(tmp_path, "staging/a.sql", "-- config: materialized=view\nSELECT * FROM {{ source('raw', 'observational_impressions') }}")
    _write(tmp_path, "marts/b.sql", "-- Clicks per day.\nSELECT partition_date, sum(click) AS clicks FROM {{ ref('a') }}\nWHERE partition_date = $partition_date GROUP BY ALL")
    _write(tmp_path, "marts/c.sql", "-- config: partitioned=false, group=reporting\nSELECT count(*) AS n FROM {{ ref('b') }}")
    for relative, column in (("staging/a.yml", "request_id"), ("marts/b.yml", "partition_date"), ("marts/c.yml", "n")):
        description = "Clicks per day." if relative == "marts/b.yml" else "A model."
        _write(tmp_path, relative, f"description: {description}\nunique_key: [{column}]\nother_columns: more\n"
                                   f"columns:\n  - {{name: {column}, description: the key}}\n")
    models = sql_models.discover_models(tmp_path)
    assert sql_models.topological_order(models) == ["a", "b", "c"]
    assets = {m: build_sql_asset(models[m], models) for m in models}
    spec_b = next(iter(assets["b"].specs))
    assert spec_b.key.path == ["marts", "b"]
    assert {d.asset_key.path[1] for d in spec_b.deps} == {"a"}
    assert assets["b"].partitions_def is not None and assets["c"].partitions_def is None
    assert next(iter(assets["c"].specs)).group_name == "reporting"
    assert "Clicks per day." in spec_b.description


@pytest.mark.parametrize(
    "files,message",
    [
        ({"marts/x.sql": "SELECT * FROM {{ ref('nope') }}"}, "ref\\('nope'\\)"),
        ({"marts/x.sql": "SELECT * FROM {{ ref('y') }}", "marts/y.sql": "SELECT * FROM {{ ref('x') }}"}, "cycle"),
        ({"marts/x.sql": "SELECT * FROM {{ source('raw', 'observational_impressions') }}"}, "partition_date"),
        ({"marts/x.sql": "SELECT $mystery AS v"}, "mystery"),
        ({"marts/x.sql": "SELECT 1", "staging/x.sql": "SELECT 2"}, "already defined"),
        ({"marts/x.sql": "-- config: colour=blue\nSELECT 1"}, "colour"),
    ],
)
def test_bad_models_are_named(tmp_path, files, message):
    for relative, text in files.items():
        _write(tmp_path, relative, text)
    with pytest.raises(sql_models.SqlModelError, match=message):
        sql_models.discover_models(tmp_path)


def test_partition_build_replaces_exactly_one_partition_and_rejects_strays(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE SCHEMA raw; CREATE TABLE raw.observational_impressions AS SELECT DATE '2026-01-01' + CAST(i % 3 AS INTEGER) AS partition_date, i AS click FROM range(30) t(i)")
    _write(tmp_path, "marts/daily.sql", "SELECT partition_date, sum(click) AS clicks FROM {{ source('raw', 'observational_impressions') }} WHERE partition_date = $partition_date GROUP BY ALL")
    _write(tmp_path, "marts/leaky.sql", "SELECT partition_date, click FROM {{ source('raw', 'observational_impressions') }} WHERE partition_date >= $partition_date")
    models = sql_models.discover_models(tmp_path)
    sql, _ = sql_models.render_sql(models["daily"].text, models)
    for day in ("2026-01-01", "2026-01-02", "2026-01-01"):
        assert build_partition(con, models["daily"], sql, day) == 1
    assert con.execute("SELECT count(*), sum(clicks) FROM marts.daily").fetchone() == (2, sum(range(0, 30, 3)) + sum(range(1, 30, 3)))
    leaky, _ = sql_models.render_sql(models["leaky"].text, models)
    with pytest.raises(sql_models.SqlModelError, match="partition_date is not 2026-01-02"):
        build_partition(con, models["leaky"], leaky, "2026-01-02")
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'leaky'").fetchone()[0] == 0
