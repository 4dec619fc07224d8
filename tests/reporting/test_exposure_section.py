"""The report's logged-exposure section reads the audit's exposure tables of its partition and says their verdicts."""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pytest

from fair_pipeline.audit import exposure_parity
from fair_pipeline.audit.store import write_audit
from fair_pipeline.reporting.exposure_section import logged_exposure
from fair_pipeline.reporting.model import ReportInputs, StageMissing

DAY = dt.date(2026, 1, 3)
W = 1.0 / np.log2(1.0 + np.arange(1, 6))


def _stored(path):
    rng = np.random.default_rng(0)
    n = 20_000
    group = rng.choice(["north", "south | coast", "東"], n)
    position = np.where(group == "north", rng.integers(1, 3, n), rng.integers(1, 6, n))
    click = (rng.random(n) < W[position - 1] * 0.3).astype(int)
    res = exposure_parity(position, click, group, W, clusters={"item_id": rng.integers(0, 500, n)})
    common = {"scored_output": "production", "ranking": "production (logged ranking)", "examination": "true curve",
              "variance_estimand": res.variance_estimand}
    tables = {"fairness_audit_exposure_groups": res.per_group.rename(columns={"n_clusters": "items"}).assign(**common),
              "fairness_audit_exposure_pairs": res.pairs.assign(**common)}
    with duckdb.connect(str(path)) as con:
        write_audit(con, "relevance", DAY, DAY, tables, partition=DAY)
    return res


def test_section_shows_every_group_and_each_ratio_with_its_verdict(tmp_path):
    res = _stored(tmp_path / "warehouse.duckdb")
    content = logged_exposure(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "warehouse.duckdb", partition=DAY))
    per_group, ratios = content.blocks[1].frame, content.blocks[2].frame
    assert per_group["group"].tolist() == ["north", "south | coast", "東"]
    assert len(ratios) == 2 and len(content.findings) == 2
    for finding, row in zip(content.findings, res.pairs.itertuples()):
        assert f"{row.ratio:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]" in finding.text
        assert finding.verdict == row.verdict
    assert "not a simulation" in content.blocks[0].markdown
    with pytest.raises(StageMissing):
        logged_exposure(ReportInputs(home=tmp_path, warehouse_path=tmp_path / "warehouse.duckdb",
                                     partition=DAY + dt.timedelta(days=1)))
