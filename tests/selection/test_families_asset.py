"""model_selection ranks every candidate family on a small simulated home.

The daily job runs once for the newest partition; then model_selection alone is re-materialized for that
partition key with one new family only. Checked: every family has estimable rows in marts.model_ranking; the
family column agrees with each candidate's name and alpha; the family members fitted in the two runs are the same
(seeded, fitted on the days before the partition: their rows are identical); the report's finding names the
family of the rank-1 candidate.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.reporting.selection import selection_findings
from fair_pipeline.selection import families as fam
from fair_pipeline.selection.assets import model_selection
from tests.simulated_home import materialize_simulated_home
from tests.shared_home import restore_home_after_each_test
from tests.selection.test_assets import CONFIG, DAYS, START, _resources


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("families_home")
    materialize_simulated_home(home, CONFIG, START, len(DAYS))
    return home


# Tests here change the shared home (other partitions, configs, registry versions): each gets it as built.
home_restored_after_each_test = restore_home_after_each_test("home")


def _ranking(home: Path) -> pd.DataFrame:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute("SELECT * FROM marts.model_ranking WHERE partition_date = $day ORDER BY rank NULLS LAST",
                           {"day": dt.date.fromisoformat(DAYS[-1])}).df()


def _rerun(home: Path, families: list[str]) -> dg.ExecuteInProcessResult:
    op = model_selection.key.to_python_identifier()
    return dg.materialize([model_selection], resources=_resources(home), partition_key=DAYS[-1],
                          run_config={"ops": {op: {"config": {"families": families, "register_champion": False}}}},
                          instance=dg.DagsterInstance.ephemeral())


def test_every_family_is_ranked_with_estimable_rows_and_the_right_family(home):
    ranking = _ranking(home)
    assert set(ranking["family"]) == set(fam.FAMILIES)
    estimable = ranking[ranking["estimable"].astype(bool)]
    assert set(estimable["family"]) == set(fam.FAMILIES), ranking.groupby("family")["reason"].first().to_dict()
    # the family column agrees with the candidate's own name / EO relaxation
    rankers = ranking[ranking["family"].isin(fam.EXISTING_FAMILIES)]
    assert (rankers["family"] == np.where(rankers["alpha"] == 0, "mi_penalty", "eo_transform")).all()
    new = ranking[ranking["family"].isin(fam.NEW_FAMILIES)]
    assert (new["model"].str.split("/").str[0] == new["family"]).all()
    counts = new["family"].value_counts().to_dict()
    assert counts == {"threshold_postprocessor": len(fam.POSTPROCESSOR_CONSTRAINTS),
                      "reject_option": len(fam.REJECT_OPTION_BOUNDS), "pairwise_fair": len(fam.PAIRWISE_SLACKS)}
    # the new families are judged like the rest: paired difference to the winner with a clustered SE
    assert new.loc[new["estimable"].astype(bool) & (new["rank"] > 1), "diff_se"].gt(0).all()
    assert ranking["held_out"].all()
    # the report names the winning family
    findings = [f.text for f in selection_findings(ranking)]
    assert any(f"the winning family is {ranking.iloc[0]['family']} ({ranking.iloc[0]['model']})" in t for t in findings)


def test_rerun_of_the_partition_with_one_family_gives_the_same_rows(home):
    full = _ranking(home).set_index("model")
    result = _rerun(home, ["pairwise_fair"])
    assert result.success
    meta = result.asset_materializations_for_node(model_selection.key.to_python_identifier())[0].metadata
    assert meta["families_cpu_seconds"].value >= 0
    again = _ranking(home).set_index("model")
    assert set(again["family"]) == {"mi_penalty", "eo_transform", "pairwise_fair"}
    pairwise = again.index[again["family"] == "pairwise_fair"]
    assert len(pairwise) == len(fam.PAIRWISE_SLACKS)
    cols = ["tpr[0]", "tpr[1]", "tnr[0]", "tnr[1]", "cost", "cost_se"]
    pd.testing.assert_frame_equal(again.loc[pairwise, cols], full.loc[pairwise, cols])
