"""Where each partition's report lives, and `reports/latest`: a symlink to the newest partition's directory.

A backfilled (older) partition writes its own directory and leaves `latest` alone; the link is replaced
atomically (a new link renamed over the old), so a reader never sees it missing.
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

LATEST = "latest"


def partition_report_dir(reports: Path, day: dt.date) -> Path:
    return reports / day.isoformat()


def report_partitions(reports: Path) -> list[dt.date]:
    """Partitions with a report directory, ascending."""
    out = []
    for path in reports.iterdir() if reports.exists() else []:
        try:
            out.append(dt.date.fromisoformat(path.name))
        except ValueError:
            continue
    return sorted(out)


def point_latest_at(reports: Path, day: dt.date) -> dt.date:
    """Point `reports/latest` at the newest partition's report (which is `day` unless a newer one exists);
    returns the partition it points at."""
    newest = max([day, *report_partitions(reports)])
    link = reports / LATEST
    tmp = reports / f".{LATEST}.tmp-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(newest.isoformat(), target_is_directory=True)
    os.replace(tmp, link)
    return newest


def latest_report_dir(reports: Path) -> Path:
    """`reports/latest` (resolved), else the newest partition's directory, else `reports` itself (nothing yet)."""
    link = reports / LATEST
    if link.exists():
        return link.resolve()
    days = report_partitions(reports)
    return partition_report_dir(reports, days[-1]) if days else reports
