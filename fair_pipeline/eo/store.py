"""The fitted EO transforms in the warehouse (glue for the `eo_transform` asset; no Dagster here).

    marts.eo_transforms   one row per (training window, variant): `weighted` (clicks weighted by 1 / ŵ_position
                          of the chosen position-bias curve, Theorem 1) and `unweighted` (Lemma 1, for
                          comparison). `transform_json` is the exact `WeightedCDFTransformer.to_json()`; a variant
                          that could not be fitted keeps `estimable = false` and the reason instead.

Re-fitting a window replaces that window's rows; readers take the newest fit (`fitted_at`).
"""
from __future__ import annotations

import dataclasses
import datetime as dt

import pandas as pd

from fair_pipeline.eo.aggregate import EOInputError
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.platform.warehouse import table_exists, transaction

TRANSFORMS_TABLE = "marts.eo_transforms"
VARIANTS = ("weighted", "unweighted")

_DDL = f"""CREATE TABLE IF NOT EXISTS {TRANSFORMS_TABLE} (
    window_start DATE NOT NULL,
    window_end DATE NOT NULL,
    partitions INTEGER NOT NULL,
    variant VARCHAR NOT NULL,            -- weighted | unweighted
    position_bias_method VARCHAR,        -- the chosen curve behind the weights (NULL: unit weights)
    estimable BOOLEAN NOT NULL,
    reason VARCHAR,                      -- why not estimable
    n_positives BIGINT,                  -- clicks behind the per-group CDFs (all groups)
    transform_json VARCHAR,              -- WeightedCDFTransformer.to_json(); NULL when not estimable
    fitted_at TIMESTAMP NOT NULL,
    dagster_run_id VARCHAR
)"""


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
) -> int:
    """Replace the window's rows with `fits` ({variant: fitted transform, or the reason it is not estimable})."""
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
    with transaction(con):
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        con.execute(_DDL)
        con.execute(
            f"DELETE FROM {TRANSFORMS_TABLE} WHERE window_start = $start AND window_end = $end",
            {"start": window_start, "end": window_end},
        )
        con.register("_eo_transforms", frame)
        try:
            con.execute(f"INSERT INTO {TRANSFORMS_TABLE} BY NAME SELECT * FROM _eo_transforms")
        finally:
            con.unregister("_eo_transforms")
    return len(frame)


def load_latest_transforms(con) -> dict[str, StoredTransform]:
    """{variant: StoredTransform} of the newest fit; raises EOInputError when nothing was fitted yet."""
    if not table_exists(con, *TRANSFORMS_TABLE.split(".")):
        raise EOInputError(f"{TRANSFORMS_TABLE} does not exist; materialize the eo_transform asset first")
    # One fit = one (window, fitted_at); take the newest one's rows.
    frame = con.execute(
        f"SELECT t.* FROM {TRANSFORMS_TABLE} t JOIN ("
        f"  SELECT window_start, window_end, fitted_at FROM {TRANSFORMS_TABLE} ORDER BY fitted_at DESC LIMIT 1"
        ") newest USING (window_start, window_end, fitted_at)"
    ).df()
    if frame.empty:
        raise EOInputError(f"{TRANSFORMS_TABLE} is empty; materialize the eo_transform asset first")
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


def write_evaluation(
    con, per_group: pd.DataFrame, window_start: dt.date, window_end: dt.date, held_out_day: dt.date, run_id: str | None
) -> int:
    """Replace marts.eo_evaluation with the per-method x group table of the newest SIMULATION study."""
    frame = per_group.assign(
        simulation=True, window_start=window_start, window_end=window_end, held_out_day=held_out_day, dagster_run_id=run_id
    )
    with transaction(con):
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        con.register("_eo_evaluation", frame)
        try:
            con.execute(f"CREATE OR REPLACE TABLE {EVALUATION_TABLE} AS SELECT * FROM _eo_evaluation")
        finally:
            con.unregister("_eo_evaluation")
    return len(frame)
