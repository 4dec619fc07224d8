"""Group labels are data: `fair-pipeline run` completes on a home whose labels are `Women's`, `age 65+` and a
2,000-character label full of HTML and quotes; every label reaches the warehouse and the report as written (the
report escapes them) and MLflow names carry stable keys with the label table beside them.

The home is a simulated one made to look like a team's own logs: the simulator's two groups are relabelled in the
impressions and the catalogue, a third group is split off, and the ground truth (which real logs lack) is removed."""
from __future__ import annotations

import datetime as dt
import json
import zlib

import duckdb
import mlflow
import pyarrow as pa
import pyarrow.parquet as pq

from fair_pipeline.commands import main
from fair_pipeline.ingestion.simulated_landing import simulate_to_landing
from fair_pipeline.ingestion.simulator import SimulationConfig
from fair_pipeline.platform import settings
from fair_pipeline.platform.metric_keys import group_key

LONG = "L" * 1_980 + "<b>&amp;'\"+ 👩‍🦳 نساء</b>"
LABELS = {"0": "Women's", "1": "age 65+"}


def _label(group: str | None, item: str) -> str | None:
    if group is None:
        return None
    return LONG if group == "1" and zlib.crc32(item.encode()) % 3 == 0 else LABELS[group]


def _relabel(landing):
    for path in landing.rglob("*.parquet"):
        table = pq.read_table(path)
        if "group_id" not in table.column_names:
            continue
        labels = [_label(g, i) for g, i in zip(table["group_id"].to_pylist(), table["item_id"].to_pylist())]
        pq.write_table(table.set_column(table.column_names.index("group_id"), "group_id", pa.array(labels, pa.string())),
                       path)


def test_run_completes_on_labels_with_quotes_plus_html_and_2000_characters(fp_home, capsys):
    import shutil

    landing = fp_home / "landing"
    config = SimulationConfig(n_items=2_000, requests_per_day=200)
    simulate_to_landing(config, landing, dt.date(2026, 1, 1), 2)
    shutil.rmtree(landing / "_truth")
    _relabel(landing)
    code = main(["run", "--no-simulate", "--start", "2026-01-01", "--days", "2"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    expected = {LONG, *LABELS.values()}
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        stored = {r[0] for r in con.execute("SELECT DISTINCT group_id FROM raw.observational_impressions").fetchall()}
    assert stored == expected
    html = (settings.reports_dir() / "latest" / "fairness_report.html").read_text()
    assert "Women&#x27;s" in html and "age 65+" in html
    assert "<b>&amp;'" not in html and "&lt;b&gt;&amp;amp;" in html  # the label's HTML is text, escaped once
    client = mlflow.MlflowClient(settings.mlflow_tracking_uri())
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    eo = [r for r in runs if any(k.startswith("n_positives/") for k in r.data.metrics)]
    assert eo
    keys = {k.split("/", 1)[1] for k in eo[0].data.metrics if k.startswith("n_positives/")}
    assert keys == {group_key(label) for label in expected}
    path = client.download_artifacts(eo[0].info.run_id, "tables/group_labels.json", str(fp_home))
    table = json.loads(open(path, encoding="utf-8").read())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert {r["key"]: r["label"] for r in rows} == {group_key(x): x for x in expected}
