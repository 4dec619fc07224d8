"""The end-of-run terminal summary of a report's findings.json (what `fair-pipeline run` prints last).

Quiet (the default): the verdict counts, the group gaps larger than δ and the other significant headlines,
at most `QUIET_HEADLINES` of them, each whole on one line (never cut: a cut headline can lose its interval or its
verdict), and why any section is missing. Verbose: every
headline in full. The report itself lists every test; the summary only points at what to read first.
"""
from __future__ import annotations


QUIET_HEADLINES = 6
MISSING_SHOWN = 4  # a quiet summary names up to this many missing sections (with why), else counts them
# Headlines in this order (the report's summary order); labels as printed.
LABELS = {"gap larger than δ": "GAP > δ", "significant": "SIGNIFICANT", "not significant": "not significant",
          "within ±δ": "significant, within ±δ", "equivalent": "equivalent within ±δ", "inconclusive": "inconclusive",
          "not estimable": "not estimable", "info": "fact"}
# What a quiet summary shows: the findings someone must act on.
_LOUD = ("gap larger than δ", "significant")


def _ordered_headlines(findings: list[dict]) -> list[dict]:
    headlines = [item for item in findings if item.get("headline", True)]
    return [item for status in LABELS for item in headlines if item["status"] == status]


def _missing_lines(missing: list[dict]) -> list[str]:
    # The reason is the report's own (a stage that never ran, or one that ran and had nothing estimable).
    return [f"  not in the report: {m['section']} ({m['stage']}): {m.get('reason') or 'no output'}" for m in missing]


def terminal_summary_lines(data: dict, verbose: bool = False) -> list[str]:
    """Lines to print for a findings.json `data` (see reporting.build.findings_json)."""
    headlines = _ordered_headlines(data["findings"])
    lines = []
    if data.get("verdict_summary"):
        lines.append(f"  {data['verdict_summary']} (δ = practical margin per metric)")
    shown = headlines if verbose else [item for item in headlines if item["status"] in _LOUD][:QUIET_HEADLINES]
    for item in shown:
        lines.append(f"  [{LABELS[item['status']]}] {item['section']}: {item['text']}")
    if len(shown) < len(headlines):
        lines.append(f"  … {len(headlines) - len(shown)} more headline(s) in the report (or run with --verbose)")
    tests = [item for item in data["findings"] if item["status"] in ("significant", "not significant")]
    if verbose and tests:
        significant = sum(item["status"] == "significant" for item in tests)
        lines.append(f"  {len(tests)} other tests in the report: {significant} significant at the 5% level, "
                     f"{len(tests) - significant} not significant")
    missing = _missing_lines(data.get("missing", []))
    if verbose or len(missing) <= MISSING_SHOWN:
        lines += missing
    else:
        lines.append(f"  {len(missing)} sections not in the report (stages without output); run with --verbose for why")
    return lines
