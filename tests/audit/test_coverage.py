"""Issue item 7: the item-clustered 95% CIs cover the population value; the iid (Lemma 3) ones do not.

A smaller run of ``benchmarks/audit_coverage.py`` (the docs table comes from
``python benchmarks/audit_coverage.py`` with seed 0; this test uses seed 1): 300 replications, each a
fresh population of 2000 simulator items shown 1 + Poisson(9) times, 2 score variants x 2 label sources
x 4 statistics (16 rows), truth in closed form.

Measured with these settings (seed 1): clustered coverage 0.903-0.967 (mean 0.938), clustered SE/SD
0.939-1.039, iid coverage 0.45-0.49 (relevance) and 0.67-0.85 (clicks), iid SE/SD 0.29-0.31 and 0.50-0.73.
The lowest row (I_0-I_1(0.1), per-impression scores, relevance labels: 271/300) is 2 replications above
the lower band.

Bands (R = 300 replications; binomial SE of a coverage p is sqrt(p (1 - p) / 300): 0.0126 at 0.95,
0.0142 at 0.935):

* clustered coverage in [0.895, 0.985]. Upper: 0.95 + 2.8 SE(0.95). Lower: the I(0.1) rows are slightly
  below nominal in truth (2000 replications, seeds 0 and 1 of the benchmark: 0.931-0.945; few clusters in
  the 10% tail, ~40 negative items of group 0, and a small upward bias of I(0.1)), so 0.935 - 2.8
  SE(0.935) = 0.895. (A first version used 0.91 from the 0.95 binomial SE alone; seed 1's first 300
  replications gave 0.903 for I_0-I_1(0.1) with per-impression scores, whose 1000-replication coverage is
  0.931. The seed was not changed.) An SE 25% too large covers 0.986 in expectation; the iid SE covers
  0.47-0.89, far outside.
* mean clustered SE / empirical SD in [0.85, 1.15]: the SD of 300 estimates has relative SE
  1/sqrt(2 * 299) = 4.1%, so the band is about +-3.6 SE; this also catches an SE 15% too small, which
  would cover 0.904 and could slip past the coverage band.
* average clustered coverage over the 16 rows in [0.925, 0.965] (seed 0, 1000 replications: 0.944; seed 1, 300: 0.938).
* iid coverage: < 0.75 for relevance labels (every impression of an item repeats its label; the benchmark
  measures 0.45-0.50) and < 0.92 for randomized clicks (measured 0.68-0.885 with 1000 replications; 0.885
  + 2 binomial SEs at 300 is 0.92; clicks decorrelate the labels within an item, so the iid SE is less
  wrong), and at least 0.05 below the clustered coverage. Mean iid SE / SD < 0.45 for relevance labels
  (measured 0.29-0.33, ~1/sqrt(E[n^2]/E[n]) = 1/sqrt(10.9) = 0.30 for n = 1 + Poisson(9) identical
  copies) and < 0.85 for clicks (measured 0.50-0.78).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.audit_coverage import (
    CUTOFFS, GROUP, LABELS, SCORES, STATISTICS, coverage_table, draw_impressions, one_replication,
    run_replications, sim_config, true_values, truth_table,
)
from fair_pipeline.audit import compare_groups
from fair_pipeline.ingestion.simulator import bias_curve

REPS, ITEMS, SEED = 300, 2000, 1
COVERAGE_BAND = (0.895, 0.985)
MEAN_COVERAGE_BAND = (0.925, 0.965)
SE_RATIO_BAND = (0.85, 1.15)
IID_MAX = {"relevance": 0.75, "randomized_clicks": 0.92}
IID_SE_RATIO_MAX = {"relevance": 0.45, "randomized_clicks": 0.85}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    raw = run_replications(REPS, ITEMS, seed=SEED, jobs=2)
    return coverage_table(raw, truth_table())


@pytest.mark.slow
def test_every_row_is_reported_with_all_replications(table):
    assert len(table) == len(SCORES) * len(LABELS) * len(STATISTICS)
    assert (table["reps"] == REPS).all()


@pytest.mark.slow
def test_clustered_coverage_is_nominal_in_every_row(table):
    lo, hi = COVERAGE_BAND
    bad = table[(table["cov_clustered"] < lo) | (table["cov_clustered"] > hi)]
    assert bad.empty, bad.to_string()
    lo, hi = MEAN_COVERAGE_BAND
    assert lo <= table["cov_clustered"].mean() <= hi, table.to_string()


@pytest.mark.slow
def test_clustered_se_matches_the_spread_of_the_estimates(table):
    lo, hi = SE_RATIO_BAND
    r = table["se/sd_clustered"]
    assert ((r >= lo) & (r <= hi)).all(), table.to_string()


@pytest.mark.slow
def test_iid_variance_undercovers_when_items_repeat(table):
    for labels, limit in IID_MAX.items():
        rows = table[table["labels"] == labels]
        assert (rows["cov_iid"] < limit).all(), rows.to_string()
        assert (rows["cov_iid"] < rows["cov_clustered"] - 0.05).all(), rows.to_string()
        assert (rows["se/sd_iid"] < IID_SE_RATIO_MAX[labels]).all(), rows.to_string()


def test_closed_form_truth_against_independent_formulas():
    """I_0(1) with fixed scores and relevance labels is P(0.6 + N(0, 0.5 sqrt 2) + 2 U1 - U2 > 0) (a
    midpoint grid over U1, U2); with click labels the negatives are the mixture q * relevant + (1 - q) *
    irrelevant, q = p (1 - mean w) / (p (1 - mean w) + 1 - p), so AUC = q / 2 + (1 - q) AUC_relevance."""
    k = 2000
    u = (np.arange(k) + 0.5) / k
    u1, u2 = np.meshgrid(u, u)
    auc_rel = stats.norm.cdf((0.6 + 2 * u1 - u2) / (0.5 * np.sqrt(2))).mean()
    assert true_values("fixed", "relevance")[1] == pytest.approx(auc_rel, abs=1e-6)
    cfg = sim_config(10, 0)
    p, w = cfg.p_relevant_group0, bias_curve(cfg).mean()
    q = p * (1 - w) / (p * (1 - w) + 1 - p)
    assert true_values("fixed", "randomized_clicks")[1] == pytest.approx(q / 2 + (1 - q) * auc_rel, abs=1e-6)
    # group 1 is binormal with equal variances: AUC = Phi(0.6 / (sd sqrt 2)); difference = I_0(1) - that
    for scores, sd in (("fixed", 0.5), ("per_impression", np.hypot(0.5, 0.2))):
        auc1 = stats.norm.cdf(0.6 / (sd * np.sqrt(2)))
        t = true_values(scores, "relevance")
        assert t[3] == pytest.approx(t[1] - auc1, abs=1e-8)


def test_replication_reads_the_public_tables():
    """One replication's numbers are compare_groups' own (clustered and iid), oriented as group 0 - group 1."""
    rows = pd.DataFrame(one_replication(0, 500, seed=SEED))
    d = draw_impressions(500, 1_000_000 * SEED + 0)
    s, y = d["scores"]["per_impression"], d["labels"]["randomized_clicks"]
    clu = compare_groups(s, y, d["group"], CUTOFFS, clusters=d["item"])
    iid = compare_groups(s, y, d["group"], CUTOFFS)
    mine = rows[(rows["scores"] == "per_impression") & (rows["labels"] == "randomized_clicks")].set_index("statistic")
    g = clu.groups[clu.groups["group"] == GROUP].set_index("cutoff")
    gi = iid.groups[iid.groups["group"] == GROUP].set_index("cutoff")
    p, pi = clu.pairs.set_index("cutoff"), iid.pairs.set_index("cutoff")
    assert (clu.pairs["group_a"] == GROUP).all()
    for a, name in zip(CUTOFFS, STATISTICS[:2]):
        assert mine.loc[name, "estimate"] == g.loc[a, "auc"]
        assert mine.loc[name, "se_clustered"] == g.loc[a, "se"] and mine.loc[name, "se_iid"] == gi.loc[a, "se"]
    for a, name in zip(CUTOFFS, STATISTICS[2:]):
        assert mine.loc[name, "estimate"] == p.loc[a, "diff"]
        assert mine.loc[name, "se_clustered"] == p.loc[a, "se"] and mine.loc[name, "se_iid"] == pi.loc[a, "se"]
    assert (mine["se_clustered"] > mine["se_iid"]).all()


def test_the_documented_command_runs(tmp_path, capsys):
    """docs/audit_inference.md's command, tiny: every row printed, JSON written, truth check included."""
    import json

    from benchmarks.audit_coverage import main

    out = tmp_path / "coverage.json"
    assert main(["--reps", "3", "--items", "400", "--jobs", "1", "--truth-factor", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cov_clustered" in printed and "Truth check" in printed and "s CPU" in printed
    report = json.loads(out.read_text())
    assert len(report["table"]) == 16 and {r["reps"] for r in report["table"]} == {3}
    assert len(report["truth_check"]) == 16
