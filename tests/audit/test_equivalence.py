"""Verdicts against a practical margin δ: hand cases per branch, boundaries, NaN, vectorization, TOST vs scipy."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fair_pipeline.audit.stats.equivalence import (
    DEFAULT_MARGINS,
    EQUIVALENT,
    INCONCLUSIVE,
    LARGER,
    NOT_ESTIMABLE,
    WITHIN,
    add_equivalence,
    classify_gaps,
    counts_sentence,
    resolve_margins,
    verdict_counts,
)


def one(estimate, se, margin=0.02, **kw):
    verdict, p_tost = classify_gaps([estimate], [se], margin, **kw)
    return verdict[0], p_tost[0]


def test_verdict_strings_are_exactly_the_five():
    assert (LARGER, WITHIN, EQUIVALENT, INCONCLUSIVE, NOT_ESTIMABLE) == (
        "gap larger than δ (significant)", "gap significant but within ±δ", "equivalent within ±δ (TOST, 95%)",
        "inconclusive", "not estimable")
    assert DEFAULT_MARGINS["partial_auc_normalized"] == DEFAULT_MARGINS["xauc"] == 0.02


def test_each_branch_by_hand():
    # z = 0.05 / 0.01 = 5: significant; |0.05| > 0.02
    assert one(0.05, 0.01)[0] == LARGER
    assert one(-0.05, 0.01)[0] == LARGER
    # a ΔxAUC of +0.004 (a million-row audit) with a tiny SE: significant (z = 8) but well inside ±0.02
    verdict, p_tost = one(0.004, 0.0005)
    assert verdict == WITHIN and p_tost < 1e-10
    # not significant (z = 0.5), 95% CI 0.002 ± 1.96 * 0.004 = [-0.0058, 0.0098] inside ±0.02: equivalent
    assert one(0.002, 0.004)[0] == EQUIVALENT
    # 90% CI 0.0125 ± 1.645 * 0.004 = [0.0059, 0.0191] lies inside ±0.02, the 95% CI's upper end 0.0203 does not
    assert one(0.0125, 0.004)[0] == INCONCLUSIVE
    # not significant (z = 0.5) but SE too large to exclude a gap of 0.02: inconclusive
    assert one(0.01, 0.02)[0] == INCONCLUSIVE
    # NaN estimate or SE: not estimable, p_tost NaN
    for est, se in ((np.nan, 0.01), (0.01, np.nan)):
        verdict, p_tost = one(est, se)
        assert verdict == NOT_ESTIMABLE and np.isnan(p_tost)
    # confidence appears in the text
    assert one(0.002, 0.004, confidence=0.9)[0] == "equivalent within ±δ (TOST, 90%)"


def test_tost_p_matches_two_scipy_one_sided_normal_tests():
    rng = np.random.default_rng(5)
    est = rng.normal(0, 0.03, 500)
    se = rng.uniform(0.001, 0.03, 500)
    delta = 0.02
    _, p_tost = classify_gaps(est, se, delta)
    p_above_minus = stats.norm.sf((est + delta) / se)  # H0: θ <= -δ, one-sided upper test
    p_below_plus = stats.norm.cdf((est - delta) / se)  # H0: θ >= +δ, one-sided lower test
    np.testing.assert_allclose(p_tost, np.maximum(p_above_minus, p_below_plus), rtol=1e-12)
    # scipy's z-test via ttest-like norm: the same p from the survival function of the shifted statistic
    for e, s, p in zip(est[:20], se[:20], p_tost[:20]):
        lower = 1 - stats.norm.cdf(e, loc=-delta, scale=s)
        upper = stats.norm.cdf(e, loc=delta, scale=s)
        assert p == pytest.approx(max(lower, upper), rel=1e-9, abs=1e-300)


def test_verdicts_are_where_the_intervals_lie():
    rng = np.random.default_rng(11)
    est = rng.normal(0, 0.02, 2000)
    se = rng.uniform(0.0005, 0.02, 2000)
    verdict, _ = classify_gaps(est, se, 0.02)
    z95 = stats.norm.ppf(0.975)
    inside = (est - z95 * se > -0.02) & (est + z95 * se < 0.02)  # the same 95% CI decides every verdict
    beyond = (est - z95 * se > 0.02) | (est + z95 * se < -0.02)
    significant = 2 * stats.norm.sf(np.abs(est / se)) < 0.05
    np.testing.assert_array_equal(verdict == EQUIVALENT, inside & ~significant)
    np.testing.assert_array_equal(verdict == WITHIN, significant & inside)
    np.testing.assert_array_equal(verdict == LARGER, beyond)
    np.testing.assert_array_equal(verdict == INCONCLUSIVE, ~inside & ~beyond)
    assert 50 < np.count_nonzero(significant & ~inside & ~beyond)  # significant, size unclear: inconclusive


def test_verdicts_use_student_t_with_the_degrees_of_freedom():
    t5 = stats.t.ppf(0.975, 5)
    se = 0.01
    at_t = 0.02 + t5 * se
    assert one(at_t + 1e-9, se)[0] == LARGER  # normal theory: larger either way
    assert classify_gaps([at_t + 1e-9], [se], 0.02, df=5)[0][0] == LARGER
    assert classify_gaps([at_t - 1e-9], [se], 0.02, df=5)[0][0] == INCONCLUSIVE
    assert classify_gaps([0.02 - t5 * 0.002 - 1e-9], [0.002], 0.02, df=5)[0][0] == WITHIN
    assert classify_gaps([0.02 - t5 * 0.002 + 1e-9], [0.002], 0.02, df=5)[0][0] == INCONCLUSIVE
    assert classify_gaps([0.01], [0.004], 0.02, df=np.nan)[0][0] == NOT_ESTIMABLE


def test_boundaries():
    # the 95% CI's lower end exactly at δ is not beyond it
    zc = stats.norm.ppf(0.975)
    assert one(0.02 + zc * 0.001, 0.001)[0] == INCONCLUSIVE
    assert one(0.02 + zc * 0.001 + 1e-9, 0.001)[0] == LARGER
    # significant with a point estimate beyond δ but an interval reaching inside: inconclusive, not "larger"
    assert one(0.03, 0.03 / zc * 0.99, margin=0.01)[0] == INCONCLUSIVE
    # equivalence at its boundary: the 95% CI's upper end at exactly δ is not strictly inside
    se = 0.006  # z = 0.63: not significant
    assert one(0.02 - zc * se, se)[0] == INCONCLUSIVE
    assert one(0.02 - zc * se - 1e-9, se)[0] == EQUIVALENT
    # an exact gap (SE 0)
    assert one(0.0, 0.0)[0] == EQUIVALENT and one(0.01, 0.0)[0] == WITHIN and one(0.03, 0.0)[0] == LARGER


def test_adjusted_p_decides_significance():
    # Wald p = 2e-4 alone would be significant; a Holm p of 0.2 is not, and the TOST decides
    verdict, _ = one(0.05, 0.0135)
    assert verdict == LARGER
    assert one(0.05, 0.0135, p_adjusted=[0.2])[0] == INCONCLUSIVE
    assert one(0.001, 0.0005, p_adjusted=[0.3])[0] == EQUIVALENT
    # a NaN adjusted p falls back to the Wald p
    assert one(0.05, 0.0135, p_adjusted=[np.nan])[0] == LARGER


def test_vectorized_rows_margins_and_errors():
    est = np.array([0.05, 0.004, 0.002, 0.01, np.nan])
    se = np.array([0.01, 0.0005, 0.004, 0.02, 0.01])
    verdict, p_tost = classify_gaps(est, se, 0.02)
    assert verdict.tolist() == [LARGER, WITHIN, EQUIVALENT, INCONCLUSIVE, NOT_ESTIMABLE]
    assert [one(e, s)[0] for e, s in zip(est, se)] == verdict.tolist()
    # per-row margins: δ = 0.1 turns the first gap into "within"
    verdict, _ = classify_gaps(est, se, np.array([0.1, 0.02, 0.02, 0.02, 0.02]))
    assert verdict[0] == WITHIN
    with pytest.raises(ValueError, match="margin"):
        classify_gaps(est, se, 0.0)
    with pytest.raises(ValueError, match="confidence"):
        classify_gaps(est, se, 0.02, confidence=0.4)
    with pytest.raises(ValueError, match="unknown margin metric 'auc'"):
        resolve_margins({"auc": 0.1})
    assert resolve_margins({"xauc": 0.05})["xauc"] == 0.05 and resolve_margins(None) == DEFAULT_MARGINS


def test_add_equivalence_appends_columns_and_respects_estimable_and_holm():
    frame = pd.DataFrame({"delta": [0.05, 0.004, 0.03], "se": [0.01, 0.0005, 0.01], "p_holm": [0.001, 1e-9, 0.4],
                          "estimable": [True, True, False]})
    out = add_equivalence(frame, "xauc", "delta", "se", margins={"xauc": 0.03})
    assert list(out.columns[:4]) == list(frame.columns)
    assert out["verdict"].tolist() == [LARGER, WITHIN, NOT_ESTIMABLE]
    assert (out["margin"] == 0.03).all()
    assert out.loc[0, "effect_ci_low"] == pytest.approx(0.05 - stats.norm.ppf(0.975) * 0.01)
    assert np.isnan(out.loc[2, "effect"]) and np.isnan(out.loc[2, "p_tost"])
    empty = add_equivalence(frame.iloc[0:0], "xauc", "delta", "se")
    assert "verdict" in empty.columns and empty.empty


def test_counts_sentence():
    counts = verdict_counts([LARGER] * 3 + [WITHIN] * 40 + ["equivalent within ±δ (TOST, 90%)"] * 20 + [INCONCLUSIVE] * 6)
    assert counts_sentence(counts) == ("69 comparisons: 3 gaps larger than δ, 40 significant but within ±δ, "
                                       "20 equivalent within ±δ, 6 inconclusive, 0 not estimable")
