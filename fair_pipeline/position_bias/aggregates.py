"""The aggregates every position-bias estimator works on, computed in memory.

Two small tables, mirrored by SQL models in `dbt_like_sql/marts/` (same columns, same numbers):

* score bins  (`position_score_bins.sql`): impressions and clicks per policy x position x score bin, where
  `score_bin = floor(score / FINE_BIN_WIDTH)` (NULL when the score is NULL). Fixed-width bins make the table
  additive: a 7-day window is the sum of seven daily tables. Estimators coarsen the fine bins by an integer
  factor (`coarsen_bins`), so the SQL never has to know which width an estimator wants.
* swap cells (`position_swap_cells.sql`): impressions and clicks per policy x position x original_position
  for adjacent-swap traffic (an item moved by at most one slot).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

# Width of the bins the aggregation stores (score units). Must equal SQL_PARAMETERS["position_bias_bin_width"].
FINE_BIN_WIDTH = 0.01

BIN_COLUMNS = ["policy", "position", "score_bin", "impressions", "clicks"]
SWAP_COLUMNS = ["policy", "position", "original_position", "impressions", "clicks"]
_KEY_TYPES = {"position": "int64", "original_position": "int64", "score_bin": "Int64"}


class PositionBiasInputError(ValueError):
    """Impressions or aggregates an estimator cannot use; the message names the column/policy/position."""


def require_columns(frame: pd.DataFrame, columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise PositionBiasInputError(f"{what} lacks columns {missing}; it has {list(frame.columns)}")


def _validated_positions(frame: pd.DataFrame, column: str) -> np.ndarray:
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() | (values < 1) | (values != values.round())
    if bad.any():
        raise PositionBiasInputError(
            f"column {column!r} must hold integers >= 1 (1 = top slot); found {frame[column][bad].tolist()[0]!r} "
            f"in {int(bad.sum())} rows"
        )
    return values.to_numpy().astype(np.int64)


def _validated_clicks(frame: pd.DataFrame) -> np.ndarray:
    clicks = frame["click"]
    if clicks.isna().any():
        raise PositionBiasInputError(f"column 'click' has {int(clicks.isna().sum())} NULL values")
    array = clicks.to_numpy()
    bad = ~np.isin(array, (0, 1))
    if bad.any():
        raise PositionBiasInputError(f"column 'click' must be 0 or 1; found {array[bad].tolist()[0]!r} in {int(bad.sum())} rows")
    return array.astype(np.int64)


def aggregate_score_bins(
    impressions: pd.DataFrame, fine_width: float = FINE_BIN_WIDTH, default_policy: str = "production"
) -> pd.DataFrame:
    """Impressions and clicks per policy x position x score bin (rows without a score get a NULL bin).

    Without a `policy` column all rows are taken as `default_policy`."""
    require_columns(impressions, ["position", "score", "click"], "impressions")
    if "policy" in impressions.columns:
        policy_code, policies = pd.factorize(impressions["policy"].astype(str), sort=True)
    else:
        policy_code, policies = np.zeros(len(impressions), dtype=np.int64), np.array([default_policy])
    fine = np.floor(impressions["score"].to_numpy(dtype=float) / fine_width)
    missing = np.isnan(fine)
    # Integer keys group an order of magnitude faster than strings / nullable columns; NULL bins get a flag.
    frame = pd.DataFrame(
        {
            "policy": policy_code,
            "position": _validated_positions(impressions, "position"),
            "missing": missing,
            "score_bin": np.where(missing, 0, fine).astype(np.int64),
            "click": _validated_clicks(impressions),
        }
    )
    grouped = frame.groupby(["policy", "position", "missing", "score_bin"], sort=False)["click"].agg(["size", "sum"])
    out = grouped.reset_index()
    out["policy"] = np.asarray(policies, dtype=object)[out["policy"].to_numpy()]
    out["score_bin"] = out["score_bin"].astype("Int64").mask(out["missing"])
    return normalize_bins(out.rename(columns={"size": "impressions", "sum": "clicks"}))


def aggregate_swap_cells(impressions: pd.DataFrame, default_policy: str = "adjacent_swap") -> pd.DataFrame:
    """Impressions and clicks per policy x position x original_position for adjacent-swap traffic."""
    require_columns(impressions, ["position", "original_position", "click"], "impressions")
    if "policy" in impressions.columns:
        subset = impressions.loc[(impressions["policy"] == "adjacent_swap").to_numpy()]
    else:
        subset = impressions if default_policy == "adjacent_swap" else impressions.iloc[0:0]
    frame = pd.DataFrame(
        {
            "policy": "adjacent_swap",
            "position": _validated_positions(subset, "position"),
            "original_position": _validated_positions(subset, "original_position"),
            "click": _validated_clicks(subset),
        }
    )
    grouped = frame.groupby(["policy", "position", "original_position"], sort=True)["click"].agg(["size", "sum"])
    return normalize_swaps(grouped.reset_index().rename(columns={"size": "impressions", "sum": "clicks"}))


def _normalize(frame: pd.DataFrame, columns: list[str], keys: list[str], what: str) -> pd.DataFrame:
    """Sum duplicate keys (e.g. several days of one window), fix dtypes and the row order."""
    require_columns(frame, columns, what)
    frame = frame[columns].copy()
    frame["policy"] = frame["policy"].astype(str)
    for key in keys[1:]:
        frame[key] = frame[key].astype(_KEY_TYPES[key])
    for count in ("impressions", "clicks"):
        values = frame[count].to_numpy(dtype=float)
        if np.any(np.isnan(values)) or np.any(values < 0):
            raise PositionBiasInputError(f"{what}: column {count!r} must hold non-negative counts")
        frame[count] = values.astype(np.int64)
    if (frame["clicks"] > frame["impressions"]).any():
        row = frame.loc[frame["clicks"] > frame["impressions"]].iloc[0]
        raise PositionBiasInputError(f"{what}: more clicks than impressions at {dict(row[keys])}")
    summed = frame.groupby(keys, dropna=False, sort=True)[["impressions", "clicks"]].sum().reset_index()
    return summed[columns].reset_index(drop=True)


def normalize_bins(frame: pd.DataFrame) -> pd.DataFrame:
    return _normalize(frame, BIN_COLUMNS, BIN_COLUMNS[:3], "score-bin aggregates")


def normalize_swaps(frame: pd.DataFrame) -> pd.DataFrame:
    return _normalize(frame, SWAP_COLUMNS, SWAP_COLUMNS[:3], "swap-cell aggregates")


def coarsen_bins(bins: pd.DataFrame, factor: int) -> pd.DataFrame:
    """Merge `factor` consecutive fine bins into one (exact: floor(floor(x/w)/m) = floor(x/(m*w)))."""
    if factor < 1 or int(factor) != factor:
        raise PositionBiasInputError(f"bin coarsening factor must be a positive integer; got {factor!r}")
    if factor == 1:
        return bins
    out = bins.copy()
    out["score_bin"] = out["score_bin"] // int(factor)
    return normalize_bins(out)
