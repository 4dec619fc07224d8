"""The clustering dimensions of an exposure audit's impressions, factorized once.

`exposure_parity` sums each group's influence per cluster of every dimension: one (items), or two (items and
requests) plus their intersection (the item x request cells) for two-way clustering. Several audits of the same
logged impressions (every candidate re-ranking the same requests, `audit.exposure_offpolicy`) share these
dimensions: factorizing them once saves the per-audit work and lets the audits' kept totals share one index per
dimension instead of holding a copy each (one label per item x request cell). Pure numpy / pandas.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.validation import AuditInputError


@dataclass(frozen=True)
class ClusterDimensions:
    """Each dimension's (name, cluster code per impression, the clusters' values as a named `pd.Index` in code
    order, or None when not ``labelled``), for ``size`` impressions."""

    dims: tuple
    size: int


def _named(clusters) -> list:
    if isinstance(clusters, dict):
        return list(clusters.items())
    if isinstance(clusters, tuple):
        return [(f"cluster {i + 1}", c) for i, c in enumerate(clusters)]
    return [("cluster", clusters)]


def cluster_dimensions(clusters, n: int, labelled: bool = True) -> ClusterDimensions:
    """`ClusterDimensions` of ``clusters`` (an array, a tuple of two or a dict {name: array}) for ``n``
    impressions; two dimensions get their intersection appended. ``labelled``: keep the clusters' values (the kept
    totals' index); the intersection's then are (first, second) value pairs."""
    if isinstance(clusters, ClusterDimensions):
        if clusters.size != n:
            raise AuditInputError(f"the cluster dimensions are for {clusters.size} impressions, not {n}")
        if labelled and any(values is None for _, _, values in clusters.dims):
            raise AuditInputError("the cluster dimensions were factorized without their values, which kept totals "
                                  "need: factorize them with labelled=True")
        return clusters
    named = [] if clusters is None else _named(clusters)
    if clusters is not None and len(named) not in (1, 2):
        raise AuditInputError(f"clusters takes one or two clustering dimensions, got {len(named)}")
    dims = []
    for name, values in named:
        arr = pd.Series(np.asarray(values) if not isinstance(values, pd.Series) else values.to_numpy())
        if arr.size != n:
            raise AuditInputError(f"clusters {name!r} has {arr.size} values for {n} impressions")
        if arr.isna().any():
            raise AuditInputError(f"clusters {name!r} has {int(arr.isna().sum())} missing values")
        codes, uniques = pd.factorize(arr)
        dims.append((str(name), codes, np.asarray(uniques, dtype=object)))
    if len(dims) == 2:
        dims.append(_intersection(*dims, labelled))
    return ClusterDimensions(tuple((name, codes, pd.Index(values, name=name) if labelled else None)
                                   for name, codes, values in dims), n)


def _intersection(first, second, labelled: bool):
    """The intersection dimension of two factorized clusterings: cells numbered in order of first appearance, as
    factorizing the (first, second) pairs would, but from the two dimensions' integer codes (no tuple per
    impression); the cells' (first, second) values only when ``labelled``."""
    (name_a, codes_a, uniques_a), (name_b, codes_b, uniques_b) = first, second
    width = len(uniques_b)
    codes, cells = pd.factorize(codes_a.astype(np.int64) * width + codes_b)
    values = None
    if labelled:
        values = np.empty(cells.size, dtype=object)
        values[:] = list(zip(uniques_a[cells // width], uniques_b[cells % width]))
    return f"{name_a} × {name_b}", codes, values
