"""Dated item catalogues: which delivery holds on which day, in the landing folder and in SQL.

A catalogue delivered for day D lives in `landing/items/date=D/*.parquet` and holds from D until the day of the
next delivery; the oldest delivery also holds on every earlier day (it is the best catalogue those days have).
Partition D of every stage reads the catalogue that holds on D (`items_as_of`), so a delivery for one day never
changes what a day with its own, newer delivery reads.

Files directly under `landing/items/` form an undated catalogue (homes from before catalogues were dated, or a
catalogue that never changes). Alone, it holds on every day. Next to dated deliveries it is what the days before
the first of them were read with, so it is pinned at the first day with landed logs (`pin_undated_catalogue`
moves it to `items/date=<that day>/`): a later delivery for an older day then changes only the days before it.

Deliveries may differ in their columns (a feature added in a later delivery, or dropped from it); `raw.items` holds
the union, a row NULL in the columns its delivery lacks. The features of partition D are the columns of the delivery
that holds on D (`delivered_columns`: those with a value in it), so a column another day's delivery adds or drops
never changes D's inputs.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import filecmp
import os
from pathlib import Path

from fair_pipeline.ingestion import contract
from fair_pipeline.ingestion.landing import (DAY_FOLDER_PREFIX, LandingFileError, checked_landing_files, folder_day,
                                           landed_dates)
from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.platform.warehouse import quote_identifier

# Columns raw.items adds to every delivered row: the delivery's day (NULL: undated) and the days it holds on,
# valid_from <= D < valid_until.
CATALOGUE_DATE, VALID_FROM, VALID_UNTIL = "catalogue_date", "valid_from", "valid_until"
DATE_COLUMNS = (CATALOGUE_DATE, VALID_FROM, VALID_UNTIL)
ALWAYS_FROM, ALWAYS_UNTIL = dt.date(1, 1, 1), dt.date(9999, 12, 31)
ITEMS_VIEW = ("staging", "stg_items")


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One catalogue delivery: its day (None: undated), its files, and the days it holds on (from <= D < until)."""

    day: dt.date | None
    files: tuple[Path | str, ...]  # paths, or URIs for a landing read through Spark
    valid_from: dt.date = ALWAYS_FROM
    valid_until: dt.date = ALWAYS_UNTIL

    @property
    def label(self) -> str:
        return f"the catalogue delivered for {self.day}" if self.day else "the undated catalogue"


def items_folder(landing: Path) -> Path:
    return Path(landing) / contract.ITEMS_DIR


def _by_day(landing: Path) -> dict[dt.date | None, list[Path]]:
    """Every readable catalogue file by its delivery day (None: undated); any unreadable entry raises by name."""
    folder = items_folder(landing)
    found: dict[dt.date | None, list[Path]] = {}
    for path in checked_landing_files(folder):
        first = path.relative_to(folder).parts[0]
        day = folder_day(folder / first) if first != path.name else None
        found.setdefault(day, []).append(path)
    return found


def deliveries(landing: Path) -> list[Delivery]:
    """The catalogue deliveries in day order with the days each holds on (module docstring). An undated catalogue
    next to dated ones is refused until `pin_undated_catalogue` has dated it."""
    return deliveries_of(_by_day(landing), items_folder(landing))


def deliveries_of(found: dict, folder) -> list[Delivery]:
    """The deliveries of catalogue files found by delivery day (None: undated) in `folder` (a path or a URI), as
    `deliveries` dates them."""
    if None in found and len(found) > 1:
        raise LandingFileError(
            f"{folder} has an undated catalogue ({', '.join(str(p).rsplit('/', 1)[-1] for p in found[None])}) next "
            "to dated ones (date=YYYY-MM-DD/); deliver it under the day it holds from")
    days = sorted((d for d in found if d is not None))
    if not days:
        return [Delivery(None, tuple(found[None]))] if found else []
    starts = [ALWAYS_FROM, *days[1:]]
    ends = [*days[1:], ALWAYS_UNTIL]
    return [Delivery(day, tuple(found[day]), start, end) for day, start, end in zip(days, starts, ends)]


UNDATED = "undated"


def holding_delivery(day: str, delivery_days: list[str]) -> str | None:
    """Which of the deliveries (their days, YYYY-MM-DD, or `UNDATED`) holds on `day`, by the rule of `deliveries`: the
    newest delivered on or before it, else the oldest; an undated catalogue alone holds on every day. None: none."""
    dated = sorted(d for d in delivery_days if d != UNDATED)
    if not dated:
        return UNDATED if UNDATED in delivery_days else None
    return max((d for d in dated if d <= day), default=dated[0])


def _as_date(day: dt.date | str) -> dt.date:
    return day if isinstance(day, dt.date) else dt.date.fromisoformat(str(day)[:10])


def delivery_on(landing: Path, day: dt.date | str | None = None) -> Delivery | None:
    """The delivery that holds on `day` in the landing folder (None: the newest one); None without any catalogue."""
    found = deliveries(landing)
    if not found or day is None:
        return found[-1] if found else None
    on = _as_date(day)
    return next(d for d in found if d.valid_from <= on < d.valid_until)


def first_landed_day(landing: Path) -> dt.date | None:
    """The oldest day with landed logs of any source (None: no logs yet)."""
    dates = [d for source in contract.SOURCES for d in landed_dates(landing, source)]
    return dt.date.fromisoformat(min(dates)) if dates else None


def pin_undated_catalogue(landing: Path) -> Path | None:
    """Date an undated catalogue that sits next to dated deliveries: it moves to `items/date=<first landed day>/`,
    the day it has held from. Returns the folder it moved to (None: nothing to
    pin). Refuses, naming both, when that folder already holds a different catalogue."""
    found = _by_day(landing)
    if None not in found or len(found) == 1:
        return None
    return _pin(landing, found[None])


def pin_before_delivery(landing: Path) -> Path | None:
    """Before a dated delivery is written: pin an undated catalogue so that it keeps holding on the days it held."""
    found = _by_day(landing)
    return _pin(landing, found[None]) if None in found else None


def _pin(landing: Path, files: list[Path]) -> Path:
    folder = items_folder(landing)
    first = first_landed_day(landing)
    if first is None:
        raise LandingFileError(f"the undated catalogue in {folder} cannot be dated (no landed logs yet): deliver it "
                               "under items/date=YYYY-MM-DD/, the day it holds from")
    target = folder / f"{DAY_FOLDER_PREFIX}{first}"
    present = sorted(checked_landing_files(target)) if target.is_dir() else []
    if present:
        same = len(present) == len(files) and all(
            a.name == b.name and filecmp.cmp(a, b, shallow=False) for a, b in zip(present, sorted(files)))
        if not same:
            raise LandingFileError(
                f"the undated catalogue in {folder} holds from {first} (the first landed day), but {target} already "
                "holds another catalogue; move one of them to the day it holds from")
        for path in files:
            path.unlink()
        return target
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        destination = target / path.relative_to(folder)
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, destination)  # a rename: readers see the file in one place or the other
    return target


def items_as_of(con, day: dt.date | str | None) -> tuple[str, dict]:
    """(relation, parameters): staging.stg_items as of partition `day` (None: the newest catalogue), to use in
    FROM / JOIN with its parameters bound. A catalogue without the date columns (one made by hand) is read whole."""
    engine = as_warehouse(con)
    view = ".".join(map(quote_identifier, ITEMS_VIEW))
    if VALID_FROM not in engine.table_columns(ITEMS_VIEW):
        return view, {}
    on = ALWAYS_UNTIL - dt.timedelta(days=1) if day is None else _as_date(day)
    return (f"(SELECT * FROM {view} WHERE {VALID_FROM} <= $catalogue_day AND $catalogue_day < {VALID_UNTIL})",
            {"catalogue_day": on})


def delivered_columns(con, day: dt.date | str | None, columns: list[str]) -> list[str]:
    """The `columns` (in their order) that the catalogue holding on `day` delivered: those with at least one value
    in its rows. A column the delivery lacks reads as NULL in every row (`raw.items` is the union of deliveries), and
    one delivered empty can't serve as a feature either."""
    if not columns:
        return []
    relation, params = items_as_of(con, day)
    counts = ", ".join(f"count({quote_identifier(c)}) AS n{k}" for k, c in enumerate(columns))
    row = as_warehouse(con).query_arrow(f"SELECT {counts} FROM {relation} AS i", params).to_pylist()[0]
    return [c for k, c in enumerate(columns) if row[f"n{k}"]]
