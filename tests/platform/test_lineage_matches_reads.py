"""The lineage Dagster shows is the one the code reads, for any configured window length.

For each window length (FAIR_PIPELINE_WINDOW_DAYS, read when the definitions are imported, so each length is
loaded in a process of its own), every time-window dependency of the asset graph is asked, through Dagster's own
API, which upstream partitions several partitions read (what the UI's lineage view draws); those days must be the
calendar window `platform.windows` computes for that partition and length (`window_before`: trained stages,
`window_through`: position bias), on a warehouse with data on every day, and no wider.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAYS = ["2024-03-01", "2026-01-01", "2026-03-01", "2026-11-26"]  # past days: the partitions end today

PROBE = r"""
import datetime as dt, json, sys
import dagster as dg
import duckdb
from fair_pipeline.definitions import defs
from fair_pipeline.platform.settings import window_days
from fair_pipeline.platform.windows import window_before, window_through

days = json.loads(sys.argv[1])
con = duckdb.connect()
con.execute("CREATE SCHEMA s; CREATE TABLE s.t (partition_date DATE)")
con.execute("INSERT INTO s.t SELECT CAST(d AS DATE) FROM range(DATE '2024-01-01', DATE '2027-01-01', INTERVAL 1 DAY) r(d)")

def span(window):
    first, last = window.calendar
    return [str(first + dt.timedelta(days=i)) for i in range((last - first).days + 1)]

graph = defs.resolve_asset_graph()
found = []
for child in sorted(graph.materializable_asset_keys, key=lambda k: k.to_user_string()):
    partitions = graph.get(child).partitions_def
    if partitions is None:
        continue
    for parent in sorted(graph.get(child).parent_keys, key=lambda k: k.to_user_string()):
        mapping = graph.get_partition_mapping(child, parent)
        if not isinstance(mapping, dg.TimeWindowPartitionMapping) or (mapping.start_offset, mapping.end_offset) == (0, 0):
            continue
        for day in days:
            result = mapping.get_upstream_mapped_partitions_result_for_partitions(
                partitions.subset_with_partition_keys([day]), partitions, graph.get(parent).partitions_def)
            found.append({"child": child.to_user_string(), "parent": parent.to_user_string(), "day": day,
                          "lineage": sorted(result.partitions_subset.get_partition_keys()),
                          "before": span(window_before(con, "s.t", window_days(), day)),
                          "through": span(window_through(con, "s.t", window_days(), day))})
print(json.dumps({"window_days": window_days(), "found": found}))
"""


def _probe(window: int | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "FAIR_PIPELINE_WINDOW_DAYS"}
    env["FAIR_PIPELINE_START_DATE"] = "2024-01-01"  # else the partitions start at the first landed day, if any
    if window is not None:
        env["FAIR_PIPELINE_WINDOW_DAYS"] = str(window)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(DAYS)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("window", [None, 3, 12])
def test_the_lineage_of_every_windowed_dependency_is_the_window_the_code_reads(window):
    probed = _probe(window)
    k = probed["window_days"]
    assert k == (window or 7)
    found = probed["found"]
    # The trained stages read the k days before D; position bias the k days through D.
    before = {(f["child"], f["parent"]) for f in found if f["lineage"] == f["before"]}
    through = {(f["child"], f["parent"]) for f in found if f["lineage"] == f["through"]}
    assert ("marts/eo_transforms", "marts/eo_score_click_counts") in before
    assert ("marts/ranker_candidates", "staging/stg_observational_impressions") in before
    assert ("marts/ranker_candidates", "staging/stg_randomized_impressions") in before
    assert any(child == "marts/position_bias_curves" for child, _ in through)
    for f in found:
        assert f["lineage"] in (f["before"], f["through"]), f
        assert len(f["lineage"]) == k, f
        day = f["day"]
        if f["lineage"] == f["before"]:
            assert day not in f["lineage"] and f["lineage"][-1] < day, f  # held out: D is evaluated, not trained on
        else:
            assert f["lineage"][-1] == day, f
