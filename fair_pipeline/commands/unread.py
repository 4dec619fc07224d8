"""What in the landing zone a run will not read, named before it runs: files that are not Parquet (a CSV export
beside the day's Parquet files), folders that are not `date=YYYY-MM-DD` days, and days landed for one source but
not the other (a day is ingested only with every source). Hidden and temp names (`.x`, `_SUCCESS`) are writers'
bookkeeping and stay unnamed; files ingestion can't read at all, and `date=` folders not named as a day
(`date=2026-13-01`), fail the run by name (`ingestion.landing`)."""
from __future__ import annotations

from pathlib import Path

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import PARQUET_SUFFIX, folder_day, landed_dates

KNOWN_FOLDERS = (*contract.SOURCES, contract.ITEMS_DIR)


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _not_parquet(folder: Path) -> list[Path]:
    """Files under `folder` (its hive-style subfolders included) that ingestion never opens: not `*.parquet`."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not any(map(_hidden, parts)) and not path.name.lower().endswith(PARQUET_SUFFIX):
            found.append(path)
    return found


def unread_entries(landing: Path) -> list[str]:
    """One line per thing under `landing` that no run will read, saying why."""
    landing = Path(landing)
    if not landing.is_dir():
        return []
    lines = []
    for entry in sorted(landing.iterdir()):
        if _hidden(entry.name):
            continue
        if entry.name not in KNOWN_FOLDERS:
            lines.append(f"{entry}: not a landing folder (expected {', '.join(KNOWN_FOLDERS)})")
            continue
        if entry.is_file():
            lines.append(f"{entry}: a file where a folder is expected")
            continue
        for sub in sorted(entry.iterdir()):
            if _hidden(sub.name):
                continue
            if sub.is_dir() and folder_day(sub) is not None:
                lines += [f"{path}: not Parquet (only *.parquet files are read)" for path in _not_parquet(sub)]
            elif entry.name == contract.ITEMS_DIR and sub.is_file() and sub.name.lower().endswith(PARQUET_SUFFIX):
                continue  # an undated catalogue
            elif sub.is_file() and not sub.name.lower().endswith(PARQUET_SUFFIX):
                lines.append(f"{sub}: not Parquet (only *.parquet files are read)")
            else:
                lines.append(f"{sub}: not a day (expected date=YYYY-MM-DD/ folders)")
    per_source = {source: set(landed_dates(landing, source)) for source in contract.SOURCES}
    for day in sorted(set.union(*per_source.values()) - set.intersection(*per_source.values())):
        missing = [source for source, days in per_source.items() if day not in days]
        lines.append(f"partition {day}: no Parquet files under {', '.join(f'{s}/date={day}/' for s in missing)}, so "
                     "the day is not ingested (a day needs every source)")
    return lines


def say_unread(landing: Path) -> None:
    """Name, in the command's output, everything under `landing` that the run will not read."""
    from fair_pipeline.commands.console import say

    for line in unread_entries(landing):
        say(f"not read: {line}")
