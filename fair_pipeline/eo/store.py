"""The fitted EO transforms in the warehouse (glue for the `eo_transform` asset; no Dagster here).

    marts.eo_transforms   one row per (training window, variant): `weighted` (clicks weighted by 1 / ŵ_position
                          of the chosen position-bias curve, Theorem 1) and `unweighted` (Lemma 1, for
                          comparison). `transform_json` is the exact `WeightedCDFTransformer.to_json()`; a variant
                          that could not be fitted keeps `estimable = false` and the reason instead.

Rows are keyed by the asset partition D that fitted them (`partition_date`; trained on days before D);
re-fitting D replaces exactly D's rows. Readers ask for a partition (default: the newest stored).

    marts.eo_evaluation           SIMULATION study of partition D: per (ranking method, group) exposure, merit, ...
    marts.eo_evaluation_summary   per ranking method: exposure-over-merit ratio and its SE, KS distance, CTR
"""
from __future__ import annotations

import dataclasses
import datetime as dt

import pandas as pd

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.platform.partition_store import load_partition, record_skip, replace_partition, resolve_partition

TRANSFORMS_TABLE = "marts.eo_transforms"
VARIANTS = ("weighted", "unweighted")


@dataclasses.dataclass(frozen=True)
class StoredTransform:
    """One row of marts.eo_transforms; `transform` is None when the variant was not estimable."""

    window_start: dt.date
    window_end: dt.date
    partitions: int
    variant: str
    position_bias_method: str | None
    estimable: bool
    reason: str | None
    transform: WeightedCDFTransformer | None


def write_transforms(
    con,
    window_start: dt.date,
    window_end: dt.date,
    partitions: int,
    fits: dict[str, WeightedCDFTransformer | str],
    position_bias_method: str | None,
    run_id: str | None = None,
    partition: dt.date | None = None,
) -> int:
    """Replace partition `partition`'s rows (default: the day after the window) with `fits` ({variant: fitted
    transform, or the reason it is not estimable})."""
    unknown = set(fits) - set(VARIANTS)
    if unknown:
        raise EOInputError(f"unknown transform variants {sorted(unknown)}; expected {list(VARIANTS)}")
    fitted_at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = []
    for variant, fit in fits.items():
        estimable = isinstance(fit, WeightedCDFTransformer)
        rows.append(
            {
                "window_start": window_start,
                "window_end": window_end,
                "partitions": partitions,
                "variant": variant,
                "position_bias_method": position_bias_method if variant == "weighted" else None,
                "estimable": estimable,
                "reason": None if estimable else str(fit),
                "n_positives": sum(fit.n_positives_.values()) if estimable else None,
                "transform_json": fit.to_json() if estimable else None,
                "fitted_at": fitted_at,
                "dagster_run_id": run_id,
            }
        )
    frame = pd.DataFrame(rows).astype({"n_positives": "Int64"})
    replace_partition(con, {TRANSFORMS_TABLE: frame}, partition or window_end + dt.timedelta(days=1))
    return len(frame)


def load_latest_transforms(con, partition: dt.date | str | None = None) -> dict[str, StoredTransform]:
    """{variant: StoredTransform} of partition `partition` (default: the newest stored); raises EOInputError when
    that partition was not fitted."""
    frame = load_partition(con, TRANSFORMS_TABLE, partition, error=EOInputError,
                           hint="materialize the eo_transform asset for that partition first")
    out = {}
    for row in frame.itertuples():
        out[row.variant] = StoredTransform(
            window_start=pd.Timestamp(row.window_start).date(),
            window_end=pd.Timestamp(row.window_end).date(),
            partitions=int(row.partitions),
            variant=row.variant,
            position_bias_method=row.position_bias_method if isinstance(row.position_bias_method, str) else None,
            estimable=bool(row.estimable),
            reason=row.reason if isinstance(row.reason, str) else None,
            transform=WeightedCDFTransformer.from_json(row.transform_json) if row.estimable else None,
        )
    return out


EVALUATION_TABLE = "marts.eo_evaluation"
EVALUATION_SUMMARY_TABLE = "marts.eo_evaluation_summary"
EVALUATION_TABLES = [EVALUATION_TABLE, EVALUATION_SUMMARY_TABLE]


def write_evaluation(
    con, per_group: pd.DataFrame, summary: pd.DataFrame, window_start: dt.date, window_end: dt.date,
    held_out_day: dt.date, run_id: str | None, partition: dt.date | None = None,
) -> int:
    """Replace partition `partition`'s rows (default: the held-out day) of marts.eo_evaluation (per method x group)
    and marts.eo_evaluation_summary (per method) of a SIMULATION study, in one transaction; returns the per-group
    rows written."""
    key = dict(simulation=True, window_start=window_start, window_end=window_end, held_out_day=held_out_day,
               dagster_run_id=run_id)
    written = replace_partition(con, {EVALUATION_TABLE: per_group.assign(**key),
                                      EVALUATION_SUMMARY_TABLE: summary.assign(**key)}, partition or held_out_day)
    return written[EVALUATION_TABLE]


def skip_evaluation(con, partition: dt.date, reason: str) -> None:
    """Partition `partition` of the evaluation ran and evaluated nothing (e.g. real logs: no simulator), and why."""
    record_skip(con, EVALUATION_TABLES, partition, reason)


def load_evaluation(con, partition: dt.date | str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per method x group, per method) rows of partition `partition` (default: the newest stored); raises
    EOInputError naming the partition, or why that partition evaluated nothing."""
    hint = "materialize the eo_evaluation asset for that partition first"
    day = resolve_partition(con, EVALUATION_TABLE, partition, error=EOInputError, hint=hint)
    return (load_partition(con, EVALUATION_TABLE, day),
            load_partition(con, EVALUATION_SUMMARY_TABLE, day, error=EOInputError, hint=hint))
