"""Formatting shared by the report's sections: estimates with CIs, p-values, sample counts, findings."""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd
from scipy import stats

from fair_pipeline.audit.stats.equivalence import (
    DEFAULT_MARGINS,
    EQUIVALENT,
    INCONCLUSIVE,
    LARGER,
    NOT_ESTIMABLE,
    WITHIN,
    classify_gaps,
    verdict_kind,
)
from fair_pipeline.reporting.model import ALPHA, Finding

# The finding status of each verdict (audit.stats.equivalence.VERDICTS).
VERDICT_STATUS = {LARGER: "gap larger than δ", WITHIN: "within ±δ", EQUIVALENT: "equivalent",
                  INCONCLUSIVE: "inconclusive", NOT_ESTIMABLE: "not estimable"}


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


def verdict_status(verdict: str) -> str:
    return VERDICT_STATUS[verdict_kind(verdict)]


def with_verdicts(frame: pd.DataFrame, metric: str, estimate: str, low: str, high: str, p: str) -> pd.DataFrame:
    """`frame` with `margin`, `p_tost` and `verdict` for every row: as the audit logged them, else (tables logged
    before verdicts existed) from the estimate, the SE implied by its 95% CI (or, without a CI, by its p-value) and
    the decisive p-value `p`, with the default margin of `metric`."""
    out = frame.copy()
    for column in ("margin", "p_tost"):
        out[column] = pd.to_numeric(out[column], errors="coerce") if column in out.columns else np.nan
    out["verdict"] = out["verdict"].astype(object) if "verdict" in out.columns else None
    todo = out["verdict"].isna() | (out["verdict"].astype(str).isin(["", "None", "nan"]))
    if todo.any():
        rows = out[todo]
        est = pd.to_numeric(rows[estimate], errors="coerce").to_numpy(dtype=float)
        pv = pd.to_numeric(rows[p], errors="coerce").to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            se = ((pd.to_numeric(rows[high], errors="coerce") - pd.to_numeric(rows[low], errors="coerce")).to_numpy(dtype=float)
                  / (2 * stats.norm.ppf(0.975)))
            from_p = np.abs(est) / stats.norm.isf(pv / 2)
        se = np.where(np.isnan(se), from_p, se)
        delta = out.loc[todo, "margin"].fillna(DEFAULT_MARGINS[metric]).to_numpy(dtype=float)
        verdict, p_tost = classify_gaps(est, se, delta, p_adjusted=pv)
        out.loc[todo, "margin"] = delta
        out.loc[todo, "p_tost"] = p_tost
        out.loc[todo, "verdict"] = verdict
    return out


def model_order(names: Iterable[str]) -> list[str]:
    """Distinct model names in first-seen order of their family (the name up to its last '_'), each family's
    numeric suffixes sorted as numbers: ranker_lam_{0.1, 1, 2, 10}, never 0.1, 1, 10, 2 (text order)."""
    families: dict[str, list[str]] = {}
    for name in dict.fromkeys(str(n) for n in names):
        families.setdefault(name[: name.rfind("_") + 1], []).append(name)
    out = []
    for prefix, members in families.items():
        ends = [m[len(prefix):] for m in members]
        out += sorted(members, key=lambda m: float(m[len(prefix):])) if all(_is_number(e) for e in ends) else members
    return out


def sort_by_model(frame: pd.DataFrame, column: str = "model") -> pd.DataFrame:
    """Rows ordered by `model_order` of `column` (stable within a model)."""
    if column not in frame.columns or frame.empty:
        return frame
    rank = {m: i for i, m in enumerate(model_order(frame[column]))}
    return frame.iloc[np.argsort(frame[column].astype(str).map(rank).to_numpy(), kind="stable")]


def count_text(value) -> str:
    """A count as an integer with thousands separators ('25,000', never '25000.0'); 'n/a' if missing."""
    return "n/a" if pd.isna(value) else f"{int(round(float(value))):,}"


# What each verdict means, one sentence each (the rule of `audit.stats.equivalence.classify_gaps`).
VERDICT_LEGEND = {
    LARGER: "the whole 95% interval lies beyond +δ or beyond −δ: a gap that matters, whatever the sampling noise.",
    WITHIN: "the gap is real (p < 0.05) but its 95% interval lies inside ±δ: too small to matter.",
    EQUIVALENT: "not significant and the 95% interval lies inside ±δ: any gap is too small to matter.",
    INCONCLUSIVE: "the interval reaches across ±δ: the data cannot tell a gap that matters from one that does not.",
    NOT_ESTIMABLE: "too few observations in a group to estimate the gap at all.",
}


def verdict_legend() -> list[str]:
    """'**gap larger than δ (significant)**: the whole 95% interval ...', one line per verdict."""
    return [f"**{verdict}**: {meaning}" for verdict, meaning in VERDICT_LEGEND.items()]
