"""The fairness report: sections built from each stage's output, rendered to offline HTML + Markdown."""
from fair_pipeline.reporting.build import Report, ReportFiles, build_report, render_html, render_markdown, summary_lines, write_report
from fair_pipeline.reporting.model import (
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
from fair_pipeline.reporting.formatting import significance_findings, with_ci
from fair_pipeline.reporting.sections import SECTIONS, register_section

__all__ = [
    "SECTIONS", "Figure", "Finding", "Report", "ReportFiles", "ReportInputs", "Section", "SectionContent", "SectionSpec",
    "StageMissing", "Table", "Text", "build_report", "register_section", "render_html", "render_markdown", "significance_findings",
    "summary_lines", "with_ci", "write_report",
]
