"""Day folders of the landing zone (`<source>/date=YYYY-MM-DD/`): the one parser of their names, shared by ingestion
(which days to load) and the daily partitions (the first landed day)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

DAY_FOLDER_PREFIX = "date="


class LandingFileError(ValueError):
    """A landing file ingestion refuses as a whole; the message names the file (and the column, where there is one)."""


def folder_day(folder: Path) -> dt.date | None:
    """The day of a `date=YYYY-MM-DD` folder (of logs or of a catalogue delivery); None for a folder not named
    `date=...`. A `date=` folder whose rest is not exactly a YYYY-MM-DD day (`date=2026-13-01`, `date=20260101`,
    `date=2026-1-5`) raises LandingFileError naming it: it was meant as a day, so no reader may skip it or file its
    rows under another partition."""
    folder = Path(folder)
    if not folder.name.startswith(DAY_FOLDER_PREFIX):
        return None
    text = folder.name.removeprefix(DAY_FOLDER_PREFIX)
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        day = None
    if day is None or day.isoformat() != text:  # fromisoformat also takes 20260101 and 2026-W01-1
        raise LandingFileError(f"landing folder {folder} is not named date=YYYY-MM-DD (a day such as 2026-01-31)")
    return day
