"""docs/audit_inference.md's small-sample command, tiny, and Monte Carlo coverage under heavy-tailed popularity and
fresh items (slow): both failed with the Liang-Zeger sandwich and normal critical values (0.85-0.89 and 0.38)."""
import json

import numpy as np
import pytest

from benchmarks.cluster_inference_coverage import coverage, main, one_replication
import pandas as pd


def test_the_documented_command_runs(tmp_path, capsys):
    out = tmp_path / "cov.json"
    rows = "pareto1.3,pairwise_fresh,rates_minority45,selection_pareto1.3"
    main(["--reps", "2", "--jobs", "1", "--rows", rows, "--json", str(out)])
    printed = capsys.readouterr().out
    assert "cr2_t" in printed and "larger|gap=0" in printed and "replications in" in printed
    report = json.loads(out.read_text())
    assert {r["config"] for r in report["table"]} == set(rows.split(","))
    held_out = [r for r in report["table"] if r["config"] in ("rates_minority45", "selection_pareto1.3")]
    assert {r["statistic"] for r in held_out} == {"TPR0", "TPR1-TPR0", "FPR1-FPR0", "cost(A)-cost(W)"}
    rates = [r for r in held_out if r["config"] == "rates_minority45"]
    assert all(r["reps"] == 2 and 1 <= r["median_df"] for r in rates)
    # 500 items: the candidates decide differently on a handful, so the rule finds the difference not estimable
    assert [(r["reps"], r["not_estimable"]) for r in held_out if r["config"] == "selection_pareto1.3"] == [(0, 1.0)]
    assert all(r["median_df_design"] >= r["median_df"] for r in report["table"] if r["reps"] and r["config"] != "pairwise_fresh")
    assert "cr2_t_design" in printed and "t_needed" in printed
    # every row with kept replications is diagnosed (selection at 500 items has none: not estimable)
    assert {r["config"] for r in report["diagnostics"]} == {r["config"] for r in report["table"] if r["reps"] >= 2}


def test_held_out_truths_are_the_simulators_rates():
    """The closed-form truths of the held-out rows against a large sample of the simulator's items (rates of the
    rule merit >= RULE_THRESHOLD; the metric's cost difference of the two candidates)."""
    from benchmarks.cluster_inference_coverage import RULE_THRESHOLD, SELECTION_METRIC, W_SHIFT, truths
    from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
    items = simulate_items(SimulationConfig(n_items=200_000, seed=5))
    s, y = items["merit_score"].to_numpy(), items["relevance"].to_numpy().astype(bool)
    g = items["group_id"].to_numpy().astype(str)

    def rates(shift):
        score = s + shift * (g == "1")
        return np.array([[np.mean(score[(g == c) & y] >= RULE_THRESHOLD), np.mean(score[(g == c) & ~y] < RULE_THRESHOLD)]
                         for c in ("0", "1")])

    plain, truth = rates(0.0), truths("rates_pareto1.3")
    assert plain[0, 0] == pytest.approx(truth["TPR0"], abs=0.005)
    assert plain[1, 0] - plain[0, 0] == pytest.approx(truth["TPR1-TPR0"], abs=0.006)
    assert plain[0, 1] - plain[1, 1] == pytest.approx(truth["FPR1-FPR0"], abs=0.006)
    cost = SELECTION_METRIC(plain) - SELECTION_METRIC(rates(W_SHIFT))
    assert cost == pytest.approx(truths("selection_pareto1.3")["cost(A)-cost(W)"], abs=0.002)


def test_the_design_column_is_the_design_half_of_the_audits_df():
    """cr2_t_design's df is the design df the product's own df takes the minimum with: the audit's contrasts report
    min(totals' effective clusters, design df). (rate_table's rates and selection's paired difference do too where
    CR2's variance is used, and the exchangeable-items df where that variance is larger: tested from the matrices
    in tests/postprocessing/test_rates_inference.py and tests/selection/test_rank_candidates.py.)"""
    for config in ("pareto1.3",):
        for row in one_replication((config, 0, 3)):
            assert np.isfinite(row["df_design"]) and row["df"] <= row["df_design"] * (1 + 1e-9), (config, row)
            assert row["df"] == pytest.approx(min(row["df_totals"], row["df_design"]), rel=1e-9), (config, row)


def test_disagreeing_items_are_group_1_items_in_the_shifted_band():
    """The candidates (merit; merit + W_SHIFT in group "1"; both at RULE_THRESHOLD) decide differently exactly on
    group "1"'s items with merit in [RULE_THRESHOLD - W_SHIFT, RULE_THRESHOLD); the table counts them per draw."""
    from benchmarks.cluster_inference_coverage import CONFIGS, RULE_THRESHOLD, W_SHIFT, coverage_by_disagreement, draw
    config = "selection_pareto1.3"
    rows = [dict(one_replication((config, r, 5))[0], config=config) for r in range(3)]
    for r, row in enumerate(rows):
        d = draw(config, [5, r, list(CONFIGS).index(config)])
        band = (d["group"] == "1") & (d["score"] >= RULE_THRESHOLD - W_SHIFT) & (d["score"] < RULE_THRESHOLD)
        assert row["disagreeing"] == np.unique(d["item"][band]).size
    table = coverage_by_disagreement(pd.DataFrame(rows)).iloc[0]
    counts = np.array([row["disagreeing"] for row in rows])
    assert table["median_disagreeing"] == np.median(counts) and table["kept>=5"] == np.mean(counts >= 5)


def _coverage(config, reps):
    raw = pd.DataFrame([row for r in range(reps) for row in one_replication((config, r, 7))])
    return coverage(raw).set_index("statistic")


@pytest.mark.slow
def test_auc_gaps_cover_under_pareto_popularity():
    table = _coverage("pareto1.3", 200)  # ~55 effective items of 500
    assert (table["reps"] >= 180).all()
    assert (table["cr2_t"] >= 0.90).all(), table[["cr1_z", "cr2_t", "median_df"]]


@pytest.mark.slow
def test_pairwise_gap_covers_with_fresh_items():
    table = _coverage("pairwise_fresh", 80)
    assert table.at["A0>1-A1>0", "cr2_t"] >= 0.87, table
    assert table.at["A0>1-A1>0 queries only", "cr2_t"] < 0.6  # these items only: not the population's CI
    assert np.isfinite(table.at["A0>1-A1>0", "median_df"])


def _raw(errors, se, df, config="pareto1.3", statistic="I0-I1(1)"):
    from benchmarks.cluster_inference_coverage import critical_value, truths
    truth = truths(config)[statistic]
    se, df = np.broadcast_to(se, errors.shape), np.broadcast_to(df, errors.shape)
    return pd.DataFrame({"config": config, "statistic": statistic, "estimate": truth + errors, "estimable": True,
                         "cr2_z": critical_value(0.95) * se, "cr2_t": critical_value(0.95, df) * se, "df": df})


def test_diagnostics_separate_the_ses_bias_from_the_critical_value():
    """Normal errors with an SE of exactly their SD: unbiased variance, a needed critical value of 1.96 and misses
    split evenly; the same errors with SEs 0.7 of that: variance ratio 0.49 and a needed critical value of 2.8; an
    estimate always 3 SEs too low misses only below; the df quarters are the smallest and largest dfs."""
    from benchmarks.cluster_inference_coverage import diagnostics
    rng = np.random.default_rng(1)
    err = rng.standard_normal(40_000)
    d = diagnostics(_raw(err, 1.0, np.inf)).iloc[0]
    assert d["var/mse"] == pytest.approx(1.0, abs=0.02) and d["t_needed"] == pytest.approx(1.96, abs=0.03)
    assert d["t_used"] == pytest.approx(1.96, abs=1e-3)
    assert d["miss_low"] == pytest.approx(0.025, abs=0.004) and d["miss_high"] == pytest.approx(0.025, abs=0.004)
    d = diagnostics(_raw(err, 0.7, 4.0)).iloc[0]
    assert d["var/mse"] == pytest.approx(0.49, abs=0.01) and d["t_needed"] == pytest.approx(1.96 / 0.7, abs=0.05)
    assert d["t_used"] == pytest.approx(2.776, abs=1e-3)
    d = diagnostics(_raw(np.full(100, -3.0), 1.0, 10.0)).iloc[0]
    assert (d["miss_low"], d["miss_high"]) == (1.0, 0.0)
    # coverage by df quarter: draws with df 2 are covered (error 0), draws with df 50 are not (error 5 SEs)
    df = np.r_[np.full(50, 2.0), np.full(50, 50.0)]
    d = diagnostics(_raw(np.r_[np.zeros(50), np.full(50, 5.0)], 1.0, df)).iloc[0]
    assert (d["cov_df_q1"], d["cov_df_q4"]) == (1.0, 0.0)
    # an asymmetric reported interval (rates): its own sides decide the misses, not t x SE
    raw = _raw(np.array([-0.5, 2.5, -2.5]), 1.0, 10.0).assign(ci_below=[1.0, 3.0, 1.0], ci_above=1.0)
    d = diagnostics(raw).iloc[0]  # t_10 x SE = 2.23 would miss the error of 2.5 above instead
    assert (d["miss_low"], d["miss_high"]) == (pytest.approx(1 / 3), 0.0)
    # with SEs proportional to |error| the t ratio is bounded and the correlation positive
    d = diagnostics(_raw(err[:400], np.abs(err[:400]) + 0.5, 5.0)).iloc[0]
    assert d["corr_abs_err_se"] > 0.9 and d["t_needed"] < 1.0
