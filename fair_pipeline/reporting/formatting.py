"""Formatting shared by the report's sections: estimates with CIs, p-values, sample counts, findings."""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from scipy import stats

from fair_pipeline.reporting.model import ALPHA, Finding


def with_ci(frame: pd.DataFrame, value: str, low: str, high: str, digits: int = 3) -> pd.Series:
    """'0.812 [0.790, 0.833]' per row, or 'not estimable' where the estimate is NaN."""
    if not len(frame):
        return pd.Series([], dtype=str)
    return frame.apply(lambda row: ci_text(row[value], row[low], row[high], digits), axis=1)


def p_text(p: float) -> str:
    return "n/a" if pd.isna(p) else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def p_phrase(p: float) -> str:
    """'p < 0.001' or 'p = 0.012'."""
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _counts(row: pd.Series) -> str:
    return ", ".join(f"{c} = {int(row[c]):,}" for c in ("n", "n_pos", "n_neg", "n_pairs") if c in row and pd.notna(row[c]))


def significance_findings(
    frame: pd.DataFrame, subject: Callable[[pd.Series], str], comparison: str, value: str = "estimate", alpha: float = ALPHA
) -> list[Finding]:
    """One neutral statement per tested row, e.g. 'model m1: partial AUC of group 1 = 0.062 [0.055, 0.069]
    vs the reference group (p = 0.002; n_pos = 380, n_neg = 620)', classed significant at `alpha`, not
    significant, or not estimable (NaN estimate). Rows without a p-value (e.g. the reference) are skipped."""
    findings = []
    low, high = ("ci_low", "ci_high") if value == "estimate" else (f"{value}_ci_low", f"{value}_ci_high")
    for _, row in frame.iterrows():
        counts = _counts(row)
        if pd.isna(row[value]):
            findings.append(Finding(f"{subject(row)}: not estimable ({counts or 'too few observations'})", "not estimable"))
            continue
        if pd.isna(row.get("p_value", float("nan"))):
            continue
        estimate = ci_text(row[value], row.get(low, float("nan")), row.get(high, float("nan")))
        status = status_of(row["p_value"], alpha)
        detail = p_phrase(row["p_value"]) + (f"; {counts}" if counts else "")
        findings.append(Finding(f"{subject(row)} = {estimate} {comparison} ({detail})", status))
    return findings


def ci_text(value: float, low: float, high: float, digits: int = 3, signed: bool = False) -> str:
    """One estimate as '0.272 [0.270, 0.274]' (signed: '-0.234 [-0.238, -0.230]'); 'not estimable' for NaN."""
    if pd.isna(value):
        return "not estimable"
    spec = f"{'+' if signed else ''}.{digits}f"
    bounds = "CI n/a" if pd.isna(low) or pd.isna(high) else f"{low:{spec}}, {high:{spec}}"
    return f"{value:{spec}} [{bounds}]"


def z_test_p(value: float, low: float, high: float, null: float) -> float:
    """Two-sided p-value of value = null from a normal 95% CI (SE = half-width / 1.96); NaN if not estimable."""
    se = (high - low) / (2 * stats.norm.ppf(0.975))
    if pd.isna(value) or pd.isna(se) or se <= 0:
        return float("nan")
    return float(2 * stats.norm.sf(abs(value - null) / se))


def status_of(p: float, alpha: float = ALPHA) -> str:
    return "not estimable" if pd.isna(p) else ("significant" if p < alpha else "not significant")


def model_list(names: list[str]) -> str:
    """Model names with a shared prefix folded: 'production, eo_{unweighted, weighted}, ranker_x_lam_{0, 0.1}'."""
    families: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        prefix = name[: name.rfind("_") + 1]
        families.setdefault(prefix, []).append(name[len(prefix):])
    for ends in families.values():
        if all(_is_number(e) for e in ends):
            ends.sort(key=float)
    return ", ".join(prefix + f"{{{', '.join(ends)}}}" if prefix and len(ends) > 1 else ", ".join(prefix + e for e in ends)
                     for prefix, ends in families.items())


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def p_bound(ps: pd.Series, status: str) -> str:
    """For several tests of one verdict: 'every p < 0.001' / 'largest p = 0.03' (significant), 'smallest p = 0.2'."""
    if len(ps) == 1:
        return p_phrase(ps.iloc[0])
    if status == "significant":
        worst = ps.max()
        return "every p < 0.001" if worst < 0.001 else f"largest p = {p_text(worst)}"
    return f"smallest p = {p_text(ps.min())}"
