"""Partition windows: the calendar days a windowed stage reads, exactly as its partition mapping declares them.

Partition D of a trained stage reads the calendar days D-k..D-1 (position bias: D-k+1..D), the span its
`TimeWindowPartitionMapping` shows in the lineage view; a gap in the logs is never filled by reaching further
back. Days without data inside the window are named (`PartitionWindow.missing`), and a window with fewer than
`min_days` days holding data is refused with "not enough data" (`FAIR_PIPELINE_MIN_WINDOW_DAYS`, default 1).
Reads through the `Warehouse` interface (DuckDB or Spark; a DuckDB connection is wrapped), no Dagster.

`newest_partitions` / `holdout_window` (the newest N days holding data) remain for the unpartitioned APIs
(notebooks, `evaluation_window` without a partition), where "the newest data" is what is asked for.

Held-out training (`holdout_window`): the fairness audit evaluates the newest `holdout_days` partitions, so
the EO transform and the ranker candidates train on the partitions before them; an audit of their outputs
is then out of sample. Position bias does not hold out: its curve is a nuisance parameter of positions
alone (pooled over groups, never scored or audited), and the newest day's randomized traffic is the
scarcest input it has.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.platform.settings import DEFAULT_MIN_WINDOW_DAYS
from fair_pipeline.platform.warehouse import quote_identifier

DEFAULT_HOLDOUT_DAYS = 1  # partitions the audit evaluates and the trained stages leave out
DEFAULT_MIN_DAYS = DEFAULT_MIN_WINDOW_DAYS  # days with data a window needs (FAIR_PIPELINE_MIN_WINDOW_DAYS overrides it)
OBSERVATIONAL_TABLES = ("raw.observational_impressions",)  # "the newest partition with data" is the newest here


@dataclasses.dataclass(frozen=True)
class PartitionWindow:
    """Partitions first..last inclusive, the first and last holding data; `dates` the ones holding data;
    `held_out` the newer partitions left out for evaluation (training windows only). Calendar windows also keep
    the span their partition mapping declares (`calendar`) and its days without data (`missing`)."""

    first: dt.date
    last: dt.date
    dates: tuple[dt.date, ...]
    held_out: tuple[dt.date, ...] = ()
    missing: tuple[dt.date, ...] = ()
    calendar: tuple[dt.date, dt.date] | None = None

    @property
    def label(self) -> str:
        text = f"{self.span} ({len(self.dates)} partitions with data"
        return text + (f"; no data on {self.missing_text})" if self.missing else ")")

    @property
    def span(self) -> str:
        first, last = self.calendar or (self.first, self.last)
        return f"{first}..{last}"

    @property
    def missing_text(self) -> str:
        return ", ".join(map(str, self.missing))

    @property
    def held_out_text(self) -> str:
        if self.held_out:
            return ", ".join(map(str, self.held_out))
        return "none: trained through the newest partition (an audit of it is in-sample)"


def parse_end(end: dt.date | str | None, error: type[Exception] = ValueError) -> dt.date | None:
    """`end` as a date (None or '' stays None); a bad string raises `error` naming it."""
    if end is None or end == "":
        return None
    try:
        return dt.date.fromisoformat(str(end)[:10])
    except ValueError as exc:
        raise error(f"window end {end!r} is not a date (YYYY-MM-DD)") from exc


def _check_days(days: int, name: str, error: type[Exception], minimum: int = 1) -> int:
    if int(days) != days or days < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise error(f"{name}={days!r} must be {kind}")
    return int(days)


def _exists(con, table: str) -> bool:
    return as_warehouse(con).table_exists(tuple(table.split(".")))


def _existing(con, tables: Sequence[str], error: type[Exception], hint: str) -> list[str]:
    found = [t for t in tables if _exists(con, t)]
    if not found:
        raise error(f"{' / '.join(tables)} does not exist{'; ' + hint if hint else ''}")
    return found


def partition_dates(con, tables: Sequence[str], end: dt.date | None = None,
                    start: dt.date | None = None) -> list[dt.date]:
    """Distinct partition dates in start..end (either bound may be None) in any of `tables` ('schema.name';
    missing ones skipped), ascending."""
    parts = [
        f"SELECT DISTINCT partition_date FROM {'.'.join(map(quote_identifier, t.split('.')))}"
        f" WHERE ($end IS NULL OR partition_date <= $end) AND ($start IS NULL OR partition_date >= $start)"
        for t in tables if _exists(con, t)
    ]
    if not parts:
        return []
    dates = as_warehouse(con).query_arrow(" UNION ".join(parts) + " ORDER BY 1", {"end": end, "start": start})
    return dates.column(0).to_pylist()


def newest_partitions(con, tables: str | Sequence[str], days: int, end: dt.date | str | None = None, *,
                      error: type[Exception] = ValueError, hint: str = "") -> PartitionWindow:
    """The newest `days` partitions with data in `tables` on or before `end`; `error` (the caller's
    exception type) names the tables and the end when there is none."""
    tables = [tables] if isinstance(tables, str) else list(tables)
    days = _check_days(days, "window_days", error)
    end_date = parse_end(end, error)
    dates = partition_dates(con, _existing(con, tables, error, hint), end_date)
    if not dates:
        where = f" on or before {end_date}" if end_date else ""
        raise error(f"no partitions{where} in {' / '.join(tables)}{'; ' + hint if hint else ''}")
    chosen = tuple(dates[-days:])
    return PartitionWindow(chosen[0], chosen[-1], chosen)


def holdout_window(con, tables: str | Sequence[str], days: int, end: dt.date | str | None = None,
                   holdout_days: int = DEFAULT_HOLDOUT_DAYS, *, error: type[Exception] = ValueError,
                   hint: str = "") -> PartitionWindow:
    """The newest `days` partitions with data before the newest `holdout_days` ones on or before `end`
    (those are left for the audit's evaluation window). holdout_days=0: train through `end` (in-sample)."""
    holdout_days = _check_days(holdout_days, "holdout_days", error, minimum=0)
    if holdout_days == 0:
        return newest_partitions(con, tables, days, end, error=error, hint=hint)
    reserved = newest_partitions(con, tables, holdout_days, end, error=error, hint=hint)
    before = reserved.first - dt.timedelta(days=1)
    tables = [tables] if isinstance(tables, str) else list(tables)
    if not partition_dates(con, tables, before):
        raise error(
            f"training cannot be held out: {' / '.join(tables)} has only {len(reserved.dates)} partition(s) on or "
            f"before {parse_end(end, error) or reserved.last} ({', '.join(map(str, reserved.dates))}) and "
            f"holdout_days={holdout_days} "
            "leaves them to the audit's evaluation window; ingest more days, or set holdout_days=0 to train on "
            "them (the fairness audit then flags this stage's outputs as in-sample)"
        )
    window = newest_partitions(con, tables, days, before, error=error, hint=hint)
    return dataclasses.replace(window, held_out=reserved.dates)


def calendar_window(con, tables: str | Sequence[str], first: dt.date, last: dt.date, *,
                    min_days: int = DEFAULT_MIN_DAYS, held_out: tuple[dt.date, ...] = (),
                    error: type[Exception] = ValueError, hint: str = "") -> PartitionWindow:
    """The calendar days first..last (`calendar`), those of them holding data in `tables` (`dates`, whose first and
    last are the window's `first` and `last`), and those without (`missing`: named, never replaced by older days).
    Fewer than `min_days` days with data raise `error` saying "not enough data"."""
    tables = [tables] if isinstance(tables, str) else list(tables)
    min_days = _check_days(min_days, "min_days", error)
    dates = tuple(partition_dates(con, _existing(con, tables, error, hint), last, first))
    calendar = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    missing = tuple(d for d in calendar if d not in set(dates))
    if len(dates) < min_days:
        found = f"{len(dates)} day(s) with data ({', '.join(map(str, dates))})" if dates else "no day with data"
        training = f"partition {held_out[-1]} has nothing to train on: " if held_out else ""
        why = " (partition D trains on the days before D and is evaluated on D)" if held_out else ""
        raise error(
            f"{training}not enough data in the window {first}..{last}: {' / '.join(tables)} has {found}, fewer "
            f"than the minimum of {min_days} (FAIR_PIPELINE_MIN_WINDOW_DAYS); the window never reaches further "
            f"back{why}{'; ' + hint if hint else ''}"
        )
    return PartitionWindow(dates[0], dates[-1], dates, held_out=held_out, missing=missing, calendar=(first, last))


def window_before(con, tables: str | Sequence[str], days: int, day: dt.date | str, *,
                  min_days: int = DEFAULT_MIN_DAYS, error: type[Exception] = ValueError,
                  hint: str = "") -> PartitionWindow:
    """The training window of asset partition `day`: the calendar days day-`days`..day-1, as
    `platform.partitions.days_before` declares them (day D is what the audit and the selection of partition D
    evaluate, so D is held out by construction)."""
    days = _check_days(days, "window_days", error)
    day = parse_end(day, error)
    return calendar_window(con, tables, day - dt.timedelta(days=days), day - dt.timedelta(days=1),
                           min_days=min_days, held_out=(day,), error=error, hint=hint)


def window_through(con, tables: str | Sequence[str], days: int, day: dt.date | str, *,
                   min_days: int = DEFAULT_MIN_DAYS, error: type[Exception] = ValueError,
                   hint: str = "") -> PartitionWindow:
    """The calendar days day-`days`+1..day (`platform.partitions.days_through`): a nuisance estimate that may
    use day D itself."""
    days = _check_days(days, "window_days", error)
    day = parse_end(day, error)
    return calendar_window(con, tables, day - dt.timedelta(days=days - 1), day, min_days=min_days, error=error,
                           hint=hint)


def newest_partition(con, tables: Sequence[str] = OBSERVATIONAL_TABLES) -> dt.date | None:
    """The newest partition holding data in `tables` (None: none does)."""
    dates = partition_dates(con, tables)
    return dates[-1] if dates else None


def is_newest_partition(con, day: dt.date | str, tables: Sequence[str] = OBSERVATIONAL_TABLES) -> bool:
    """True when no partition after `day` holds data in `tables`: the registry aliases move only for it."""
    newest = newest_partition(con, tables)
    return newest is None or newest <= parse_end(day)
