"""A home with three groups (a quoted and a Cyrillic label among them) runs end to end: ingestion, position bias,
EO transforms and their (simulated) evaluation, rankers, the audit with its exposure parity of the logged ranking,
selection and the report; every group appears in every stage's tables and in the report."""
from __future__ import annotations

import datetime as dt
import html
import json

import duckdb
import pytest

from fair_pipeline.ingestion.simulator import SimulationConfig
from tests.simulated_home import materialize_simulated_home

LABELS = ["north", 'south "S"', "восток-запад"]  # quotes and a non-Latin script: labels are data
CONFIG = SimulationConfig(n_items=3_000, requests_per_day=300, slots=20, seed=3, groups=3,
                          group_shares="0.5;0.3;0.2", group_labels=";".join(LABELS))
START = dt.date(2026, 1, 1)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("three_groups")
    materialize_simulated_home(home, CONFIG, START, 2)
    return home


def _distinct(home, table: str, column: str = "group") -> set:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return {r[0] for r in con.execute(f'SELECT DISTINCT "{column}" FROM marts.{table}').fetchall()}


def test_every_group_has_its_eo_transform_and_simulated_evaluation(home):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        fits = con.execute("SELECT variant, estimable, reason, transform_json FROM marts.eo_transforms").df()
    assert set(fits["variant"]) == {"weighted", "unweighted"} and fits["estimable"].all(), fits["reason"].tolist()
    for text in fits["transform_json"]:
        assert set(json.loads(text)["groups"]) == set(LABELS)
    assert _distinct(home, "eo_evaluation") == set(LABELS)


def test_every_group_is_audited_with_every_pair(home):
    assert _distinct(home, "fairness_audit_groups") >= set(LABELS)
    pairs = _distinct(home, "fairness_audit_pairs", "group_a") | _distinct(home, "fairness_audit_pairs", "group_b")
    assert pairs >= set(LABELS)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        holm = con.execute("SELECT count(*) FROM marts.fairness_audit_pairs WHERE p_holm IS NOT NULL").fetchone()[0]
    assert holm > 0  # three groups: Holm over the family of pairs


def test_exposure_parity_of_the_logged_ranking_has_every_group(home):
    assert _distinct(home, "fairness_audit_exposure_groups") == set(LABELS)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        every = con.execute("SELECT * FROM marts.fairness_audit_exposure_pairs").df()
    pairs = every[every["scored_output"] == "production"]
    assert len(pairs) == 2 and set(pairs["reference"]) == {"north"}  # the largest group
    assert pairs["verdict"].notna().all()


def test_every_audited_candidate_has_its_offpolicy_exposure_with_every_group(home):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        audited = {r[0] for r in con.execute("SELECT scored_output FROM marts.fairness_audit_groups").fetchall()}
        groups = con.execute("SELECT scored_output, ranking, \"group\", exposure, merit, ci_low, ci_high "
                             "FROM marts.fairness_audit_exposure_groups").df()
    assert set(groups["scored_output"]) == audited  # production logged, every other output re-ranking the logs
    for name, rows in groups.groupby("scored_output"):
        assert set(rows["group"]) == set(LABELS), name
        assert rows["ranking"].iloc[0].startswith("off-policy") == (name != "production")
    candidates = groups[groups["scored_output"] != "production"]
    # the same sampled requests for every candidate; merit comes from the logged clicks, whoever ranks
    assert len(candidates) and candidates.groupby("group")["merit"].nunique().max() == 1


def test_model_ranking_carries_each_candidates_exposure_ratio(home):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        ranking = con.execute("SELECT * FROM marts.model_ranking").df()
    for label in LABELS[1:]:
        assert f"exposure_ratio[{label}]" in ranking.columns
    fitted = ranking[ranking["estimable"].astype(bool)]
    assert fitted["exposure_ratio_worst"].notna().all()
    assert (fitted["exposure_ratio_worst_ci_low"] <= fitted["exposure_ratio_worst"]).all()
    assert set(fitted["exposure_reference"]) == {"north"}


def test_report_names_every_group(home):
    report = (home / "reports" / "latest" / "fairness_report.html").read_text()
    for label in LABELS:
        assert html.escape(label) in report or label in report, label
    assert "Exposure parity of the logged ranking (from the logs)" in report
    assert "each candidate ranking: group vs reference" in report and "SIMULATION study" in report
