"""The report's window section: the calendar days partition D's stages read, exactly as their partition mappings
declare them (k = $FAIR_PIPELINE_WINDOW_DAYS), with the days without data among them named in the report body (a
gap is never filled from older days, so the report says which days are absent instead).

`days_read` restricts the descriptive sections (data volume, click-through rate) to the same days, so every
section of D's report describes D's window and day, whatever other days were ingested since.
"""
from __future__ import annotations

import datetime as dt

import pandas as pd

from fair_pipeline.platform.settings import window_days
from fair_pipeline.reporting.model import Finding, ReportInputs, SectionContent, StageMissing, Table, Text

VOLUME = ("marts", "daily_volume")


def report_day(inputs: ReportInputs) -> dt.date:
    """The report's partition, or the newest day with data when the report is not for a partition."""
    if inputs.partition is not None:
        return dt.date.fromisoformat(str(inputs.partition)[:10])
    newest = inputs.mart_sql("SELECT max(partition_date) AS day FROM marts.daily_volume", [VOLUME])["day"].iloc[0]
    if pd.isna(newest):
        raise StageMissing("marts.daily_volume is empty: no partition has been ingested")
    return pd.Timestamp(newest).date()


def days_read(inputs: ReportInputs) -> tuple[str, dict, str]:
    """(a WHERE clause keeping the days partition D's stages read, D-k..D, its parameters, how captions say it);
    ('', {}, 'all partitions') for a report that is not for a partition. Days ingested later, older or newer than
    the window, never change D's report."""
    if inputs.partition is None:
        return "", {}, "all partitions"
    day = report_day(inputs)
    first = day - dt.timedelta(days=window_days())
    return (" WHERE partition_date BETWEEN $first AND $last", {"first": first, "last": day},
            f"partitions {first}..{day}, the days this partition read")


def _calendar(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def window_days_section(inputs: ReportInputs) -> SectionContent:
    day, k = report_day(inputs), window_days()
    held = inputs.mart_sql(
        "SELECT DISTINCT partition_date, source FROM marts.daily_volume "
        "WHERE partition_date BETWEEN $first AND $last AND accepted_rows > 0",
        [VOLUME], {"first": day - dt.timedelta(days=k), "last": day})
    with_data = {(pd.Timestamp(d).date(), s) for d, s in zip(held["partition_date"], held["source"])}
    reads = [("EO transform and ranker candidates (trained on)", "observational", day - dt.timedelta(days=k),
              day - dt.timedelta(days=1)),
             ("position-bias curve", "randomized", day - dt.timedelta(days=k - 1), day),
             ("fairness audit and model selection (evaluated on)", "observational", day, day)]
    rows, findings = [], []
    for stage, source, first, last in reads:
        days = _calendar(first, last)
        missing = [d for d in days if (d, source) not in with_data]
        rows.append({"stage": stage, "calendar days": f"{first}..{last}", "source": source,
                     "days with data": len(days) - len(missing), "days without data": ", ".join(map(str, missing)) or "none"})
        if missing:
            findings.append(Finding(f"{stage}: no {source} data on {', '.join(map(str, missing))} inside {first}..{last} "
                                    f"({len(days) - len(missing)} of {len(days)} days with data); the window never "
                                    "reaches further back", "info"))
    if not findings:
        findings.append(Finding(f"every day of partition {day}'s windows holds data ({day - dt.timedelta(days=k)}.."
                                f"{day})", "info", headline=False))
    text = (f"Partition {day} is trained on the {k} calendar days before it and evaluated on {day} itself, as the "
            "partition mappings in the lineage view declare ($FAIR_PIPELINE_WINDOW_DAYS). A day without data inside "
            "a window is named here; it is never replaced by an older day.")
    return SectionContent(blocks=[Text(text), Table(pd.DataFrame(rows), "Calendar days each stage of this partition read")],
                          findings=findings, source=f"marts.daily_volume, partitions {day - dt.timedelta(days=k)}..{day}")
