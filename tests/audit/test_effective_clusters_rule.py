"""benchmarks/effective_clusters_rule.py: the kept share and kept coverage against a hand count, the pairwise
rows' fallback to the audit's df, and the documented command at a tiny size."""
import numpy as np
import pandas as pd
import pytest

from benchmarks.effective_clusters_rule import cic, kept_coverage, main, summary


def _raw(config: str, statistic: str, errors, half, df, df_design, estimable=None) -> pd.DataFrame:
    truth = cic.truths(config)[statistic]
    n = len(errors)
    return pd.DataFrame({"config": config, "statistic": statistic, "estimate": truth + np.asarray(errors),
                         "cr2_t": half, "df": df, "df_totals": df, "df_design": df_design,
                         "estimable": np.ones(n, bool) if estimable is None else estimable})


def test_kept_coverage_counts_the_draws_at_or_above_the_threshold():
    # df 2, 3, 5, 8, 8 with misses at df 2 and 8: k = 3 keeps 4 draws, 3 covered; an unestimable draw never counts
    raw = _raw("pareto1.3", "I0-I1(1)", [0.5, 0.0, 0.1, 0.9, -0.2], 0.3, [2.0, 3.0, 5.0, 8.0, 8.0],
               [9.0, 9.0, 1.0, 9.0, 9.0], estimable=[True, True, True, True, False])
    row = kept_coverage(raw, "df", 3).iloc[0]
    assert (row["estimable"], row["kept"]) == (4, 3)
    assert row["dropped"] == pytest.approx(0.25) and row["coverage"] == pytest.approx(2 / 3)
    assert row["cov_se"] == pytest.approx(np.sqrt(2 / 9 / 3))
    row = kept_coverage(raw, "df_design", 3).iloc[0]  # df_design drops the df-5 draw instead
    assert row["kept"] == 3 and row["coverage"] == pytest.approx(1 / 3)
    assert kept_coverage(raw, "df", 0).iloc[0]["coverage"] == pytest.approx(0.5)


def test_rows_without_a_design_df_fall_back_to_the_audits_df():
    raw = _raw("pairwise_fresh", "A0>1-A1>0", [0.0, 0.0, 0.5], 0.1, [2.0, 6.0, 7.0], np.nan)
    row = kept_coverage(raw, "df_design", 5).iloc[0]
    assert row["kept"] == 2 and row["coverage"] == pytest.approx(0.5)


def test_summary_counts_rows_in_the_band_with_enough_kept_draws():
    covered = np.r_[np.zeros(95), np.ones(5)]  # 95 of 100 covered at df 10
    raw = pd.concat([_raw("pareto1.3", "I0-I1(1)", covered, 0.5, 10.0, 10.0),
                     _raw("pareto1.3", "dxAUC", covered, 0.5, np.r_[np.full(50, 2.0), np.full(50, 10.0)], 10.0)])
    lines, _ = summary(raw)
    at = lines.set_index(["measure", "k"])
    assert at.loc[("df", 0), "rows"] == 2 and at.loc[("df", 0), "in_band"] == 2
    assert at.loc[("df", 3), "rows"] == 1  # the dxAUC row keeps 50 draws: too few to count
    assert at.loc[("df", 3), "max_dropped"] == pytest.approx(0.5)


def test_documented_command_runs_at_a_tiny_size(capsys):
    main(["--rows", "pareto1.3", "--reps", "2", "--seed", "3", "--detail", "df_design:4"])
    out = capsys.readouterr().out
    assert "df_design >= 4:" in out and "I0-I1(0.1)" in out
