"""DataFrames to JSON-safe records (numpy scalars to Python, NaN / inf to None)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def records(df: pd.DataFrame) -> list:
    return [{k: plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
