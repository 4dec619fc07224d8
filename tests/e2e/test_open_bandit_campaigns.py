"""The three Open Bandit campaigns run end to end as three surfaces: `import-open-bandit --campaign every`, then
`run --no-simulate`; the audit measures the logged ranking's exposure parity on them with CIs."""
from __future__ import annotations

import duckdb

from fair_pipeline.commands import main
from fair_pipeline.platform import settings


def test_every_campaign_runs_end_to_end(fp_home):
    assert main(["import-open-bandit", "--campaign", "every"]) == 0
    assert main(["run", "--no-simulate"]) == 0
    with duckdb.connect(str(settings.warehouse_path()), read_only=True) as con:
        surfaces = con.execute("SELECT query_id, count(*), sum(click) FROM raw.observational_impressions "
                               "GROUP BY 1 ORDER BY 1").fetchall()
        items = con.execute("SELECT count(*) FROM raw.items").fetchone()[0]
        exposure = con.execute("SELECT \"group\", n, clicks, exposure_over_merit, ci_low, ci_high, note "
                               "FROM marts.fairness_audit_exposure_groups WHERE scored_output = 'production'").df()
    assert surfaces == [("obd-all", 10_000, 42), ("obd-men", 10_000, 69), ("obd-women", 10_000, 46)]
    assert items == 160
    # the newest day (2019-11-30) audited: both stand-in groups present, each with a CI or a stated reason
    assert set(exposure["group"]) == {"item_feature_0:high", "item_feature_0:low"}
    for row in exposure.itertuples():
        assert (row.ci_low < row.exposure_over_merit < row.ci_high) or row.note.startswith("not estimable")
    report = (fp_home / "reports" / "latest" / "fairness_report.html").read_text()
    assert "Exposure parity of the logged ranking (from the logs)" in report
