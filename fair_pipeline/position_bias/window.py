"""Every position-bias estimator over a training window of daily mart partitions (DuckDB glue, no Dagster).

The asset's window is the calendar span its partition mapping declares (`partition_window`); without a partition,
`training_window` takes the newest `window_days` partitions holding data (`fair_pipeline.platform.windows`).

`estimate_all_methods` runs each estimator on the window's aggregates and keeps, per method, either the curve
or the reason it is not estimable (e.g. no adjacent_swap traffic): one missing policy never hides the others.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import warnings

import pandas as pd

from fair_pipeline.platform.windows import DEFAULT_MIN_DAYS, PartitionWindow, calendar_window, newest_partitions
from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.position_bias.estimators import DEFAULT_TRUNCATE, METHODS, PositionBiasWarning
from fair_pipeline.position_bias.sql import SCORE_BINS_TABLE, SWAP_CELLS_TABLE, estimate_position_bias_sql

DEFAULT_WINDOW_DAYS = 7


class TrainingWindowError(PositionBiasInputError):
    """No partitions to estimate from (marts missing or empty before the requested end)."""


TrainingWindow = PartitionWindow  # the name the position-bias code and its tests use


@dataclasses.dataclass(frozen=True)
class MethodEstimate:
    """One estimator's outcome: its curve, or why it could not run (`curve` is None then)."""

    method: str
    curve: pd.DataFrame | None
    reason: str = ""

    @property
    def estimable(self) -> bool:
        return self.curve is not None

    @property
    def warnings(self) -> list[str]:
        return list(self.curve.attrs.get("warnings", [])) if self.curve is not None else []

    @property
    def not_estimable_positions(self) -> list[int]:
        if self.curve is None:
            return []
        return self.curve.loc[self.curve["weight"].isna(), "position"].astype(int).tolist()


def training_window(con, window_days: int = DEFAULT_WINDOW_DAYS, end: dt.date | str | None = None) -> TrainingWindow:
    """The newest `window_days` partitions with data in either position-bias mart on or before `end` (default:
    the newest partition). No hold-out: see `fair_pipeline.platform.windows` for why position bias may use every day."""
    return newest_partitions(con, (SCORE_BINS_TABLE, SWAP_CELLS_TABLE), window_days, end, error=TrainingWindowError,
                             hint="materialize the position-bias marts for some days first")


def partition_window(con, first: dt.date, last: dt.date, min_days: int = DEFAULT_MIN_DAYS) -> TrainingWindow:
    """The calendar days first..last of the position-bias marts (an asset partition's mapped window); days
    without data are named in `missing`, fewer than `min_days` days with data is "not enough data"."""
    return calendar_window(con, (SCORE_BINS_TABLE, SWAP_CELLS_TABLE), first, last, min_days=min_days,
                           error=TrainingWindowError, hint="ingest (or backfill) the missing days")


def estimate_all_methods(
    con,
    window: TrainingWindow,
    methods: tuple[str, ...] = METHODS,
    truncate: int | None = DEFAULT_TRUNCATE,
    bin_width: float | str = "auto",
    level: float = 0.95,
) -> dict[str, MethodEstimate]:
    """Each method's curve over the window, or the reason it is not estimable (the message names the policy)."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise PositionBiasInputError(f"unknown methods {unknown}; expected some of {list(METHODS)}")
    results = {}
    for method in methods:
        try:
            with warnings.catch_warnings():
                # The curve keeps its warnings in attrs["warnings"]; they are reported there, not on stderr.
                warnings.simplefilter("ignore", PositionBiasWarning)
                curve = estimate_position_bias_sql(
                    con, method, window.first, window.last, truncate=truncate, bin_width=bin_width, level=level
                )
        except PositionBiasInputError as error:
            results[method] = MethodEstimate(method, None, str(error))
            continue
        results[method] = MethodEstimate(method, curve)
    return results
