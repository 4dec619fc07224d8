"""Input checks shared by every audit statistic.

Errors name the argument (column), the group and the offending count, so that a user auditing a
file with millions of rows knows what to fix without re-reading the data.
"""
from __future__ import annotations

import numpy as np


class AuditInputError(ValueError):
    """Bad input to an audit: the message names the column, group and count that are wrong."""


def as_scores(scores, name: str = "scores", return_range: bool = False):
    """1-d float64 array of finite scores; NaN / inf are rejected with their count.

    With ``return_range`` also returns (min, max), which the check computes anyway.
    """
    arr = np.asarray(scores)
    if arr.ndim != 1:
        raise AuditInputError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise AuditInputError(f"{name} is empty")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise AuditInputError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    lo, hi = float(arr.min()), float(arr.max())  # NaN propagates; two fast reductions
    if not (np.isfinite(lo) and np.isfinite(hi)):
        bad = ~np.isfinite(arr)
        n_nan = int(np.isnan(arr).sum())
        raise AuditInputError(
            f"{name} contains {int(bad.sum())} non-finite values ({n_nan} NaN, "
            f"{int(bad.sum()) - n_nan} infinite) out of {arr.size}"
        )
    return (arr, lo, hi) if return_range else arr


def as_labels(labels, n: int, name: str = "labels") -> np.ndarray:
    """1-d bool array of 0/1 labels of length n; anything else is rejected with its count."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise AuditInputError(f"{name} must be 1-dimensional of length {n}, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if not np.issubdtype(arr.dtype, np.number):
        raise AuditInputError(f"{name} must be 0/1, got dtype {arr.dtype}")
    ok = (arr == 0) | (arr == 1)
    if not ok.all():
        bad = arr[~ok]
        examples = ", ".join(repr(v) for v in np.unique(bad)[:5].tolist())
        raise AuditInputError(
            f"{name} must contain only 0 and 1; found {bad.size} other values (e.g. {examples})"
        )
    return arr == 1


def as_groups(groups, n: int, name: str = "sensitive_features") -> tuple[np.ndarray, np.ndarray]:
    """Group codes 0..G-1 and the sorted distinct group values; missing values are rejected."""
    arr = np.asarray(groups)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise AuditInputError(f"{name} must be 1-dimensional of length {n}, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        missing = np.isnan(arr)
    elif arr.dtype == object:
        missing = np.array([v is None or (isinstance(v, float) and v != v) for v in arr], dtype=bool)
    else:
        missing = np.zeros(n, dtype=bool)
    if missing.any():
        raise AuditInputError(f"{name} has {int(missing.sum())} missing values (None/NaN) out of {n}")
    levels, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.intp, copy=False), levels


def as_cutoffs(cutoffs, name: str = "cutoffs") -> np.ndarray:
    """Sorted distinct false-positive-rate cutoffs, each in (0, 1]."""
    arr = np.atleast_1d(np.asarray(cutoffs, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise AuditInputError(f"{name} must be a non-empty list of numbers in (0, 1]")
    bad = ~((arr > 0) & (arr <= 1))
    if bad.any():
        raise AuditInputError(
            f"{name} must lie in (0, 1]; {int(bad.sum())} value(s) outside: {arr[bad].tolist()}"
        )
    return np.unique(arr)


def require_both_classes(n_pos: int, n_neg: int, where: str = "") -> None:
    """A ROC statistic and its variance need at least two positives and two negatives."""
    suffix = f" in {where}" if where else ""
    if n_pos + n_neg == 0:
        raise AuditInputError(f"no observations{suffix}")
    if n_pos == 0 or n_neg == 0:
        only = "negatives" if n_pos == 0 else "positives"
        raise AuditInputError(
            f"labels contain a single class{suffix}: {n_pos} positives and {n_neg} negatives "
            f"(only {only}); a ROC statistic needs both"
        )
    if n_pos < 2 or n_neg < 2:
        raise AuditInputError(
            f"too few observations{suffix} to estimate a variance: {n_pos} positives and "
            f"{n_neg} negatives (need at least 2 of each)"
        )
