"""The report names the days without data inside partition D's windows in its body, and its descriptive sections
(data volume, click-through rate) describe D's window only: days ingested later for other months change nothing."""
from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from fair_pipeline.reporting import ReportInputs, build_report
from fair_pipeline.reporting import sections as registry

D = dt.date(2026, 11, 26)
WINDOW = [D - dt.timedelta(days=k) for k in range(8)]  # D-7..D


def _warehouse(path, days):
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA marts; CREATE SCHEMA staging")
    con.execute("CREATE TABLE marts.daily_volume (partition_date DATE, source VARCHAR, accepted_rows BIGINT, "
                "clicks BIGINT, rejected_rows BIGINT)")
    con.execute("CREATE TABLE staging.stg_quarantine (partition_date DATE, source VARCHAR, reason VARCHAR, "
                "source_file VARCHAR, rejected_rows BIGINT)")
    con.execute("CREATE TABLE marts.daily_ctr_by_position (partition_date DATE, policy VARCHAR, position INTEGER, "
                "group_label VARCHAR, impressions BIGINT, clicks BIGINT, ctr DOUBLE)")
    for day in days:
        for source, policy in (("observational", "production"), ("randomized", "shuffle")):
            con.execute("INSERT INTO marts.daily_volume VALUES ($d, $s, 100, 10, 0)", {"d": day, "s": source})
            con.execute("INSERT INTO marts.daily_ctr_by_position VALUES ($d, $p, 1, 'a', 100, 10, 0.1)",
                        {"d": day, "p": policy})
    con.close()


def _report(tmp_path, days):
    path = tmp_path / "warehouse.duckdb"
    _warehouse(path, days)
    specs = [s for s in registry.SECTIONS if s.key in ("window_days", "data_volume", "ctr_by_position")]
    inputs = ReportInputs(home=tmp_path, warehouse_path=path, partition=D)
    try:
        return {s.spec.key: s for s in build_report(inputs, specs).sections}
    finally:
        inputs.close()


def test_days_without_data_are_named_in_the_report_body(tmp_path):
    gap = D - dt.timedelta(days=3)
    sections = _report(tmp_path, [d for d in WINDOW if d != gap])
    content = sections["window_days"].content
    table = content.blocks[1].frame.set_index("stage")
    trained = table.loc["EO transform and ranker candidates (trained on)"]
    assert trained["calendar days"] == f"{D - dt.timedelta(days=7)}..{D - dt.timedelta(days=1)}"
    assert trained["days with data"] == 6 and trained["days without data"] == str(gap)
    assert table.loc["fairness audit and model selection (evaluated on)", "days without data"] == "none"
    texts = [f.text for f in content.findings if f.headline]
    assert len(texts) == 2 and all(str(gap) in t for t in texts)  # training and position-bias windows


@pytest.mark.parametrize("later", [[], [dt.date(2026, 1, 1), dt.date(2026, 1, 2)], [D + dt.timedelta(days=1)]])
def test_the_descriptive_sections_describe_the_window_only(tmp_path, later):
    sections = _report(tmp_path, WINDOW + later)
    assert sections["data_volume"].content.metrics["accepted_rows"] == 2 * 8 * 100
    ctr = next(b.frame for b in sections["ctr_by_position"].content.blocks if hasattr(b, "frame")).set_index("position")
    assert "(n = 800)" in ctr.loc[1, "shuffle"]
    assert [f.headline for f in sections["window_days"].content.findings] == [False]  # nothing missing
