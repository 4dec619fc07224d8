"""Reporting: the fairness report, built from every stage's output and rendered to offline HTML + Markdown.

`model` declares sections, findings, tables and figures and reads stage outputs from the warehouse only (the
marts, and each stage's store tables as the report tables `stored` makes); `sections`, `audit_sections`, `pairwise`,
`selection` and `trend` build the sections, `formatting` and `proportions` (pure: Wilson intervals, two-proportion
tests) format estimates with their uncertainty, `figures` draws, `build` renders and writes
`reports/fairness_report.{html,md}`, `assets` is the Dagster glue (and logs the finished report to MLflow).
Inputs: every stage's stored results. Outputs: the report files and an MLflow run. Tests: tests/reporting/.
"""
from fair_pipeline.reporting.build import (
    Report,
    ReportFiles,
    build_report,
    render_html,
    render_markdown,
    summary_lines,
    write_report,
)
from fair_pipeline.reporting.formatting import significance_findings, with_ci
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
from fair_pipeline.reporting.sections import SECTIONS, register_section

__all__ = [
    "SECTIONS", "Figure", "Finding", "Report", "ReportFiles", "ReportInputs", "Section", "SectionContent", "SectionSpec",
    "StageMissing", "Table", "Text", "build_report", "register_section", "render_html", "render_markdown", "significance_findings",
    "summary_lines", "with_ci", "write_report",
]
