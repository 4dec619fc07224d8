"""Builds the fairness report from its sections and writes it as self-contained HTML + Markdown."""
from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fair_pipeline import charts
from fair_pipeline.audit.stats.equivalence import counts_sentence, verdict_counts
from fair_pipeline.reporting.model import (
    ALPHA,
    Figure,
    Finding,
    ReportInputs,
    Section,
    SectionContent,
    SectionSpec,
    StageMissing,
    Table,
    Text,
)

HTML_NAME = "fairness_report.html"
MARKDOWN_NAME = "fairness_summary.md"
FINDINGS_NAME = "findings.json"
# The summary leads with the group gaps larger than their margin δ, then the count of every verdict, then the
# other headlines in this order. A gap that is significant but within ±δ is not listed as significant.
_LEADING = "gap larger than δ"
_STATUS_ORDER = ("significant", "not significant", "within ±δ", "equivalent", "inconclusive", "not estimable", "info")
_STATUS_HEADINGS = {
    _LEADING: "Group gaps larger than δ (significant and beyond the practical margin)",
    "significant": f"Significant at the {ALPHA:.0%} level",
    "not significant": "Not significant (no evidence of a difference)",
    "within ±δ": "Significant but within ±δ (real, too small to matter)",
    "equivalent": "Equivalent within ±δ (TOST)",
    "inconclusive": "Inconclusive (the data cannot tell whether the gap exceeds δ)",
    "not estimable": "Not estimable (too little data to say)",
    "info": "Facts",
}


@dataclasses.dataclass
class Report:
    generated_at: str
    sections: list[Section]
    decision: SectionContent | None = None  # the first screen (reporting.decision)
    registry_read_at: str | None = None  # when `fair-ranker@champion` was read from the registry; None: not read

    @property
    def header(self) -> str:
        read = f"; `fair-ranker@champion` read from the MLflow registry {self.registry_read_at}" if self.registry_read_at else ""
        return f"Generated {self.generated_at}{read}"

    @property
    def available(self) -> list[Section]:
        return [s for s in self.sections if s.available]

    @property
    def missing(self) -> list[Section]:
        return [s for s in self.sections if not s.available]

    def findings(self) -> list[tuple[str, Finding]]:
        return [(s.spec.title, f) for s in self.available for f in s.content.findings]

    def verdicts(self) -> list[str]:
        """The verdict of every group comparison of every section (audit.stats.equivalence.VERDICTS)."""
        return [v for s in self.available for v in s.content.verdicts]

    def verdict_counts(self) -> dict[str, int]:
        return verdict_counts(self.verdicts())

    def metrics(self) -> dict[str, float]:
        return {f"{s.spec.key}.{k}": float(v) for s in self.available for k, v in s.content.metrics.items()}

    def figures(self) -> list[Figure]:
        first = self.decision.blocks if self.decision is not None else []
        return [b for b in first if isinstance(b, Figure)] + [
            b for s in self.available for b in s.content.blocks if isinstance(b, Figure)]


@dataclasses.dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    findings: Path
    figures: list[Path]


def build_report(inputs: ReportInputs, specs: Sequence[SectionSpec] | None = None) -> Report:
    """Every section that can be built; a stage that never ran becomes a 'missing' section."""
    from fair_pipeline.reporting import sections as registry
    from fair_pipeline.reporting.decision import collect_gaps, decision

    sections = []
    for spec in registry.SECTIONS if specs is None else specs:
        try:
            sections.append(Section(spec, content=spec.build(inputs)))
        except StageMissing as missing:
            sections.append(Section(spec, missing=str(missing)))
    first = decision(inputs, collect_gaps(s.content for s in sections))
    return Report(generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), sections=sections,
                  decision=first, registry_read_at=inputs.serving.read_at if inputs.serving is not None else None)


def verdict_summary(counts: dict[str, int]) -> str:
    """'69 comparisons: 3 gaps larger than δ, 40 significant but within ±δ, ...' (audit.stats.equivalence)."""
    return counts_sentence(counts)


def summary_lines(report: Report) -> list[str]:
    """The plain-language summary as Markdown lines: first the group gaps larger than their margin δ, then how many
    comparisons got each verdict, then the other headline findings by status (each section lists all of its own)."""
    lines = []
    headlines = [(t, f) for t, f in report.findings() if f.headline]
    verdicts = report.verdicts()
    if verdicts:
        large = [(t, f) for t, f in headlines if f.status == _LEADING]
        lines += [f"**{_STATUS_HEADINGS[_LEADING]}**", ""]
        lines.extend(f"- {title}: {finding.text}" for title, finding in large)
        if not large:
            lines.append("- none: no group gap is both significant and larger than its margin δ")
        lines += ["", f"**{verdict_summary(report.verdict_counts())}** (δ = the practical margin of each metric; a "
                  "significant gap within ±δ is real but too small to matter).", ""]
    grouped = {status: [(t, f) for t, f in headlines if f.status == status] for status in _STATUS_ORDER}
    for status in _STATUS_ORDER:
        if grouped[status]:
            lines += [f"**{_STATUS_HEADINGS[status]}**", ""]
            lines.extend(f"- {title}: {finding.text}" for title, finding in grouped[status])
            lines.append("")
    tested = [f for _, f in report.findings() if f.status != "info"]
    if not tested:
        lines += ["**No statistical test could be run yet** (the stages that produce them have not run).", ""]
    elif len(report.findings()) > len(headlines):
        lines += ["The sections below list every comparison and test with its estimate, 95% CI, p-value, margin δ, "
                  "verdict and sample sizes.", ""]
    if report.missing:
        lines += ["**Missing sections** (their stage has never run)", ""]
        lines.extend(f"- {s.spec.title}: {s.missing}" for s in report.missing)
        lines.append("")
    return lines


def _inline(text: str) -> str:
    """Escape, then render the little Markdown the report uses: `code` and **bold**."""
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


_COUNT_COLUMN = re.compile(r"^(n|n_\w+|\w*_count|count\w*|rank|rows|\w+_rows|pairs|queries|impressions.*|partitions|"
                           r"positions compared|CI covers truth|groups|\w*version|paired_\w+|.+ (accepted|rejected)|clicks|items|"
                           r"requests|candidates)$", re.IGNORECASE)


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as rendered: count columns (n, n_pos, rows, pairs, ...) whose values are whole numbers shown as
    integers with thousands separators ('25,000', never '25000.0' after a float round trip), NaN as 'n/a'."""
    out = frame.copy()
    for column in out.columns:
        if not _COUNT_COLUMN.match(str(column)) or pd.api.types.is_integer_dtype(out[column]):
            continue
        # A table may hold numbers as objects (None for missing): compare them as floats.
        values = pd.to_numeric(out[column], errors="coerce")
        if values.isna().sum() > out[column].isna().sum():
            continue  # text in a count column (e.g. 'winner'): leave it as it is
        finite = values.dropna()
        if len(finite) and (finite == finite.round()).all():
            out[column] = values.map(lambda v: "n/a" if pd.isna(v) else f"{int(v):,}")
    return out


def _table_html(table: Table) -> str:
    body = display_frame(table.frame).to_html(index=False, escape=True, na_rep="n/a", border=0, classes="data")
    caption = f"<p class='caption'>{_inline(table.caption)}</p>" if table.caption else ""
    return caption + f"<div class='table-wrap'>{body}</div>"


def _figure_html(figure: Figure) -> str:
    # an <img> per figure (not inline SVG): each figure stays its own document, so ids inside it cannot clash
    data = base64.b64encode(figure.svg).decode()
    return (f"<figure><img alt='{html.escape(figure.caption or figure.name)}' src='data:{charts.MEDIA_TYPE};base64,{data}'/>"
            f"<figcaption>{_inline(figure.caption)}</figcaption></figure>")


# A summary list longer than this is collapsed under its count (the first screen has the decision).
LONG_LIST = 6


def _list_html(items: list[str]) -> str:
    listed = "<ul>" + "".join(items) + "</ul>"
    return listed if len(items) <= LONG_LIST else f"<details><summary>{len(items)} items</summary>{listed}</details>"


def _summary_html(report: Report) -> str:
    parts, items = [], []
    for line in summary_lines(report):
        if not line:
            continue
        if line.startswith("- "):
            items.append(f"<li>{_inline(line[2:])}</li>")
            continue
        if items:
            parts.append(_list_html(items))
            items = []
        parts.append(f"<p>{_inline(line)}</p>")
    if items:
        parts.append(_list_html(items))
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444} h2{margin-top:2em;border-bottom:1px solid #ccc}
table.data{border-collapse:collapse;font-size:0.8em;margin:0.5em 0} table.data td,table.data th{border:1px solid #ddd;padding:2px 6px}
table.data td{white-space:nowrap} .table-wrap{overflow-x:auto;max-width:100%}
table.data th{background:#f3f3f3} .caption{font-weight:600;margin-bottom:0.2em} .source{color:#666;font-size:0.85em}
.missing{background:#fff4e5;border-left:4px solid #f0a030;padding:0.5em 1em} figure{margin:1em 0} img{max-width:100%}
nav li{margin:0.1em 0} code{background:#f3f3f3;padding:0 3px}
#decision{background:#f7f9fc;border:1px solid #c9d4e5;padding:0 1em 0.5em} details{margin:0.5em 0} summary{cursor:pointer;font-weight:600}
"""


def _group_note() -> str:
    from fair_pipeline.platform import settings
    from fair_pipeline.reporting.sections import group_note

    return group_note(settings.group_labels()).markdown


# A table longer than this is collapsed under its caption (the figure above it shows the same numbers).
LONG_TABLE = 12


def _blocks_html(blocks) -> list[str]:
    out = []
    for block in blocks:
        if isinstance(block, Text):
            out.append(f"<p>{_inline(block.markdown)}</p>")
        elif isinstance(block, Table) and len(block.frame) > LONG_TABLE:
            out.append(f"<details><summary>{_inline(block.caption or 'table')} ({len(block.frame):,} rows)</summary>"
                       f"{_table_html(dataclasses.replace(block, caption=''))}</details>")
        elif isinstance(block, Table):
            out.append(_table_html(block))
        else:
            out.append(_figure_html(block))
    return out


def _findings_html(findings: list[Finding]) -> str:
    """Every finding of a section, collapsed under a count: the figure and tables come first."""
    items = "".join(f"<li>[{html.escape(f.status)}] {_inline(f.text)}</li>" for f in findings)
    return f"<details class='findings'><summary>Findings ({len(findings)})</summary><ul>{items}</ul></details>"


def render_html(report: Report) -> str:
    nav = "".join(
        f"<li><a href='#{s.spec.key}'>{html.escape(s.spec.title)}</a>{'' if s.available else ' (missing)'}</li>"
        for s in report.sections
    )
    body = [f"<h1>Fairness report</h1><p class='source'>{_inline(report.header)}</p>"]
    if report.decision is not None:
        body += ["<section id='decision'><h2>Decision first: what is deployed, what changed, the gaps beyond δ</h2>",
                 *_blocks_html(report.decision.blocks), "</section>"]
    body += [f"<p>{_inline(_group_note())}</p>", f"<nav><ul>{nav}</ul></nav>", "<h2 id='summary'>Summary</h2>",
             _summary_html(report)]
    for section in report.sections:
        body.append(f"<h2 id='{section.spec.key}'>{html.escape(section.spec.title)}</h2>")
        if not section.available:
            body.append(f"<p class='missing'>Missing: {_inline(section.missing or '')} (stage <code>{section.spec.stage}</code>)</p>")
            continue
        if section.content.source:
            body.append(f"<p class='source'>Source: {_inline(section.content.source)}</p>")
        body += _blocks_html(section.content.blocks)
        if section.content.findings:
            body.append(_findings_html(section.content.findings))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Fairness report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")


def render_markdown(report: Report, figure_dir: str = "figures") -> str:
    lines = ["# Fairness report", "", report.header, ""]
    if report.decision is not None:
        lines += ["## Decision first: what is deployed, what changed, the gaps beyond δ", ""]
        lines += _blocks_markdown(report.decision.blocks, figure_dir)
    lines += [_group_note(), "", "## Summary", "", *summary_lines(report), ""]
    for section in report.sections:
        lines += [f"## {section.spec.title}", ""]
        if not section.available:
            lines += [f"_Missing_: {section.missing}", ""]
            continue
        if section.content.source:
            lines += [f"Source: {section.content.source}", ""]
        lines += _blocks_markdown(section.content.blocks, figure_dir)
        if section.content.findings:
            lines += ["**Findings**", "", *(f"- [{f.status}] {f.text}" for f in section.content.findings), ""]
    return "\n".join(lines)


def _blocks_markdown(blocks, figure_dir: str) -> list[str]:
    lines = []
    for block in blocks:
        if isinstance(block, Text):
            lines += [block.markdown, ""]
        elif isinstance(block, Table):
            lines += [f"**{block.caption}**", "", display_frame(block.frame).to_markdown(index=False), ""]
        else:
            lines += [f"![{block.caption}]({figure_dir}/{block.name}{charts.SUFFIX})", ""]
    return lines


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def findings_json(report: Report) -> dict:
    return {
        "generated_at": report.generated_at,
        "registry_read_at": report.registry_read_at,
        "findings": [{"section": t, "status": f.status, "text": f.text, "headline": f.headline, "verdict": f.verdict}
                     for t, f in report.findings()],
        "missing": [{"section": s.spec.title, "stage": s.spec.stage, "reason": s.missing} for s in report.missing],
        "metrics": report.metrics(),
        "verdict_counts": report.verdict_counts(),
        "verdict_summary": verdict_summary(report.verdict_counts()) if report.verdicts() else None,
    }


def write_report(report: Report, directory: Path) -> ReportFiles:
    """Write the HTML (figures embedded), the Markdown summary (+ figures/*.svg) and findings.json."""
    directory.mkdir(parents=True, exist_ok=True)
    figure_dir = directory / "figures"
    figure_dir.mkdir(exist_ok=True)
    figure_paths = []
    for figure in report.figures():
        path = figure_dir / f"{figure.name}{charts.SUFFIX}"
        _write_atomic(path, figure.svg)
        figure_paths.append(path)
    files = ReportFiles(directory / HTML_NAME, directory / MARKDOWN_NAME, directory / FINDINGS_NAME, figure_paths)
    _write_atomic(files.html, render_html(report).encode())
    _write_atomic(files.markdown, render_markdown(report).encode())
    _write_atomic(files.findings, json.dumps(findings_json(report), indent=2, default=float).encode())
    return files


def metrics_table(report: Report) -> str:
    frame = pd.DataFrame([{"figure": k, "value": v} for k, v in report.metrics().items()])
    return frame.to_markdown(index=False) if len(frame) else "(no key figures yet)"
