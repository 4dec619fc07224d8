"""The position-bias tables in the warehouse, and the reader later stages use.

    marts.position_bias_curves   one row per (method, position) of every estimable method over the window;
                                 `chosen` marks the curve that feeds the EO transform and the IPW weights.
    marts.position_bias_methods  one row per method: estimable or why not, not-estimable positions, warnings,
                                 the sample it used (impressions, clicks) and its settings.

Rows are keyed by the asset partition D that estimated them (`partition_date`; its window is the
`window_days` partitions through D); both tables' rows of D are replaced together in one transaction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.platform.partition_store import load_partition, replace_partition
from fair_pipeline.position_bias.aggregates import PositionBiasInputError
from fair_pipeline.position_bias.estimators import METHOD_POLICY, position_ranges
from fair_pipeline.position_bias.window import MethodEstimate, TrainingWindow

CURVES_TABLE = "marts.position_bias_curves"
METHODS_TABLE = "marts.position_bias_methods"

CURVE_COLUMNS = ["position", "weight", "ci_low", "ci_high", "se"]


def curves_frame(window: TrainingWindow, estimates: dict[str, MethodEstimate], chosen: str) -> pd.DataFrame:
    """Long table of every estimable curve (the rows of CURVES_TABLE)."""
    frames = []
    for method, estimate in estimates.items():
        if not estimate.estimable:
            continue
        curve = estimate.curve
        frames.append(
            curve.assign(
                window_start=window.first,
                window_end=window.last,
                method=method,
                chosen=method == chosen,
                level=float(curve.attrs.get("level", 0.95)),
            )
        )
    columns = ["window_start", "window_end", "method", "chosen", "position", "weight", "ci_low", "ci_high", "se",
               "impressions", "clicks", "truncated", "level"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def methods_frame(window: TrainingWindow, estimates: dict[str, MethodEstimate], chosen: str) -> pd.DataFrame:
    """One row per method (the rows of METHODS_TABLE)."""
    rows = []
    for method, estimate in estimates.items():
        curve = estimate.curve
        attrs = curve.attrs if curve is not None else {}
        rows.append(
            {
                "window_start": window.first,
                "window_end": window.last,
                "partitions": len(window.dates),
                "method": method,
                "policy": METHOD_POLICY[method],
                "chosen": method == chosen,
                "estimable": estimate.estimable,
                "reason": estimate.reason or None,
                "not_estimable_positions": position_ranges(estimate.not_estimable_positions) or None,
                "warnings": " | ".join(estimate.warnings) or None,
                "impressions": int(curve["impressions"].sum()) if curve is not None else None,
                "clicks": int(curve["clicks"].sum()) if curve is not None else None,
                "bin_width": attrs.get("bin_width"),
                "truncate": attrs.get("truncate"),
            }
        )
    return pd.DataFrame(rows)


def write_estimates(con, window: TrainingWindow, estimates: dict[str, MethodEstimate], chosen: str,
                    partition=None) -> int:
    """Replace partition `partition`'s rows (default: the window's last day) of both tables in one transaction;
    returns the number of curve rows written."""
    written = replace_partition(
        con,
        {CURVES_TABLE: curves_frame(window, estimates, chosen), METHODS_TABLE: methods_frame(window, estimates, chosen)},
        partition or window.last,
    )
    return written[CURVES_TABLE]


_HINT = "materialize the position_bias asset for that partition first"


def load_curves(con, partition=None) -> pd.DataFrame:
    """Every curve (all methods) of one partition (default: the newest), ordered by method and position (the
    fairness report's position-bias section)."""
    frame = load_partition(con, CURVES_TABLE, partition, error=PositionBiasInputError, hint=_HINT)
    return frame.sort_values(["method", "position"]).reset_index(drop=True)


def load_chosen_position_bias(con, partition=None) -> pd.DataFrame:
    """The chosen curve of partition `partition` (default: the newest stored): `position, weight, ci_low, ci_high, se` (position 1..K, weight finite and > 0).

    `attrs` carries `method`, `window_start`, `window_end` and `level`. Raises `PositionBiasInputError`
    naming the positions when the stored curve has a weight downstream stages cannot use."""
    stored = load_partition(con, CURVES_TABLE, partition, error=PositionBiasInputError, hint=_HINT)
    frame = stored.loc[stored["chosen"].astype(bool),
                       ["method", "window_start", "window_end", "level", "clicks", *CURVE_COLUMNS]].sort_values("position")
    if frame.empty:
        raise PositionBiasInputError(f"{CURVES_TABLE} holds no chosen curve; re-materialize the position_bias asset")
    weights = frame["weight"].to_numpy(dtype=float)
    bad = ~(np.isfinite(weights) & (weights > 0))
    if bad.any():
        raise PositionBiasInputError(
            f"the chosen position-bias curve ({frame['method'].iloc[0]}) has no usable weight at positions "
            f"{position_ranges(frame.loc[bad, 'position'].astype(int).tolist())} (not estimable); collect more traffic or "
            "choose another method"
        )
    if frame["position"].tolist() != list(range(1, len(frame) + 1)):
        raise PositionBiasInputError(f"the chosen curve's positions are not 1..K: {frame['position'].tolist()}")
    curve = frame[CURVE_COLUMNS].reset_index(drop=True)
    first = frame.iloc[0]
    curve.attrs.update(
        method=str(first["method"]),
        window_start=str(pd.Timestamp(first["window_start"]).date()),
        window_end=str(pd.Timestamp(first["window_end"]).date()),
        level=float(first["level"]),
        clicks=int(pd.to_numeric(frame["clicks"]).fillna(0).sum()),  # behind the curve: the df of its uncertainty
    )
    return curve
